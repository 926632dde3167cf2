"""`fit` where Keras 3's own cannot run: MultiWorkerMirroredStrategy.

Keras 3's `fit` runs one device, MirroredStrategy and TPUStrategy. Under
MultiWorkerMirroredStrategy (or when a model is compiled with
`train_loop="custom"`) keras_bert's models run this loop instead, behind the
same `fit`: the same step (`UpdateStep.apply_update` inside `strategy.run`),
the same callbacks with Keras' protocol (train / epoch / batch begin and end,
`stop_training`), the same History. Pretraining and fine-tuning therefore
have one driver, `model.fit(..., callbacks=[...])`, on every strategy.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import tensorflow as tf

TRAIN_LOOPS = ("auto", "fit", "custom")


def runs_custom_loop(model: keras.Model) -> bool:
    """Whether `model.fit` is this loop: asked for, or the strategy needs it."""
    loop = getattr(model, "train_loop", "auto")
    multi_worker = isinstance(model.distribute_strategy, tf.distribute.MultiWorkerMirroredStrategy)
    return loop == "custom" or (loop == "auto" and multi_worker)


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
    loop's logs); a compiled metrics container gives its metrics' values."""
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


def fit_by_strategy_run(
    model: keras.Model,
    dataset: tf.data.Dataset,
    *,
    epochs: int = 1,
    initial_epoch: int = 0,
    steps_per_epoch: int | None = None,
    callbacks: Sequence[keras.callbacks.Callback] | None = None,
    verbose: Any = "auto",
) -> keras.callbacks.History:
    """Keras' `fit` loop over `dataset` (batches of the global batch size, or
    a distributed dataset of per-replica batches), `steps_per_epoch` updates
    an epoch (default: one pass, counted), each chunk of
    `model.steps_per_execution` updates one `strategy.run` call."""
    strategy = model.distribute_strategy
    if isinstance(dataset, tf.data.Dataset):
        if steps_per_epoch is None:
            steps_per_epoch = int(dataset.cardinality())
        dataset = strategy.experimental_distribute_dataset(dataset)
    elif not isinstance(dataset, tf.distribute.DistributedDataset):
        raise ValueError(
            f"fit under {type(strategy).__name__} (keras_bert's own loop) takes a "
            f"tf.data.Dataset, a distributed one or in-memory arrays, not {type(dataset).__name__}"
        )
    if steps_per_epoch is None or steps_per_epoch < 0:
        raise ValueError("fit needs steps_per_epoch for a dataset of unknown length")
    chunk = max(int(getattr(model, "steps_per_execution", 1) or 1), 1)
    iterator = iter(dataset)
    run_updates = update_function(strategy, model)
    history = keras.callbacks.History()
    callback_list = keras.callbacks.CallbackList(
        [*(callbacks or ()), history],
        add_history=False,
        add_progbar=verbose not in (0, "auto") and verbose is not False,
        model=model,
        verbose=verbose,
        epochs=epochs,
        steps=steps_per_epoch,
    )
    model.stop_training = False
    callback_list.on_train_begin()
    logs: dict[str, float] = {}
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()
        callback_list.on_epoch_begin(epoch)
        done = 0
        while done < steps_per_epoch:
            count = min(chunk, steps_per_epoch - done)
            callback_list.on_train_batch_begin(done)
            run_updates(iterator, tf.constant(count))
            done += count
            logs = metric_values(model)
            callback_list.on_train_batch_end(done - 1, logs)
            if model.stop_training:
                break
        callback_list.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    callback_list.on_train_end(logs)
    return history
