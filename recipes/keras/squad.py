"""Extractive question answering with Keras' `fit` on questions and contexts.

    python recipes/keras/squad.py [--checkpoint HF_OR_TF1_DIR] [--train SQUAD.json]

`fit` takes {"question", "context"} and SQuAD's answers {"text",
"answer_start"}; run_squad's windows and answer positions are computed for
it. `predict` runs the span search in the graph (the exported model's code)
and returns answer texts with their character offsets.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_bert  # noqa: E402
from keras_bert.datasets.metrics import squad_v1_scores  # noqa: E402
from keras_bert.training.optimization import create_adamw  # noqa: E402

from common import DATA, minilm_checkpoint  # noqa: E402


def questions(path):
    """A SQuAD JSON file -> (its data list, x, y) in the fields `fit` takes."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    qas = [(qa, p["context"]) for article in data for p in article["paragraphs"] for qa in p["qas"]]
    x = {"question": [qa["question"] for qa, _ in qas], "context": [c for _, c in qas]}
    y = {
        "text": [qa["answers"][0]["text"] for qa, _ in qas],
        "answer_start": [qa["answers"][0]["answer_start"] for qa, _ in qas],
    }
    return data, [qa["id"] for qa, _ in qas], x, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="default: the shipped MiniLM weights")
    default = os.path.join(DATA, "squad_samples", "squad_v1_sample.json")
    parser.add_argument("--train", default=default)
    parser.add_argument("--dev", default=default)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-length", type=int, default=384)
    args = parser.parse_args(argv)

    _, _, x, y = questions(args.train)
    model = keras_bert.BertSpanExtractor.from_pretrained(
        args.checkpoint or minilm_checkpoint(), seq_length=args.seq_length
    )
    steps = -(-len(y["text"]) // args.batch_size) * args.epochs
    model.compile(optimizer=create_adamw(3e-5, steps, steps // 10))
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs)

    data, ids, dev_x, _ = questions(args.dev)
    answers = model.predict_answers(dev_x)
    print("dev:", squad_v1_scores(data, {i: a["answer"] for i, a in zip(ids, answers)}))
    print(answers[0])


if __name__ == "__main__":
    main()
