"""One optimizer update of any Keras model: `Trainer(model, gradient_accumulation_steps=k)`.

The mechanics of a training step live here, not in the models: the gradient
tape, gradient accumulation over micro-batches, float16 loss scaling, applying
the update, and the metrics of the global batch under tf.distribute. A model
says only what its loss is. Why a wrapper: models sit below training in the
pipeline (they must not import it), and Keras' `fit` calls the `train_step`
of the model it is called on, so training wraps the model in a Keras model of
its own rather than the model carrying a step. `Trainer.fit` runs this step
under Keras' loop (one device, MirroredStrategy, TPUStrategy), and a custom
`strategy.run` loop calls `Trainer.apply_update` (MultiWorkerMirroredStrategy,
which Keras 3's `fit` does not support): one step, two loops. The wrapper
holds no weights of its own: checkpoint the wrapped model and
`trainer.optimizer`, as before.

What a model provides, in order of preference:
- `update_normaliser(x, y, sample_weight)` and `update_loss(x, y,
  sample_weight, normaliser, micro_batches)`: the first reads the whole
  update's per-replica batch (all micro-batches) and returns what normalises
  its loss, over all replicas (BertPretrainer: the sum of masked_lm_weights);
  the second returns one (micro-)batch's share of the update's loss, no tape
  inside, and may compute it its own way (BertPretrainer reads the hidden
  states, not the logits). So an update of k micro-batches equals one batch k
  times larger even when the micro-batches carry different weights.
- otherwise `compute_loss(x, y, y_pred, sample_weight)` on `model(x)` (the
  model's own, or the loss given to `Trainer.compile`), divided by the number
  of micro-batches: exact for losses that are means over equal micro-batches.

Legend for shape comments: k = micro-batches per update, B = per-replica batch.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops


def update_function(strategy: tf.distribute.Strategy, trainer: "Trainer") -> Any:
    """`run_updates(iterator, count)`: a tf.function running `count` optimizer
    updates from a distributed iterator, each `trainer.apply_update` inside
    `strategy.run`: the custom loop's body (MultiWorkerMirroredStrategy, which
    Keras 3's `fit` does not run)."""

    @tf.function(jit_compile=False)
    def run_updates(iterator, count):
        for _ in tf.range(count):
            strategy.run(trainer.apply_update, args=(next(iterator),))

    return run_updates


def metric_values(trainer: keras.Model, skip: tuple[str, ...] = ()) -> dict[str, float]:
    """The trainer's metric results as floats, read outside the replicas (the
    custom loop's logs); a compiled metrics container gives its metrics' values."""
    values = {}
    for metric in trainer.metrics:
        if metric.name in skip:
            continue
        result = metric.result()
        results = result if isinstance(result, dict) else {metric.name: result}
        values.update({name: float(keras.ops.convert_to_numpy(value))
                       for name, value in results.items()})
    return values


def computes_in_float16(model: keras.Model) -> bool:
    """True when a layer of `model` computes in float16 (its gradients need loss
    scaling; Keras scales only when the outer model's own policy says so)."""
    return any(layer.compute_dtype == "float16" for layer in model._flatten_layers())


def _first_tensor(structure):
    return next(t for t in tf.nest.flatten(structure) if t is not None)


class Trainer(keras.Model):
    """`model` trained with gradient accumulation, loss scaling and global-batch
    metrics (see the module docstring); predicts and evaluates as `model`.

    `gradient_accumulation_steps` k > 1: each dataset element holds k
    micro-batches of equal size (the dataset is batched k times larger); they
    run forward and backward one after another, so only one micro-batch's
    activations are alive at a time, their gradients are summed, and the
    optimizer applies the sum once. Works under every tf.distribute strategy:
    the one all-reduce happens in `apply_gradients`, outside any cond.
    """

    def __init__(self, model: keras.Model, gradient_accumulation_steps: int = 1,
                 **kwargs: Any) -> None:
        if (not isinstance(gradient_accumulation_steps, int)
                or isinstance(gradient_accumulation_steps, bool) or gradient_accumulation_steps < 1):
            raise ValueError("gradient_accumulation_steps must be a positive integer, "
                             f"got {gradient_accumulation_steps!r}")
        if model.compiled:
            raise ValueError(f"{model.name} is compiled: compile the Trainer wrapping it instead "
                             "(the Trainer holds the optimizer, loss and metrics)")
        super().__init__(name=kwargs.pop("name", f"{model.name}_trainer"), **kwargs)
        self.model = model
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.built = model.built

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        return self.model(inputs, training=training)

    def compile(self, optimizer: str | keras.optimizers.Optimizer = "rmsprop",
                **kwargs: Any) -> None:
        """Keras' compile; float16 models get a LossScaleOptimizer (their
        gradients underflow without loss scaling)."""
        optimizer = keras.optimizers.get(optimizer)
        if (computes_in_float16(self.model)
                and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer)):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        super().compile(optimizer=optimizer, **kwargs)

    @property
    def metrics(self) -> list[keras.metrics.Metric]:
        # Keras skips the metrics of a wrapped model: its trackers are ours too.
        own = super().metrics
        return own + [m for m in self.model.metrics if all(m is not o for o in own)]

    def compute_loss(self, x: Any = None, y: Any = None, y_pred: Any = None,
                     sample_weight: Any = None, training: bool = True) -> tf.Tensor:
        """The model's own loss where it defines one, else the loss given to `compile`."""
        if type(self.model).compute_loss is not keras.Model.compute_loss:
            return self.model.compute_loss(x, y, y_pred, sample_weight, training=training)
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    # === Training step ===

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        self.apply_update(data)
        return self.get_metrics_result()

    def apply_update(self, data: Any) -> None:
        """One optimizer update from one (per-replica) dataset element: `fit`
        calls it through `train_step`, a custom loop inside `strategy.run`."""
        batch = keras.utils.unpack_x_y_sample_weight(data)  # (x, y, sample_weight)
        steps = self.gradient_accumulation_steps
        normaliser = None
        if hasattr(self.model, "update_normaliser"):
            normaliser = self.model.update_normaliser(*batch)
        if steps == 1:
            total, gradients = self._loss_and_gradients(batch, normaliser, 1)
        else:
            total, gradients = self._accumulated_loss_and_gradients(batch, normaliser, steps)
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(gradients, variables) if g is not None])
        # Each replica's loss is its share of the global one (as Keras' own step).
        num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
        self._loss_tracker.update_state(total * num_replicas,
                                        sample_weight=tf.shape(_first_tensor(batch[0]))[0])

    def _update_loss(self, batch, normaliser, micro_batches):
        """One (micro-)batch's share of the update's loss (see the module docstring)."""
        x, y, sample_weight = batch
        if hasattr(self.model, "update_loss"):
            return self.model.update_loss(x, y, sample_weight, normaliser, micro_batches)
        y_pred = self.model(x, training=True)
        loss = self.compute_loss(x, y, y_pred, sample_weight, training=True)
        if self._compile_metrics is not None:
            self._compile_metrics.update_state(y, y_pred, sample_weight)
        return loss / micro_batches

    def _loss_and_gradients(self, batch, normaliser, micro_batches):
        with tf.GradientTape() as tape:
            loss = self._update_loss(batch, normaliser, micro_batches)
            scaled = self.optimizer.scale_loss(loss)  # float16 loss scaling, else identity
        return loss, tape.gradient(scaled, self.model.trainable_variables)

    def _accumulated_loss_and_gradients(self, batch, normaliser, steps):
        rows = _first_tensor(batch[0]).shape[0]
        if rows is not None and rows % steps:
            raise ValueError(f"a batch of {rows} sequences per replica does not split into "
                             f"gradient_accumulation_steps={steps} equal micro-batches")
        micro = tf.nest.map_structure(
            lambda t: None if t is None else tf.reshape(
                t, tf.concat([[steps, -1], tf.shape(t)[1:]], axis=0)),
            batch)  # (k, B / k, ...)

        def micro_batch(i):
            return tf.nest.map_structure(lambda t: None if t is None else t[i], micro)

        # The first micro-batch outside the loop: its gradients give the sums'
        # initial values and show which variables get none (e.g. the pooler
        # without a next-sentence head); Keras skips those, so must we.
        first_loss, first = self._loss_and_gradients(micro_batch(0), normaliser, steps)
        present = [i for i, g in enumerate(first) if g is not None]

        def body(i, total, sums):
            loss, gradients = self._loss_and_gradients(micro_batch(i), normaliser, steps)
            return i + 1, total + loss, [s + tf.convert_to_tensor(gradients[j])
                                         for s, j in zip(sums, present)]

        # parallel_iterations=1: one micro-batch at a time (activation memory of one).
        _, total, sums = tf.while_loop(
            lambda i, *_: i < steps, body,
            (tf.constant(1), first_loss, [tf.convert_to_tensor(first[j]) for j in present]),
            parallel_iterations=1)
        gradients = [None] * len(first)
        for j, summed in zip(present, sums):
            gradients[j] = summed
        return total, gradients

    # === Metrics of the global batch ===

    def get_metrics_result(self) -> dict[str, Any]:
        """Metric results of the global batch, also inside a replica.

        Keras calls this in each replica (`train_step`, `test_step`), where a
        metric reads its own replica's totals, and then averages the replicas'
        results: the mean of per-replica weighted means, not the global one
        (replicas hold different weight sums, e.g. masked_lm_weights). Read
        from outside the replicas, a metric's ("sum") variables are summed over
        them; do the same here so the progress bar, callbacks and History log
        global values.
        """
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return super().get_metrics_result()
        reductions = {"sum": tf.distribute.ReduceOp.SUM, "mean": tf.distribute.ReduceOp.MEAN}
        results = {}
        for metric in self.metrics:
            values = [ops.convert_to_tensor(v) for v in metric.variables]
            values = [context.all_reduce(reductions[v.aggregation], value)
                      if v.aggregation in reductions else value
                      for v, value in zip(metric.variables, values)]
            result = metric.stateless_result(values)
            results.update(result if isinstance(result, dict) else {metric.name: result})
        return results
