"""Classifying texts longer than the sequence: windows against truncation, BBC News.

    python recipes/keras/long_documents.py --train BBC_TRAIN.tsv [--dev data/bbc_news/dev.tsv]

The classifier is fine-tuned on each article's first `--seq-length` pieces,
then read on dev two ways: truncated (the first window only, what a plain
`predict` does) and as overlapping windows `--stride` pieces apart whose
logits are averaged (`predict_labels(..., window_stride=...)`). Most BBC articles run
to 400-1,000 pieces, so the windows see all of the article. The repository
ships the dev split only (data/README.md); the train split is the same
source's `train.tsv`.
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import keras_bert  # noqa: E402
from keras_bert.training.optimization import create_adamw  # noqa: E402

from common import DATA, minilm_checkpoint  # noqa: E402


def read_articles(path, limit=None):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:limit]
    return [f"{row['title']}. {row['text']}" for row in rows], [row["label"] for row in rows]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="default: the shipped MiniLM weights")
    parser.add_argument("--train", required=True)
    parser.add_argument("--dev", default=os.path.join(DATA, "bbc_news", "dev.tsv"))
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-dev-examples", type=int, default=None)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--stride", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps-per-epoch", type=int, default=None, help="for smoke tests")
    args = parser.parse_args(argv)

    texts, labels = read_articles(args.train, args.max_train_examples)
    dev_texts, dev_labels = read_articles(args.dev, args.max_dev_examples)
    model = keras_bert.BertClassifier.from_pretrained(
        args.checkpoint or minilm_checkpoint(),
        num_classes=len(set(labels)),
        label_names=sorted(set(labels)),
        seq_length=args.seq_length,
    )
    steps = (args.steps_per_epoch or -(-len(texts) // args.batch_size)) * args.epochs
    model.compile(optimizer=create_adamw(5e-5, steps, steps // 10))
    model.fit(
        texts,
        labels,
        batch_size=args.batch_size,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
    )

    pieces = model.preprocessor.tokenizer.tokenize(dev_texts).row_lengths().numpy()
    print(
        f"dev: {len(dev_texts)} articles, median {int(np.median(pieces))} pieces, "
        f"{np.mean(pieces > args.seq_length - 2):.0%} longer than one window"
    )
    truth = np.asarray(dev_labels)
    truncated = np.asarray(model.predict_labels(dev_texts))
    windowed = np.asarray(model.predict_labels(dev_texts, window_stride=args.stride))
    print(f"dev accuracy, truncated to {args.seq_length}: {np.mean(truncated == truth):.4f}")
    print(
        f"dev accuracy, windows of {args.seq_length} every {args.stride} pieces, "
        f"logits averaged: {np.mean(windowed == truth):.4f}"
    )


if __name__ == "__main__":
    main()
