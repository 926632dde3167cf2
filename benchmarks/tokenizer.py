"""Tokenizer throughput on the Austen corpus: ours vs its peers, in one run.

Peers: bare `tensorflow_text.FastBertTokenizer` (the speed target: ours must stay
within 2x of it), HuggingFace `tokenizers` (Rust, `pip install -e .[bench]`) and
the original Python `FullTokenizer` (tf-models-official). Each TF tokenizer runs
inside one `tf.function` on batches of lines; each figure is the best of several
timing windows over the whole corpus, since other processes share the CPUs.

    python benchmarks/tokenizer.py [--batch-size 1024] [--windows 5]
    # long, partly non-ASCII documents (the Unicode and offset-mapping paths):
    python benchmarks/tokenizer.py --corpus data/bbc_news/dev.tsv \
        --batch-size 64 --python-lines 300 --results-name tokenizer_bbc

Writes benchmarks/results/tokenizer.{md,json} (`results_file`).
"""

import argparse
import glob
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from keras_bert.text.tokenizer import BertTokenizer  # noqa: E402

import results_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.path.join(HERE, "..", "keras_bert", "assets", "austen")
DEFAULT_VOCAB = os.path.join(HERE, "..", "keras_bert", "assets", "bert_uncased_vocab.txt")


def read_lines(corpus):
    """Lines of a folder's .txt files, or the last column of a .tsv with a header."""
    if corpus.endswith(".tsv"):
        with open(corpus, encoding="utf-8") as f:
            next(f)
            return [line.rstrip("\n").split("\t")[-1] for line in f]
    lines = []
    for path in sorted(glob.glob(os.path.join(corpus, "*.txt"))):
        with open(path, encoding="utf-8") as f:
            lines.extend(line.rstrip("\n") for line in f)
    return lines


def best_rate(run, batches, num_lines, windows):
    """Lines per second of the fastest of `windows` passes over all batches."""
    run(batches[0])  # trace / warm up
    best = float("inf")
    for _ in range(windows):
        start = time.perf_counter()
        for batch in batches:
            run(batch)
        best = min(best, time.perf_counter() - start)
    return num_lines / best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus", default=DEFAULT_CORPUS, help="folder of .txt files, or a .tsv (its last column)"
    )
    parser.add_argument("--vocab-file", default=DEFAULT_VOCAB)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument(
        "--python-lines",
        type=int,
        default=10000,
        help="the original Python tokenizer is timed on this many lines",
    )
    results_file.add_arguments(parser, "tokenizer")
    args = parser.parse_args(argv)

    lines = read_lines(args.corpus)
    batches = [
        tf.constant(lines[i : i + args.batch_size]) for i in range(0, len(lines), args.batch_size)
    ]
    ours = BertTokenizer(args.vocab_file)
    fast = tf_text.FastBertTokenizer(
        ours.vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    print(
        f"{len(lines):,} lines ({sum(not x.isascii() for x in lines):,} with non-ASCII), "
        f"{sum(map(len, lines)):,} characters, batches of {args.batch_size}, "
        f"best of {args.windows} windows"
    )

    rates = {}
    for name, fn in [
        ("keras_bert BertTokenizer.tokenize", ours.tokenize),
        ("tf_text FastBertTokenizer.tokenize", fast.tokenize),
        ("keras_bert BertTokenizer.tokenize_with_offsets", ours.tokenize_with_offsets),
        ("tf_text FastBertTokenizer.tokenize_with_offsets", fast.tokenize_with_offsets),
    ]:
        rates[name] = best_rate(tf.function(fn), batches, len(lines), args.windows)

    try:
        from tokenizers import BertWordPieceTokenizer
    except ImportError:
        print("HuggingFace tokenizers not installed (pip install -e .[bench]); skipped")
    else:
        hf = BertWordPieceTokenizer(args.vocab_file, lowercase=True)
        text_batches = [
            lines[i : i + args.batch_size] for i in range(0, len(lines), args.batch_size)
        ]
        rates["HuggingFace tokenizers (Rust) encode_batch"] = best_rate(
            lambda batch: hf.encode_batch(batch, add_special_tokens=False),
            text_batches,
            len(lines),
            args.windows,
        )

    from official.nlp.tools import tokenization

    original = tokenization.FullTokenizer(args.vocab_file, do_lower_case=True)
    sample = lines[: args.python_lines]
    rates["original Python FullTokenizer"] = best_rate(
        lambda batch: [original.convert_tokens_to_ids(original.tokenize(x)) for x in batch],
        [sample],
        len(sample),
        1,
    )

    target = rates["tf_text FastBertTokenizer.tokenize"]
    print(f"{'tokenizer':50s} {'lines/s':>12s} {'vs FastBert':>12s}")
    for name, rate in rates.items():
        print(f"{name:50s} {rate:12,.0f} {rate / target:11.2f}x")
    ratio = target / rates["keras_bert BertTokenizer.tokenize"]
    print(f"ours is {ratio:.2f}x slower than bare FastBertTokenizer (target: within 2x)")
    if not args.no_results:
        write_results(args, argv, lines, rates, target)


# The README's sides: keras_bert, the original tokenizer (Model Garden's copy), HuggingFace.
HEADLINE_SIDES = {
    "keras_bert": "keras_bert BertTokenizer.tokenize",
    "Model Garden": "original Python FullTokenizer",
    "HuggingFace": "HuggingFace tokenizers (Rust) encode_batch",
}


def write_results(args, argv, lines, rates, target):
    table = "\n".join(
        ["| tokenizer | lines/s | vs FastBertTokenizer |", "|---|---|---|"]
        + [f"| {name} | {rate:,.0f} | {rate / target:.2f}x |" for name, rate in rates.items()]
    )
    corpus = os.path.basename(os.path.normpath(args.corpus))
    results_file.write(
        args.results_name,
        f"Tokenizer throughput, {corpus}",
        table=table,
        argv=argv,
        figures={
            "corpus": corpus,
            "lines": len(lines),
            "batch_size": args.batch_size,
            "windows": args.windows,
            "python_lines": args.python_lines,
            "lines_per_second": rates,
        },
        method=f"Best of {args.windows} windows over the whole corpus, batches of "
        f"{args.batch_size}; the original Python tokenizer on the first "
        f"{args.python_lines} lines, once.",
        headlines=[
            results_file.headline(
                "lines_per_second",
                f"tokenizer, {corpus}",
                "lines/s",
                {side: rates[name] for side, name in HEADLINE_SIDES.items() if name in rates},
                decimals=0,
            )
        ],
        directory=args.results_dir,
    )


if __name__ == "__main__":
    main()
