"""Where a batch-1 call of the exported classifier spends its time.

A `BertClassifier` on a `--init-checkpoint` encoder (MiniLM by default: what
a CPU-serving user deploys) is exported with `padding="longest"` and called as
TensorFlow Serving calls it, one real review sentence per request. The call is
taken apart, each part timed alone in the same windows:

- strings: the whole `serving_default` call, tokenization inside;
- tokenize + pack: the same traced preprocessing functions the signature runs;
- ids only: `serve_ids` on the packed ids (the model without tokenization);
- arithmetic floor: the model's multiply-adds at that length over this CPU's
  float32 matmul peak, timed here (what the products cannot go below);
- dispatch floor: a chain of as many trivial ops as the model's graph holds,
  run as one tf.function (what executing that many ops costs, with no work).

The rest of "ids only" past the two floors is the kernels' shortfall from the
peak on small matrices. Intra-op threads 1 and all are both timed: at batch 1
the products are small: `--threads 1` against the default shows whether
sharing them pays. Best of several windows, interleaved.

    python benchmarks/batch1_profile.py [--init-checkpoint FOLDER] [--windows 5]

Writes benchmarks/results/batch1_profile.{md,json} (`results_file`).
"""

import argparse
import csv
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_bert import BertClassifier, BertConfig, BertEncoder, BertTokenizer  # noqa: E402
from keras_bert.export import export_saved_model  # noqa: E402
from keras_bert.export.base import traced_pack, traced_tokenizer  # noqa: E402

import results_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REVIEWS = os.path.join(HERE, "..", "data", "rotten_tomatoes", "dev.tsv")
DEFAULT_VOCAB = os.path.join(HERE, "..", "keras_bert", "assets", "bert_uncased_vocab.txt")


def review_sentences(path, count):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row["sentence"] for row in rows[:count]]


def best_times(runs, windows, repeats):
    """Seconds per call of each run: the fastest window's mean; the runs take
    turns in every window, so load from other processes hits them alike."""
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(windows):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(repeats):
                run()
            best[name] = min(best[name], (time.perf_counter() - start) / repeats)
    return best


def matmul_peak(windows):
    """float32 GFLOP/s of a (512, 384) x (384, 1536) product: the size of a
    feed-forward product of a few short requests (a big square product
    overstates what batch 1 can reach)."""
    a, b = tf.random.normal((512, 384)), tf.random.normal((384, 1536))
    product = tf.function(lambda: tf.matmul(a, b))
    seconds = best_times({"matmul": lambda: product().numpy()}, windows, 20)["matmul"]
    return 2 * 512 * 384 * 1536 / seconds / 1e9


def encoder_flops(config, tokens):
    """Multiply-adds x 2 of one sequence of `tokens` through the encoder."""
    h, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_layer = 2 * tokens * (4 * h * h + 2 * h * f) + 2 * 2 * tokens * tokens * h
    return layers * per_layer + 2 * h * h  # + the pooler


def op_chain(count):
    """A tf.function of `count` dependent trivial ops."""

    @tf.function
    def chain(x):
        for _ in range(count):
            x = x + 1.0
        return x

    return chain


def graph_op_count(function):
    """Ops in a concrete function's graph and the functions it calls (the
    model is one call inside the signature)."""
    graph = function.graph
    count = len(graph.get_operations())
    for name, inner in getattr(graph, "_functions", {}).items():
        count += len(inner.graph.get_operations()) if hasattr(inner, "graph") else 0
    return count


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--init-checkpoint",
        default=None,
        help="real weights (a HuggingFace folder, e.g. all-MiniLM-L6-v2); "
        "default: random weights of --preset",
    )
    parser.add_argument("--preset", default="mini")
    parser.add_argument(
        "--vocab-file", default=None, help="default: the checkpoint's, else the shipped uncased one"
    )
    parser.add_argument("--requests", type=int, default=16, help="review sentences timed")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads (default: TensorFlow's, all cores)",
    )
    results_file.add_arguments(parser, "batch1_profile")
    args = parser.parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)

    if args.init_checkpoint:
        encoder = BertEncoder.from_pretrained(args.init_checkpoint)
        vocab = args.vocab_file or os.path.join(args.init_checkpoint, "vocab.txt")
    else:
        encoder = BertEncoder(BertConfig.preset(args.preset))
        vocab = args.vocab_file or DEFAULT_VOCAB
    model = BertClassifier(encoder, 2)
    tokenizer = BertTokenizer(vocab)
    folder = tempfile.mkdtemp(prefix="batch1_profile_")
    path = export_saved_model(
        model, tokenizer, os.path.join(folder, "model", "1"), seq_length=128, padding="longest"
    )
    served = tf.saved_model.load(path)
    strings, by_ids = served.signatures["serving_default"], served.signatures["serve_ids"]
    preprocess = tf.function(
        lambda text: traced_pack(tokenizer, 128)(traced_tokenizer(tokenizer)(text)[0])
    )

    sentences = review_sentences(REVIEWS, args.requests)
    requests = [tf.constant([s]) for s in sentences]
    packed = [preprocess(r) for r in requests]
    lengths = [int(p["input_mask"].numpy().sum()) for p in packed]
    no_pair = tf.constant([], tf.string)
    ops = graph_op_count(by_ids)
    chain, one = op_chain(ops), tf.constant(0.0)
    rows, figures = [], {}
    runs = {
        "strings": lambda: [strings(text=r, text_pair=no_pair) for r in requests],
        "tokenize + pack": lambda: [preprocess(r) for r in requests],
        "ids only": lambda: [
            by_ids(**{k: p[k] for k in ("input_ids", "input_mask", "segment_ids")}) for p in packed
        ],
        "dispatch floor": lambda: [chain(one) for _ in requests],
    }
    best = {
        name: seconds / len(requests) for name, seconds in best_times(runs, args.windows, 1).items()
    }
    peak = matmul_peak(args.windows)
    arithmetic = np.mean([encoder_flops(encoder.config, n) for n in lengths]) / (peak * 1e9)
    best["arithmetic floor"] = arithmetic
    total = best["strings"]
    for name in ("strings", "tokenize + pack", "ids only", "arithmetic floor", "dispatch floor"):
        rows.append(f"| {name} | {best[name] * 1e3:.2f} | {best[name] / total:.0%} |")
        figures[name.replace(" ", "_").replace("+", "and")] = best[name] * 1e3
    rest = best["ids only"] - best["arithmetic floor"] - best["dispatch floor"]
    rows.append(f"| ids only - both floors | {rest * 1e3:.2f} | {rest / total:.0%} |")
    table = "\n".join(
        ["| part of a batch-1 call | ms per request | share of strings |", "|---|---|---|", *rows]
    )
    summary = (
        f"{len(requests)} review sentences, {np.mean(lengths):.1f} tokens on average "
        f"(padding=longest); {ops} ops in the model's graph; float32 matmul peak "
        f"{peak:.1f} GFLOP/s at feed-forward size; "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'} "
        "intra-op threads"
    )
    print(summary)
    print(table)
    if not args.no_results:
        results_file.write(
            args.results_name,
            "Where a batch-1 call of the exported classifier spends its time",
            table=table,
            argv=argv if argv is not None else sys.argv[1:],
            figures={
                "model": args.init_checkpoint or args.preset,
                "mean_tokens": np.mean(lengths),
                "graph_ops": ops,
                "matmul_peak_gflops": peak,
                "ms_per_request": figures,
            },
            method=summary + f"; best of {args.windows} interleaved windows.",
            matmul_peak_gflops=None,
            directory=args.results_dir,
        )


if __name__ == "__main__":
    main()
