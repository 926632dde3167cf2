"""A ModernBERT-style encoder's training step against BERT's, at one width and depth, on CPU.

Both sides are keras_bert encoders (`ModernBertEncoder`, `BertEncoder`) of the
same hidden size, heads and layers; the feed-forward widths give the same
products per token (BERT's two H x 4H products against the GeGLU's H x 2F and
F x H: F = 8H/3). Dropout 0 on both (ModernBERT trains without it). The step
is one forward and backward pass of a loss on both outputs and an Adam
update, in a `tf.function`, on random ids with a quarter of each batch padded.
Two more settings time both sides on batches of real lengths, drawn uniformly
from `--min-length` to `--length` and padded to `--length`: padded, and with
the padding removed from both encoders' per-token layers (`remove_padding=True`,
`keras_bert.models.unpadded`), each with its own table and ratio.

Method: each window runs `--steps` timed steps per side after 2 untimed ones
(tracing, first allocations), the sides alternate within a window (rotated
order); each side's figure is the best of `--windows` windows (the machine is
shared and noisy), and the ratio is ModernBERT's step time over BERT's.

    PYTHONPATH=. .venv/bin/python benchmarks/modern_block_speed.py \\
        [--hidden 384] [--layers 4] [--heads 6] [--batch 16] [--length 128] [--min-length 16] \\
        [--windows 3] [--steps 5]

Writes benchmarks/results/modern_block_speed.{md,json} (`results_file`).
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()  # before TensorFlow loads: it reads them once

import step_timing  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    step_timing.add_arguments(parser, "modern_block_speed", hidden=384, heads=6, batch=16, steps=5)
    parser.add_argument("--local-attention", type=int, default=128)
    parser.add_argument(
        "--min-length",
        type=int,
        default=16,
        help="the shortest real length of the varied-length batches (default 16)",
    )
    return parser.parse_args(argv)


def encoders(args):
    """{"bert": BertEncoder, "modernbert": ModernBertEncoder}, same width and depth."""
    from keras_bert import BertConfig, BertEncoder, ModernBertConfig, ModernBertEncoder

    shape = dict(
        vocab_size=30522,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
    )
    bert = BertEncoder(
        BertConfig(
            **shape,
            intermediate_size=4 * args.hidden,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    )
    modern = ModernBertEncoder(
        ModernBertConfig(
            **shape,
            intermediate_size=round(8 * args.hidden / 3),
            local_attention=args.local_attention,
        )
    )
    return {"bert": bert, "modernbert": modern}


def batch(encoder, args, varied=False):
    """Random ids (B, T): a quarter of the rows half padding, or with `varied`
    each row's real length drawn uniformly from --min-length to --length."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, 30000, (args.batch, args.length)).astype("int32")
    mask = np.ones_like(ids)
    if varied:
        lengths = rng.integers(args.min_length, args.length + 1, args.batch)
        mask = (np.arange(args.length)[None] < lengths[:, None]).astype("int32")
    else:
        mask[: args.batch // 4, args.length // 2 :] = 0  # a quarter of the rows half padding
    ids[mask == 0] = 0
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    return {name: features[name] for name in encoder.input}


def train_step(encoder, remove_padding=False):
    """One forward, backward and Adam update, traced once (per batch width and,
    with `remove_padding`, token count: the sides reuse one batch)."""
    import keras
    import tensorflow as tf

    optimizer = keras.optimizers.Adam(1e-5)
    optimizer.build(encoder.trainable_variables)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            outputs = encoder(features, training=True, remove_padding=remove_padding)
            # Every weight in the loss (the pooler's too), on both sides alike.
            loss = tf.reduce_mean(tf.square(outputs["sequence_output"])) + tf.reduce_mean(
                tf.square(outputs["pooled_output"])
            )
        grads = tape.gradient(loss, encoder.trainable_variables)
        optimizer.apply_gradients(zip(grads, encoder.trainable_variables))
        return loss

    return step


# The settings timed: (heading, varied lengths, padding removed); the first
# is the main table's.
SETTINGS = (
    (None, False, False),
    ("Real lengths U(min-length, length), padded", True, False),
    ("Real lengths U(min-length, length), padding removed", True, True),
)


def measure(args):
    """{heading: seconds per step, per side and window}, every setting's sides
    alternating in the same windows."""
    sides = {}
    for name, encoder in encoders(args).items():
        for heading, varied, remove_padding in SETTINGS:
            step = train_step(encoder, remove_padding)
            features = batch(encoder, args, varied)
            sides[heading, name] = lambda step=step, features=features: step(features).numpy()
    per_window = step_timing.time_alternating(sides, args.windows, args.steps)
    by_setting = {}
    for (heading, name), times in per_window.items():
        by_setting.setdefault(heading, {})[name] = times
    return by_setting


def main(argv=None):
    args = parse_args(argv)
    by_setting = measure(args)
    lengths = f"U({args.min_length}, {args.length})"
    step_timing.report(
        args,
        argv,
        by_setting.pop(None),
        "modernbert",
        "bert",
        column="encoder",
        label="ModernBERT / BERT step time",
        title="A ModernBERT-style training step against BERT's",
        details="float32, dropout 0.",
        sections=[
            (heading.replace("U(min-length, length)", lengths), per_window)
            for heading, per_window in by_setting.items()
        ],
    )


if __name__ == "__main__":
    main()
