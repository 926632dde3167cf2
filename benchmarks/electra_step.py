"""An ELECTRA training step against a masked-LM step of the same model, on CPU.

Both sides train the same discriminator-sized BertEncoder: `BertPretrainer`
with objective "none" (masked LM alone, RoBERTa's) and `ElectraPretrainer`
(a generator of `--generator-fraction` of its width, all its layers, on its
embeddings; the discriminator's head at every position). The step is each
model's own `train_step` (forward, backward, AdamW update: what `fit` runs),
in a `tf.function`, on one pretraining batch: `--batch` x `--length` random
ids (a quarter of the rows half padding), `--predictions` masked positions a
row, the vocabulary BERT's (30,522), BERT's dropout.

Method (`step_timing`): `--steps` timed steps per side and window after 2
untimed ones, the sides alternating; each side's figure is the best of
`--windows` windows, and the ratio is ELECTRA's step time over the masked LM's.

    PYTHONPATH=. .venv/bin/python benchmarks/electra_step.py \\
        [--hidden 256] [--layers 4] [--heads 4] [--batch 32] [--length 128] \\
        [--predictions 20] [--generator-fraction 0.25] [--windows 3] [--steps 3]

Writes benchmarks/results/electra_step.{md,json} (`results_file`).
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()  # before TensorFlow loads: it reads them once

import step_timing  # noqa: E402

VOCAB_SIZE = 30522


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    step_timing.add_arguments(parser, "electra_step", hidden=256, heads=4, batch=32, steps=3)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--generator-fraction", type=float, default=0.25)
    return parser.parse_args(argv)


def pretrainers(args):
    """{"masked_lm": BertPretrainer, "electra": ElectraPretrainer}, one discriminator size."""
    from keras_bert import BertConfig, BertEncoder
    from keras_bert.models.electra_pretrainer import ElectraPretrainer, electra_generator_config
    from keras_bert.models.pretrainer import BertPretrainer

    config = BertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.length),
    )
    generator = electra_generator_config(config, args.generator_fraction)
    return {
        "masked_lm": BertPretrainer(BertEncoder(config), objective="none"),
        "electra": ElectraPretrainer(BertEncoder(config), generator),
    }


def batch(args):
    """One pretraining batch: 15 %-style masked positions inside the real tokens."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, VOCAB_SIZE, (args.batch, args.length)).astype("int32")
    mask = np.ones_like(ids)
    mask[: args.batch // 4, args.length // 2 :] = 0  # a quarter of the rows half padding
    ids[mask == 0] = 0
    real = mask.sum(axis=1)
    positions = np.stack(
        [np.sort(rng.choice(np.arange(1, n - 1), args.predictions, replace=False)) for n in real]
    ).astype("int32")
    masked_ids = np.take_along_axis(ids, positions, axis=1)
    np.put_along_axis(ids, positions, 4, axis=1)  # [MASK]
    return {
        "input_ids": ids,
        "input_mask": mask,
        "segment_ids": np.zeros_like(ids),
        "masked_lm_positions": positions,
        "masked_lm_ids": masked_ids,
        "masked_lm_weights": np.ones(positions.shape, "float32"),
    }


def train_step(model):
    """The model's own training step (what `fit` runs), traced once."""
    import tensorflow as tf

    from keras_bert.training.optimization import create_optimizer

    model.compile(optimizer=create_optimizer("adamw", 1e-4, 1000, 10), jit_compile=False)
    model.optimizer.build(model.trainable_variables)
    return tf.function(model.train_step)


def measure(args):
    """Seconds per step, per side and window."""
    features = batch(args)
    sides = {}
    for name, model in pretrainers(args).items():
        step = train_step(model)
        sides[name] = lambda step=step: float(step(features)["loss"])
    return step_timing.time_alternating(sides, args.windows, args.steps)


def main(argv=None):
    args = parse_args(argv)
    step_timing.report(
        args,
        argv,
        measure(args),
        "electra",
        "masked_lm",
        column="pretrainer",
        label="ELECTRA / masked LM step time",
        title="An ELECTRA training step against a masked-LM step of the same model",
        details=f"{args.predictions} predictions a row, generator {args.generator_fraction} "
        "of the width, float32, dropout 0.1, AdamW.",
    )


if __name__ == "__main__":
    main()
