"""LoRA against full fine-tuning, same data and budget: rotten_tomatoes and WNUT-16.

    python recipes/keras/lora.py --task classify [--mode both] [--rank 8] [--epochs 1]
    python recipes/keras/lora.py --task tag --epochs 5

Each mode trains the MiniLM classifier (or tagger) from the same checkpoint on
the same examples, batches, epochs and schedule (AdamW, 10 % warmup, linear
decay); only the learning rate differs: 5e-5 for full fine-tuning (the other
recipes'), `--lora-learning-rate` (1e-3) for LoRA, whose few new weights start
from zero and move further. Printed per mode: the dev score, the trainable
parameters, the training examples per second (from the second batch on, so
tracing is left out) and the size of the adapter file.
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from text_classification import read_reviews  # noqa: E402

import keras_bert  # noqa: E402
from keras_bert.datasets.metrics import entity_scores  # noqa: E402
from keras_bert.datasets.tagging import read_conll  # noqa: E402
from keras_bert.training.optimization import create_adamw  # noqa: E402

from common import DATA, minilm_checkpoint, print_table  # noqa: E402


class Throughput(keras.callbacks.Callback):
    """Examples per second from the end of the first batch (traced) to the end of fit."""

    def __init__(self, batch_size):
        super().__init__()
        self.batch_size, self.batches, self.start = batch_size, 0, None

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.start is None:
            self.start = time.perf_counter()

    def on_train_end(self, logs=None):
        self.seconds = time.perf_counter() - self.start
        self.examples_per_second = (self.batches - 1) * self.batch_size / max(self.seconds, 1e-9)


def classification_data(args):
    texts, labels = read_reviews(
        args.train or os.path.join(DATA, "rotten_tomatoes", "train.tsv"), args.max_train_examples
    )
    dev_texts, dev_labels = read_reviews(
        args.dev or os.path.join(DATA, "rotten_tomatoes", "dev.tsv"), args.max_dev_examples
    )

    def build(checkpoint):
        return keras_bert.BertClassifier.from_pretrained(
            checkpoint, num_classes=2, label_names=sorted(set(labels)), seq_length=64
        )

    def score(model):
        return {
            "accuracy": model.evaluate(dev_texts, dev_labels, verbose=0, return_dict=True)[
                "accuracy"
            ]
        }

    return texts, labels, build, score


def tagging_data(args):
    train = read_conll(args.train or os.path.join(DATA, "wnut16", "train.conll"))
    dev = read_conll(args.dev or os.path.join(DATA, "wnut16", "dev.conll"))
    words, tags = train.words[: args.max_train_examples], train.tags[: args.max_train_examples]
    dev_words = dev.words[: args.max_dev_examples]
    tag_names = sorted({tag for row in tags for tag in row})

    def build(checkpoint):
        return keras_bert.BertTokenClassifier.from_pretrained(
            checkpoint, num_labels=len(tag_names), label_names=tag_names, seq_length=64
        )

    def score(model):
        predicted = [row["tags"] for row in model.tag([" ".join(w) for w in dev_words])]
        return {"entity_f1": entity_scores(dev.tags[: len(dev_words)], predicted)["f1"]}

    return words, tags, build, score


def run(mode, args, data):
    x, y, build, score = data
    keras.utils.set_random_seed(args.seed)
    model = build(args.checkpoint or minilm_checkpoint())
    learning_rate = args.learning_rate
    if mode == "lora":
        model.enable_lora(args.rank)
        learning_rate = args.lora_learning_rate
    steps = (args.steps_per_epoch or -(-len(x) // args.batch_size)) * args.epochs
    model.compile(optimizer=create_adamw(learning_rate, steps, steps // 10))
    throughput = Throughput(args.batch_size)
    model.fit(
        x,
        y,
        batch_size=args.batch_size,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[throughput],
        verbose=2,
    )
    result = {
        "mode": mode,
        "learning_rate": learning_rate,
        **score(model),
        "trainable_parameters": int(sum(np.prod(v.shape) for v in model.trainable_weights)),
        "train_examples_per_second": round(throughput.examples_per_second, 1),
    }
    if mode == "lora":
        with tempfile.TemporaryDirectory() as folder:
            path = model.save_lora_weights(os.path.join(folder, "adapters.npz"))
            result["adapter_file_bytes"] = os.path.getsize(path)
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        model.save(os.path.join(args.output_dir, f"{mode}.keras"))  # a LoRA model: merged
    print(json.dumps(result), flush=True)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("classify", "tag"), default="classify")
    parser.add_argument("--mode", choices=("both", "lora", "full"), default="both")
    parser.add_argument("--checkpoint", default=None, help="default: the shipped MiniLM weights")
    parser.add_argument("--train", default=None, help="default: the shipped train split")
    parser.add_argument("--dev", default=None, help="default: the shipped dev split")
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-dev-examples", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="default: 32 (classify), 16 (tag), as the other recipes",
    )
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=5e-5, help="full fine-tuning")
    parser.add_argument("--lora-learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps-per-epoch", type=int, default=None, help="for smoke tests")
    parser.add_argument(
        "--output-dir",
        default=None,
        help="where to save each mode's model as MODE.keras (LoRA: merged)",
    )
    args = parser.parse_args(argv)
    args.batch_size = args.batch_size or (32 if args.task == "classify" else 16)

    data = classification_data(args) if args.task == "classify" else tagging_data(args)
    modes = ("full", "lora") if args.mode == "both" else (args.mode,)
    results = [run(mode, args, data) for mode in modes]
    metric = next(k for k in results[0] if k in ("accuracy", "entity_f1"))
    print_table(
        ["mode", "learning rate", f"dev {metric}", "trainable parameters", "train examples/s"],
        [
            [
                r["mode"],
                f"{r['learning_rate']:g}",
                f"{r[metric]:.4f}",
                f"{r['trainable_parameters']:,}",
                r["train_examples_per_second"],
            ]
            for r in results
        ],
    )


if __name__ == "__main__":
    main()
