"""Serving latency and throughput of an exported SavedModel (strings in) against
the same model fed ids that HuggingFace `tokenizers` made in Python, in one run.

A `BertClassifier` on a `--preset` encoder (random weights: speed does not
depend on them; `--init-checkpoint` for real ones) is exported with
`keras_bert.export`, loaded back with `tf.saved_model.load`, and timed:

- strings: `serving_default(text)`, tokenization inside the graph;
- HF + ids: `tokenizers.BertWordPieceTokenizer.encode_batch` in Python, then
  `serve_ids(input_ids, input_mask, segment_ids)` of the same SavedModel;
- ids only: `serve_ids` on ready ids, the model alone.

Tokenization's share of the end-to-end time: for the SavedModel, its in-graph
tokenize + pack (the same traced functions, timed alone) over `strings`; for
the Python path, HF time / (HF time + ids only).
Batch 1 gives latency, batch 64 throughput; every sequence is 128 tokens
(Austen paragraphs, cut). Each figure is the best of several timing windows,
since other processes share the CPUs.

    pip install -e .[bench]
    python benchmarks/serving_latency.py [--preset base] [--windows 5]

Writes benchmarks/results/serving_latency.{md,json} (`results_file`).
"""

import argparse
import os
import re
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert import BertConfig, BertEncoder, BertTokenizer  # noqa: E402
from keras_bert.export import export_saved_model  # noqa: E402

import results_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEXT = os.path.join(HERE, "..", "keras_bert", "assets", "austen", "emma.txt")
DEFAULT_VOCAB = os.path.join(HERE, "..", "keras_bert", "assets", "bert_uncased_vocab.txt")


def paragraphs(path, count, min_words=130):
    """Long paragraphs (each fills 128 tokens) of a Project Gutenberg-style text."""
    with open(path, encoding="utf-8") as f:
        blocks = [" ".join(b.split()) for b in re.split(r"\n\s*\n", f.read())]
    long = [b for b in blocks if len(b.split()) >= min_words]
    if not long:
        raise ValueError(f"{path}: no paragraph of {min_words} words")
    return [long[i % len(long)] for i in range(count)]


def best_times(runs, windows, repeats):
    """Seconds per call of each run: the fastest window's mean over `repeats`
    calls. Windows of the runs interleave, so load from other processes hits
    them alike."""
    for run in runs.values():
        run()  # warm-up: the first call of a loaded signature is slow
    best = {name: float("inf") for name in runs}
    for _ in range(windows):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(repeats):
                run()
            best[name] = min(best[name], (time.perf_counter() - start) / repeats)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--init-checkpoint", default=None, help="real weights (any format)")
    parser.add_argument("--vocab-file", default=DEFAULT_VOCAB)
    parser.add_argument("--text", default=DEFAULT_TEXT)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--batch-sizes", default="1,64")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=None, help="intra/inter-op threads (default: TensorFlow's)"
    )
    results_file.add_arguments(parser, "serving_latency")
    args = parser.parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from tokenizers import BertWordPieceTokenizer  # pip install -e .[bench]

    from keras_bert.models.classifier import BertClassifier

    if args.init_checkpoint:
        encoder = BertEncoder.from_pretrained(args.init_checkpoint)
    else:
        encoder = BertEncoder(BertConfig.preset(args.preset))
    model = BertClassifier(encoder, 2)
    tokenizer = BertTokenizer(args.vocab_file)
    folder = tempfile.mkdtemp(prefix="serving_latency_")
    start = time.perf_counter()
    path = export_saved_model(
        model, tokenizer, os.path.join(folder, "model", "1"), seq_length=args.seq_length
    )
    print(
        f"exported {args.init_checkpoint or args.preset} classifier "
        f"({model.count_params():,} weights) in {time.perf_counter() - start:.0f} s"
    )
    served = tf.saved_model.load(path)
    strings, by_ids = served.signatures["serving_default"], served.signatures["serve_ids"]

    hf = BertWordPieceTokenizer(args.vocab_file, lowercase=True)
    hf.enable_truncation(args.seq_length)
    hf.enable_padding(length=args.seq_length)

    def hf_features(texts):
        encodings = hf.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in encodings], np.int32),
            "input_mask": np.array([e.attention_mask for e in encodings], np.int32),
            "segment_ids": np.array([e.type_ids for e in encodings], np.int32),
        }

    # The SavedModel's preprocessing alone: the same traced tokenizer and packing
    # functions its signatures call (keras_bert.export.base).
    from keras_bert.export.base import traced_pack, traced_tokenizer

    preprocess = tf.function(
        lambda text: traced_pack(tokenizer, args.seq_length)(traced_tokenizer(tokenizer)(text)[0])
    )

    print(
        f"sequence length {args.seq_length}, best of {args.windows} windows, "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'} threads"
    )
    print(
        f"{'batch':>5} | {'strings (SavedModel)':>22} | {'HF tokenizers + ids':>22} | "
        f"{'ids only (model)':>17} | {'tokenize: ours':>14} | {'HF':>8} | "
        f"{'share of end-to-end: ours':>25} | {'HF':>6}"
    )
    measured = {}
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        texts = paragraphs(args.text, batch)
        text_tensor = tf.constant(texts)
        features = hf_features(texts)
        ours_ids = tokenizer.pack(text_tensor, seq_length=args.seq_length)
        same = np.array_equal(ours_ids["input_ids"].numpy(), features["input_ids"])
        id_tensors = {k: tf.constant(v) for k, v in features.items()}
        repeats = max(1, 8 // batch)
        no_pair = tf.constant([], tf.string)
        best = best_times(
            {
                "strings": lambda: strings(text=text_tensor, text_pair=no_pair),
                "ids": lambda: by_ids(**id_tensors),
                "hf": lambda: hf_features(texts),
                "ours": lambda: preprocess(text_tensor),
            },
            args.windows,
            repeats,
        )
        t_strings, t_ids, t_hf, t_ours = (best[k] for k in ("strings", "ids", "hf", "ours"))
        t_python = t_hf + t_ids
        share_ours = t_ours / t_strings
        share_hf = t_hf / t_python

        def rate(seconds):
            return f"{seconds * 1e3:8.1f} ms {batch / seconds:7.1f}/s"

        print(
            f"{batch:>5} | {rate(t_strings):>22} | {rate(t_python):>22} | "
            f"{t_ids * 1e3:>14.1f} ms | {t_ours * 1e3:>11.2f} ms | {t_hf * 1e3:>5.2f} ms | "
            f"{share_ours:>25.1%} | {share_hf:>6.1%}"
            + ("" if same else "   (ids differ from HF's on some text)")
        )
        measured[batch] = {
            "strings_ms": t_strings * 1e3,
            "hf_tokenizers_and_ids_ms": t_python * 1e3,
            "ids_only_ms": t_ids * 1e3,
            "tokenize_ours_ms": t_ours * 1e3,
            "tokenize_hf_ms": t_hf * 1e3,
            "same_ids": bool(same),
        }
    print("ms: seconds per call (latency); /s: sequences per second (throughput)")
    if not args.no_results:
        write_results(args, argv, model.count_params(), measured)


def write_results(args, argv, weights, measured):
    lines = [
        "| batch | strings (SavedModel) ms | HF tokenizers + ids ms | ids only ms | "
        "tokenize: ours ms | tokenize: HF ms |",
        "|---|---|---|---|---|---|",
    ] + [
        f"| {batch} | {row['strings_ms']:.1f} | {row['hf_tokenizers_and_ids_ms']:.1f} | "
        f"{row['ids_only_ms']:.1f} | {row['tokenize_ours_ms']:.2f} | {row['tokenize_hf_ms']:.2f} |"
        for batch, row in measured.items()
    ]
    results_file.write(
        args.results_name,
        "Serving latency: strings in against ids from HuggingFace tokenizers",
        table="\n".join(lines),
        argv=argv,
        figures={
            "model": args.init_checkpoint or args.preset,
            "weights": weights,
            "seq_length": args.seq_length,
            "windows": args.windows,
            "batches": {str(batch): row for batch, row in measured.items()},
        },
        method=f"Length {args.seq_length} (Austen paragraphs, cut), best of {args.windows} "
        "windows per figure.",
        directory=args.results_dir,
    )


if __name__ == "__main__":
    main()
