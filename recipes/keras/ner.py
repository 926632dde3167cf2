"""Named entities with Keras' `fit` on words and tags: WNUT-16 tweets.

    python recipes/keras/ner.py [--checkpoint HF_OR_TF1_DIR] [--epochs 5]

Each word is labelled on its first word piece (the paper's choice); `fit`
takes the word lists and their tags, `predict` takes raw text and returns
the entities with character offsets.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_bert  # noqa: E402
from keras_bert.datasets.metrics import entity_scores  # noqa: E402
from keras_bert.datasets.tagging import read_conll  # noqa: E402
from keras_bert.training.optimization import create_adamw  # noqa: E402

from common import DATA, minilm_checkpoint  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="default: the shipped MiniLM weights")
    parser.add_argument("--train", default=os.path.join(DATA, "wnut16", "train.conll"))
    parser.add_argument("--dev", default=os.path.join(DATA, "wnut16", "dev.conll"))
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-dev-examples", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps-per-epoch", type=int, default=None, help="for smoke tests")
    args = parser.parse_args(argv)

    train, dev = read_conll(args.train), read_conll(args.dev)
    words, tags = train.words[: args.max_train_examples], train.tags[: args.max_train_examples]
    dev_words = dev.words[: args.max_dev_examples]
    tag_names = sorted({tag for row in tags for tag in row})

    model = keras_bert.BertTokenClassifier.from_pretrained(
        args.checkpoint or minilm_checkpoint(),
        num_labels=len(tag_names),
        label_names=tag_names,
        seq_length=64,
    )
    steps = (args.steps_per_epoch or -(-len(words) // args.batch_size)) * args.epochs
    model.compile(optimizer=create_adamw(5e-5, steps, steps // 10))
    model.fit(
        words,
        tags,
        batch_size=args.batch_size,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
    )

    # seqeval-style entity F1 on dev, from the tags `predict` gives raw text.
    predicted = [row["tags"] for row in model.tag([" ".join(w) for w in dev_words])]
    print("dev entity F1:", entity_scores(dev.tags[: len(dev_words)], predicted)["f1"])
    print(model.predict_entities(["Going to see Taylor Swift in London tonight"]))


if __name__ == "__main__":
    main()
