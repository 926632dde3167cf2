"""Held-out learning curve of a pretraining run: every kept checkpoint of
`model_dir/checkpoints` scored on `eval_files`, beside the trivial baselines.

    python recipes/pretraining/heldout_curve.py --config recipes/pretraining/austen_cpu.yaml

Baselines, from the records alone: masked LM, always predict the token most
often masked in `train_files`; next sentence, always predict the label most
frequent in `train_files`. Prints a Markdown table and writes it, with the
numbers as JSON, to `model_dir/heldout_curve.{md,json}`.
"""

import argparse
import collections
import json
import os

import numpy as np
import tensorflow as tf

from keras_bert.pretraining_data import inputs
from keras_bert.training import distribute, pretraining


def label_counts(config, file_pattern):
    """(Counter of masked token ids, weighted; Counter of next-sentence labels)."""
    tokens, labels = collections.Counter(), collections.Counter()
    dataset = inputs.pretraining_dataset(
        file_pattern,
        config.seq_length,
        config.max_predictions_per_seq,
        batch_size=256,
        is_training=False,
        with_next_sentence=config.objective != "none",
    )
    for batch in dataset.as_numpy_iterator():
        real = batch["masked_lm_weights"] > 0
        tokens.update(batch["masked_lm_ids"][real].tolist())
        if "next_sentence_labels" in batch:
            labels.update(np.ravel(batch["next_sentence_labels"]).tolist())
    return tokens, labels


def baselines(config):
    train_tokens, train_labels = label_counts(config, config.train_files)
    eval_tokens, eval_labels = label_counts(config, config.eval_files)
    token, _ = train_tokens.most_common(1)[0]
    result = {
        "most_frequent_token": token,
        "masked_lm_accuracy": eval_tokens[token] / sum(eval_tokens.values()),
    }
    if train_labels:
        label, _ = train_labels.most_common(1)[0]
        result["next_sentence_accuracy"] = eval_labels[label] / sum(eval_labels.values())
    return result


def checkpoint_curve(config):
    """[(step, held-out metrics)] over the checkpoints still on disk."""
    strategy = distribute.build_strategy("one_device")
    directory = os.path.join(config.model_dir, "checkpoints")
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        raise FileNotFoundError(f"{directory}: no checkpoints (run keras-bert pretrain first)")
    curve = []
    for path in state.all_model_checkpoint_paths:
        with strategy.scope():
            # The training run's optimizer, so the checkpoint maps one to one.
            pretrainer = pretraining.build_model(config)
            pretrainer.compile(optimizer=pretraining.build_optimizer(config), jit_compile=False)
            pretrainer.optimizer.build(pretrainer.trainable_variables)
        tf.train.Checkpoint(model=pretrainer, optimizer=pretrainer.optimizer).restore(
            path
        ).expect_partial()
        step = int(path.rsplit("-", 1)[1])
        metrics = pretraining.evaluate(strategy, pretrainer, config, custom_loop=False)
        curve.append((step, {k: float(v) for k, v in metrics.items()}))
        print(
            f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in curve[-1][1].items()),
            flush=True,
        )
    return curve


def table(curve, base):
    names = [
        n
        for n in ("masked_lm_accuracy", "next_sentence_accuracy", "masked_lm_loss")
        if n in curve[0][1]
    ]
    lines = [
        "| step | " + " | ".join(f"held-out {n}" for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for step, metrics in curve:
        lines.append(f"| {step} | " + " | ".join(f"{metrics[n]:.4f}" for n in names) + " |")
    lines.append(
        "| baseline | " + " | ".join(f"{base[n]:.4f}" if n in base else "" for n in names) + " |"
    )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    config = pretraining.load_config(args.config, args.set)
    if not config.eval_files:
        raise SystemExit(f"{args.config}: the held-out curve needs eval_files")
    base = baselines(config)
    curve = checkpoint_curve(config)
    text = table(curve, base)
    print(text)
    with open(os.path.join(config.model_dir, "heldout_curve.md"), "w") as f:
        f.write(text)
    with open(os.path.join(config.model_dir, "heldout_curve.json"), "w") as f:
        json.dump({"baselines": base, "curve": curve}, f, indent=2)


if __name__ == "__main__":
    main()
