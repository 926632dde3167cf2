"""The custom training loop's pieces: `strategy.run` over a model's own update.

Keras 3's `fit` does not run MultiWorkerMirroredStrategy, so pretraining and
fine-tuning there call the model's `apply_update` (the step `fit` runs
elsewhere, `keras_bert.models.update_step.UpdateStep`) inside
`strategy.run`, and read the metrics back for the logs: one step, two loops.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf


def update_function(strategy: tf.distribute.Strategy, model: keras.Model) -> Any:
    """`run_updates(iterator, count)`: a tf.function running `count` optimizer
    updates from a distributed iterator, each `model.apply_update` inside
    `strategy.run`."""

    @tf.function(jit_compile=False)
    def run_updates(iterator, count):
        for _ in tf.range(count):
            strategy.run(model.apply_update, args=(next(iterator),))

    return run_updates


def metric_values(model: keras.Model, skip: tuple[str, ...] = ()) -> dict[str, float]:
    """The model's metric results as floats, read outside the replicas (the
    custom loop's logs); a compiled metrics container gives its metrics' values."""
    values = {}
    for metric in model.metrics:
        if metric.name in skip:
            continue
        result = metric.result()
        results = result if isinstance(result, dict) else {metric.name: result}
        values.update(
            {name: float(keras.ops.convert_to_numpy(value)) for name, value in results.items()}
        )
    return values
