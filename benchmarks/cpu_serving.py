"""Serving on this CPU: each keras_bert export form against ONNX Runtime float32
and dynamic int8, speed and dev accuracy of one fine-tuned classifier, in one run.

The classifier is `hf_reference_classifier.py`'s MiniLM fine-tune on
rotten_tomatoes: keras_bert reads its encoder folder and head, ONNX Runtime
the same weights exported from PyTorch (`onnx_peer.py`, in the peers'
environment and a process of its own). The script checks the two answer the
same logits before it times anything.

Forms (`--forms`): keras_bert's SavedModels, `export_saved_model(...,
padding="longest")` as `float32`, `int8` (`quantize="int8"`) and `bfloat16`
(`precision="mixed_bfloat16"`), loaded with `tf.saved_model.load` and called
through `serving_default` (strings in, as a server answers); keras_bert's
LiteRT files, `export_litert(..., padding="longest")` float32 and int8
(dynamic-range: XNNPACK's int8 products, VNNI where the CPU has it), called
through their signature runner with the same thread count; ONNX Runtime
float32 (optimized: fused attention) and int8 (`quantize_dynamic`), strings
tokenized by HuggingFace's fast tokenizer, padded to the batch's longest.

Threads as a user sets them: TensorFlow's and ONNX Runtime's intra-op threads
= the cores (`--threads`). Texts: rotten_tomatoes dev reviews. Batch 1: mean
latency of single calls over `--calls` different reviews; batch 32: sequences
per second over batches of 32 reviews. Each window times every form once,
forms in a rotated order (the machine is shared), and each figure is the best
of `--windows` windows; the load average is recorded beside each window.
Accuracy: every form's labels for the whole dev set, batches of 64.

    python benchmarks/hf_reference_classifier.py ... --output CLASSIFIER   # peers' Python
    python benchmarks/cpu_serving.py --classifier CLASSIFIER \\
        --dev data/rotten_tomatoes/dev.tsv --peer-python .venv-peers/bin/python

Writes benchmarks/results/cpu_serving.{md,json} (`results_file`).
"""

import argparse
import csv
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# oneDNN on, as the serving guide asks for int8 exports (TensorFlow turns it on
# by itself only on CPUs with VNNI, BF16 or AMX); the table prints the setting.
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import results_file  # noqa: E402
from peer_process import PeerProcess, add_peer_python_argument, peer_python  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# keras_bert's export forms: the name in the tables -> export_saved_model's options.
EXPORT_FORMS = {
    "keras_bert float32": {},
    "keras_bert int8": {"quantize": "int8"},
    "keras_bert bfloat16": {"precision": "mixed_bfloat16"},
    "keras_bert LiteRT float32": {"format": "litert"},
    "keras_bert LiteRT int8": {"format": "litert", "quantize": "int8"},
}
# The serving goals: keras_bert's fastest form over the fastest peer, per batch size.
GOALS = {1: 1.0, 32: 1.5}
# A keras_bert form counts for a goal only within this many points of float32's
# dev accuracy (the peers count as they come: ONNX Runtime int8 is the bar).
MAX_GAP_POINTS = 0.5


def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [row["sentence"] for row in rows], [row["label"] for row in rows]


def keras_classifier(folder):
    """(BertClassifier, BertTokenizer, label names) of hf_reference_classifier.py's folder."""
    from keras_bert import BertEncoder, BertTokenizer
    from keras_bert.models.classifier import BertClassifier
    from keras_bert.preprocessing import BertPreprocessor

    with open(os.path.join(folder, "labels.txt"), encoding="utf-8") as f:
        labels = f.read().split()
    encoder = BertEncoder.from_pretrained(os.path.join(folder, "encoder"))
    tokenizer = BertTokenizer(os.path.join(folder, "encoder", "vocab.txt"))
    # The preprocessor carries the vocabulary and casing LiteRT's file takes inside.
    model = BertClassifier(
        encoder,
        len(labels),
        label_names=labels,
        preprocessor=BertPreprocessor.from_tokenizer(tokenizer),
    )
    head = np.load(os.path.join(folder, "head.npz"))
    model.get_layer("classifier_output").set_weights([head["kernel"], head["bias"]])
    return model, tokenizer, labels


class SavedModelForm:
    """One keras_bert export, loaded as a server loads it."""

    def __init__(self, model, tokenizer, folder, seq_length, options):
        from keras_bert.export import export_saved_model

        path = export_saved_model(
            model, tokenizer, folder, seq_length=seq_length, padding="longest", **options
        )
        self.serve = tf.saved_model.load(path).signatures["serving_default"]
        self.no_pair = tf.constant([], tf.string)

    def outputs(self, texts):
        return self.serve(text=tf.constant(texts), text_pair=self.no_pair)

    def seconds(self, batches):
        """Mean seconds per call over `batches` (lists of texts)."""
        tensors = [tf.constant(batch) for batch in batches]
        start = time.perf_counter()
        for batch in tensors:
            self.serve(text=batch, text_pair=self.no_pair)["label"].numpy()
        return (time.perf_counter() - start) / len(tensors)

    def labels(self, texts, batch=64):
        found = []
        for begin in range(0, len(texts), batch):
            found += [
                b.decode() for b in self.outputs(texts[begin : begin + batch])["label"].numpy()
            ]
        return found


class LiteRTForm:
    """One keras_bert LiteRT file, called through its signature runner."""

    def __init__(self, model, folder, seq_length, threads, quantize=None):
        from keras_bert.export.litert import export_litert, litert_interpreter

        os.makedirs(folder, exist_ok=True)
        path = export_litert(
            model,
            os.path.join(folder, "classifier.tflite"),
            seq_length=seq_length,
            quantize=quantize,
            padding="longest",
        )
        self.runner = litert_interpreter(path, num_threads=threads).get_signature_runner()

    def outputs(self, texts):
        return self.runner(text=np.array(texts, dtype=object))

    def seconds(self, batches):
        arrays = [np.array(batch, dtype=object) for batch in batches]
        start = time.perf_counter()
        for batch in arrays:
            self.runner(text=batch)["label"]
        return (time.perf_counter() - start) / len(arrays)

    def labels(self, texts, batch=64):
        found = []
        for begin in range(0, len(texts), batch):
            found += [b.decode() for b in self.outputs(texts[begin : begin + batch])["label"]]
        return found


class PeerForm:
    """One ONNX Runtime form, asked over the peer's pipe (timed inside the peer)."""

    def __init__(self, peer, name, labels):
        self.peer, self.name, self.names = peer, name, labels

    def seconds(self, batches):
        return sum(self.peer.ask(("time", self.name, batch, 1)) for batch in batches) / len(batches)

    def labels(self, texts, batch=64):
        found = []
        for begin in range(0, len(texts), batch):
            ids = self.peer.ask(("predict", self.name, texts[begin : begin + batch]))
            found += [self.names[i] for i in ids]
        return found


def call_batches(texts, batch, calls):
    """`calls` batches of `batch` consecutive reviews, wrapping around."""
    return [[texts[(c * batch + i) % len(texts)] for i in range(batch)] for c in range(calls)]


def time_forms(forms, texts, batch_sizes, calls, windows):
    """{batch: {form: [seconds per call, per window]}}, and the load average
    (1 minute) at the start of each window."""
    seconds = {b: {name: [] for name in forms} for b in batch_sizes}
    loads = []
    names = list(forms)
    for batch in batch_sizes:  # warm-up: each shape's first call traces / allocates
        for form in forms.values():
            form.seconds(call_batches(texts, batch, 2))
    for window in range(windows):
        loads.append(os.getloadavg()[0])
        order = names[window % len(names) :] + names[: window % len(names)]
        for batch in batch_sizes:
            batches = call_batches(texts, batch, calls if batch == 1 else max(2, calls // 8))
            for name in order:
                seconds[batch][name].append(forms[name].seconds(batches))
        print(
            f"window {window + 1} (load {loads[-1]:.1f}): "
            + "; ".join(
                f"{name} "
                + ", ".join(f"b{b} {seconds[b][name][-1] * 1e3:.1f} ms" for b in batch_sizes)
                for name in names
            ),
            flush=True,
        )
    return seconds, loads


def speed_rows(seconds, accuracy, batch_sizes):
    """Markdown rows: per form its best batch-1 latency, batch-32 rate, dev accuracy."""
    rows = []
    for name in accuracy:
        cells = []
        for batch in batch_sizes:
            best = min(seconds[batch][name])
            cells.append(f"{best * 1e3:.1f} ms" if batch == 1 else f"{batch / best:.1f} seq/s")
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {accuracy[name]:.4f} |")
    return rows


def within_bound(accuracy):
    """keras_bert's forms within MAX_GAP_POINTS of its float32's dev accuracy."""
    base = accuracy.get("keras_bert float32")
    return [
        name
        for name, value in accuracy.items()
        if name.startswith("keras_bert")
        and (base is None or 100 * abs(value - base) <= MAX_GAP_POINTS)
    ]


def goal_rows(seconds, batch_sizes, accuracy):
    """Per batch: keras_bert's fastest form within the accuracy bound / the
    fastest peer, against the goal."""
    rows, figures = [], {}
    for batch in batch_sizes:
        best = {name: min(values) for name, values in seconds[batch].items()}
        peers = [n for n in best if not n.startswith("keras_bert")]
        if not peers:  # --no-peers
            continue
        ours = min(within_bound(accuracy), key=best.get)
        peer = min(peers, key=best.get)
        ratio = best[peer] / best[ours]
        goal = GOALS.get(batch)
        verdict = "" if goal is None else ("met" if ratio >= goal else "NOT met")
        rows.append(
            f"| batch {batch} | {ours} | {peer} | {ratio:.2f}x | "
            + (f"{goal:.1f}x: {verdict}" if goal else "")
            + " |"
        )
        figures[str(batch)] = {"ours": ours, "peer": peer, "speedup": ratio, "goal": goal}
    return rows, figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classifier", required=True, help="hf_reference_classifier.py's folder")
    parser.add_argument("--dev", required=True, help="rotten_tomatoes dev.tsv")
    parser.add_argument("--forms", default=",".join(EXPORT_FORMS))
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--calls", type=int, default=32, help="batch-1 calls per window")
    parser.add_argument("--no-peers", action="store_true")
    add_peer_python_argument(parser)
    results_file.add_arguments(parser, "cpu_serving")
    args = parser.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(cpu_features_line(results_file.cpu()["flags"]), flush=True)
    texts, gold = read_tsv(args.dev)
    model, tokenizer, labels = keras_classifier(args.classifier)
    folder = tempfile.mkdtemp(prefix="cpu_serving_")
    forms = {}
    for name in args.forms.split(","):
        start = time.perf_counter()
        options = dict(EXPORT_FORMS[name])
        subfolder = os.path.join(folder, name.split(" ", 1)[1].replace(" ", "_"))
        if options.pop("format", None) == "litert":
            forms[name] = LiteRTForm(model, subfolder, args.seq_length, args.threads, **options)
        else:
            forms[name] = SavedModelForm(
                model, tokenizer, os.path.join(subfolder, "1"), args.seq_length, options
            )
        print(f"exported {name} in {time.perf_counter() - start:.0f} s", flush=True)
    peer, peer_versions = None, {}
    if not args.no_peers:
        peer = PeerProcess(
            os.path.join(HERE, "onnx_peer.py"),
            {
                "classifier": os.path.join(args.classifier, "classifier"),
                "threads": args.threads,
                "seq_length": args.seq_length,
                "folder": os.path.join(folder, "onnx"),
            },
            python=peer_python(args.peer_python),
        )
        if "missing" in peer.facts:
            raise SystemExit(f"the ONNX Runtime peer cannot start: {peer.facts['missing']}")
        peer_versions = {"peers": ", ".join(f"{k} {v}" for k, v in peer.facts["versions"].items())}
        for name in peer.ask(("forms",)):
            forms[name] = PeerForm(peer, name, labels)
    check_same_logits(forms, peer, texts[:8])
    accuracy = {}
    for name, form in forms.items():
        predicted = form.labels(texts)
        accuracy[name] = float(np.mean([p == g for p, g in zip(predicted, gold)]))
        print(f"{name}: dev accuracy {accuracy[name]:.4f}", flush=True)
    seconds, loads = time_forms(forms, texts, batch_sizes, args.calls, args.windows)
    if peer is not None:
        peer.close()
    flags = results_file.cpu()["flags"]
    table = report_table(seconds, accuracy, batch_sizes, loads, flags, args.threads)
    print(table)
    if not args.no_results:
        goals = goal_rows(seconds, batch_sizes, accuracy)[1]
        results_file.write(
            args.results_name,
            "Serving on this CPU: keras_bert's exports against ONNX Runtime",
            table=table,
            argv=argv,
            figures={
                "dev": args.dev,
                "examples": len(texts),
                "threads": args.threads,
                "load_average_per_window": loads,
                "accuracy": accuracy,
                "seconds_per_call": {str(b): seconds[b] for b in batch_sizes},
                "goals": goals,
            },
            method=f"rotten_tomatoes dev reviews, strings in; {args.threads} intra-op threads on "
            f"every side; best of {args.windows} windows, forms in rotated order; batch 1: "
            f"mean over {args.calls} single calls; dev accuracy over all {len(texts)} reviews.",
            headlines=[
                results_file.headline(
                    f"cpu_serving_b{batch}",
                    f"serving the MiniLM classifier, {batch} review{'s' if batch > 1 else ''} a call",
                    "ms" if batch == 1 else "seq/s",
                    {
                        name: (min(s) * 1e3 if batch == 1 else batch / min(s))
                        for name, s in seconds[batch].items()
                    },
                )
                for batch in batch_sizes
            ],
            peer_versions=peer_versions,
            directory=args.results_dir,
        )


def cpu_features_line(flags):
    """What the reduced-precision forms run on here, said plainly: a bfloat16
    or int8 figure from a CPU without the feature is not that feature's speed."""
    from keras_bert.kernels.precision import CPU_BFLOAT16_FLAGS

    bfloat16 = [flag.upper() for flag in CPU_BFLOAT16_FLAGS if flag in flags]
    int8 = [flag.upper() for flag in results_file.INT8_DOT_PRODUCT_FLAGS if flag in flags]
    return (
        "bfloat16 arithmetic: "
        + (
            ", ".join(bfloat16)
            if bfloat16
            else "none on this CPU, the bfloat16 form runs emulated (widened to float32)"
        )
        + "; int8 dot products: "
        + (
            ", ".join(int8)
            if int8
            else "no VNNI / AMX on this CPU, every int8 form (ours and ONNX Runtime's) "
            "multiplies with AVX2's u8 x s8 pairs summed in int16"
        )
    )


def report_table(seconds, accuracy, batch_sizes, loads, flags, threads):
    heads = [f"batch {b}" if b == 1 else f"batch {b}" for b in batch_sizes]
    lines = [
        f"CPU flags: {', '.join(flags) or 'none'}; {threads} intra-op threads; "
        # TensorFlow turns oneDNN on by itself only on CPUs with VNNI, BF16 or
        # AMX; keras_bert's int8 products run on oneDNN's kernel alone.
        f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}; load average "
        f"(1 min) per window: {', '.join(f'{x:.1f}' for x in loads)}",
        "",
        cpu_features_line(flags),
        "",
        "| form | " + " | ".join(heads) + " | dev accuracy |",
        "|---" * (len(heads) + 2) + "|",
        *speed_rows(seconds, accuracy, batch_sizes),
        "",
        f"| goal | keras_bert's fastest within {MAX_GAP_POINTS} points | fastest peer | "
        "speed-up | goal |",
        "|---|---|---|---|---|",
        *goal_rows(seconds, batch_sizes, accuracy)[0],
        "",
        "| accuracy against float32 | points |",
        "|---|---|",
        *[
            f"| {name} | {100 * (value - accuracy['keras_bert float32']):+.2f} |"
            for name, value in accuracy.items()
            if name != "keras_bert float32" and "keras_bert float32" in accuracy
        ],
    ]
    return "\n".join(lines)


def check_same_logits(forms, peer, texts, tolerance=1e-3):
    """keras_bert float32's logits against ONNX Runtime float32's on a few
    reviews: the same weights answer the same (float32 rounding apart)."""
    ours = forms.get("keras_bert float32")
    if ours is None or peer is None:
        return
    mine = ours.outputs(texts)["logits"].numpy()
    theirs = np.asarray(peer.ask(("logits", "onnxruntime float32", texts)))
    gap = float(np.max(np.abs(mine - theirs)))
    print(f"largest logit gap, keras_bert float32 - onnxruntime float32: {gap:.2e}")
    if gap > tolerance:
        raise SystemExit(f"the two sides do not hold the same classifier: logits differ by {gap}")


if __name__ == "__main__":
    main()
