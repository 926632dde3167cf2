"""Sentence classification with Keras' own `fit` on strings: rotten_tomatoes reviews.

    python recipes/keras/text_classification.py [--checkpoint HF_OR_TF1_DIR] [--epochs 2]

Strings in, strings out: the model carries its tokenizer (a BertPreprocessor
with the checkpoint's vocabulary and casing), so `fit`, `evaluate` and
`predict` take the reviews themselves, and so does the saved `.keras` file.
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_bert  # noqa: E402
from keras_bert.training.optimization import create_adamw  # noqa: E402

from common import DATA, minilm_checkpoint  # noqa: E402


def read_reviews(path, limit=None):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:limit]
    return [row["sentence"] for row in rows], [row["label"] for row in rows]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="default: the shipped MiniLM weights")
    parser.add_argument("--train", default=os.path.join(DATA, "rotten_tomatoes", "train.tsv"))
    parser.add_argument("--dev", default=os.path.join(DATA, "rotten_tomatoes", "dev.tsv"))
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-dev-examples", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps-per-epoch", type=int, default=None, help="for smoke tests")
    parser.add_argument("--output", default="text_classifier.keras")
    args = parser.parse_args(argv)

    texts, labels = read_reviews(args.train, args.max_train_examples)
    dev_texts, dev_labels = read_reviews(args.dev, args.max_dev_examples)

    model = keras_bert.BertClassifier.from_pretrained(
        args.checkpoint or minilm_checkpoint(),
        num_classes=2,
        label_names=sorted(set(labels)),
        seq_length=64,
    )
    steps = (args.steps_per_epoch or -(-len(texts) // args.batch_size)) * args.epochs
    # The paper's AdamW: warmup over the first 10 % of steps, then linear decay.
    model.compile(optimizer=create_adamw(5e-5, steps, steps // 10))
    model.fit(
        texts,
        labels,
        batch_size=args.batch_size,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        validation_data=(dev_texts, dev_labels),
    )

    print("dev accuracy:", model.evaluate(dev_texts, dev_labels, return_dict=True)["accuracy"])
    print(
        model.predict_labels(
            ["A gorgeous, witty, seductive movie.", "The plot is a tired retread of better films."]
        )
    )
    model.save(args.output)
    print("saved", args.output, "- keras.models.load_model(...) takes strings")


if __name__ == "__main__":
    main()
