"""UpdateStep: the training step that keras_bert's models carry themselves.

One `train_step` is one optimizer update, made the same way for every model
of the package (the task models through `TextTask`, and `BertPretrainer`):
the gradient tape, gradient accumulation over micro-batches, float16 loss
scaling, applying the update, and the metrics of the global batch under
tf.distribute. Keras' `fit` runs it on one device, MirroredStrategy and
TPUStrategy; the one loop Keras 3's `fit` does not run,
MultiWorkerMirroredStrategy, calls `apply_update` inside `strategy.run`
behind the same `fit` (`keras_bert.models.strategy_run_fit`): one step,
two loops, one driver.

    model.compile(optimizer, gradient_accumulation_steps=4)
    model.fit(dataset)   # each element: 4 micro-batches of one update

What a model may provide, in order of preference:
- `update_normaliser(x, y, sample_weight)` and `update_loss(x, y,
  sample_weight, normaliser, micro_batches) -> (loss, y_pred or None)`: the
  first reads the whole update's per-replica batch (all micro-batches) and
  returns what normalises its loss over all replicas (BertPretrainer: the
  sum of masked_lm_weights; the tagger: its labelled pieces); the second
  returns one (micro-)batch's share of the update's loss, no tape inside,
  and may compute it its own way (BertPretrainer reads the hidden states,
  not the logits). So an update of k micro-batches equals one batch k times
  larger even when the micro-batches carry different weights. Used while
  `uses_update_loss()` (a task model compiled with its own loss).
- otherwise `compute_loss(x, y, y_pred, sample_weight)` on `model(x)` (the
  loss given to `compile`), divided by the number of micro-batches: exact for
  losses that are means over equal micro-batches.

`step_outputs(x, y, sample_weight, training=...)` is each micro-batch's
forward pass (a task model's passes its encoder the arguments that pack the
padding out: `TextTask.step_arguments`).

Legend for shape comments: k = micro-batches per update, B = per-replica batch.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.models.strategy_run_fit import TRAIN_LOOPS, fit_by_strategy_run, runs_custom_loop
from keras_bert.models.unpadded import UNPADDED_CALL_ARGUMENTS
from keras_bert.models.user_inputs import check_model_keywords


def computes_in_float16(model: keras.Model) -> bool:
    """True when a layer of `model` computes in float16 (its gradients need loss
    scaling; Keras scales only when the outer model's own policy says so)."""
    return any(layer.compute_dtype == "float16" for layer in model._flatten_layers())


def check_accumulation_steps(steps: Any) -> int:
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"gradient_accumulation_steps must be a positive integer, got {steps!r}")
    return steps


def check_finite_hyperparameters(optimizer: keras.optimizers.Optimizer) -> None:
    """Raises ValueError naming the first hyper-parameter of `optimizer` (its
    learning rate or its schedule's numbers, weight decay, clipping, epsilon,
    betas, an inner optimizer's) that is nan or infinite: training with it
    makes every weight nan at the first update, and nothing would say why."""

    def walk(value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                # A serialized object: its `config` holds the numbers.
                yield from walk(item, path if key == "config" else [*path, str(key)])
        elif isinstance(value, float) and not math.isfinite(value):
            yield ".".join(path), value

    bad = next(walk(optimizer.get_config(), []), None)
    if bad is not None:
        raise ValueError(
            f"optimizer {type(optimizer).__name__}: {bad[0]} is {bad[1]}, not a finite "
            "number; give a finite value (e.g. a learning rate such as 5e-5)"
        )


def _is_default(value: Any, default: Any) -> bool:
    return (
        value is None
        or value is default
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == default)
    )


def _first_tensor(structure):
    return next(t for t in tf.nest.flatten(structure) if t is not None)


class UpdateStep:
    """Mixin for `keras.Model` subclasses: `train_step` makes one optimizer
    update with gradient accumulation, float16 loss scaling and global-batch
    metrics (see the module docstring)."""

    gradient_accumulation_steps = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Every keras_bert model reaches Keras' functional constructor here,
        # which would drop a keyword it does not know (`problem_type=...`).
        functional = {"inputs", "outputs"}
        check_model_keywords(type(self), {k: v for k, v in kwargs.items() if k not in functional})
        super().__init__(*args, **kwargs)
        # `model(x, remove_padding=True, read_positions=...)` reaches the encoder
        # inside, as `training` does (keras_bert.models.unpadded).
        self._register_call_context_args(*UNPADDED_CALL_ARGUMENTS)

    def compile(
        self,
        optimizer: Any = "rmsprop",
        *,
        gradient_accumulation_steps: int = 1,
        train_loop: str = "auto",
        **kwargs: Any,
    ) -> None:
        """Keras' compile, and `gradient_accumulation_steps` k: each dataset
        element then holds k micro-batches of equal size (batch the dataset k
        times larger); they run forward and backward one after another, so only
        one micro-batch's activations are alive at a time, and the optimizer
        applies the sum of their gradients once. A model computing in float16
        gets a LossScaleOptimizer (its gradients underflow without one).
        Keyword-only: Keras' second positional argument is the loss.

        `train_loop`: "auto" (Keras' `fit`, or keras_bert's `strategy.run`
        loop where Keras' cannot run: MultiWorkerMirroredStrategy), "fit" or
        "custom" (`keras_bert.models.strategy_run_fit`)."""
        self.gradient_accumulation_steps = check_accumulation_steps(gradient_accumulation_steps)
        if train_loop not in TRAIN_LOOPS:
            raise ValueError(f"train_loop must be one of {TRAIN_LOOPS}, got {train_loop!r}")
        self.train_loop = train_loop
        optimizer = keras.optimizers.get(optimizer)
        check_finite_hyperparameters(optimizer)
        if computes_in_float16(self) and not isinstance(
            optimizer, keras.optimizers.LossScaleOptimizer
        ):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        super().compile(optimizer=optimizer, **kwargs)

    train_loop = "auto"

    def fit(self, *args: Any, **kwargs: Any) -> keras.callbacks.History:
        """Keras' fit; under MultiWorkerMirroredStrategy (or `train_loop="custom"`)
        the same loop and callbacks over `strategy.run` (`strategy_run_fit`)."""
        if not runs_custom_loop(self):
            return super().fit(*args, **kwargs)
        signature = inspect.signature(keras.Model.fit)
        given = dict(signature.bind(self, *args, **kwargs).arguments)
        given.pop("self")
        given.pop("shuffle", None)  # the dataset's order is the order
        loop_arguments = ("x", "epochs", "initial_epoch", "steps_per_epoch", "callbacks", "verbose")
        unsupported = sorted(
            k
            for k, v in given.items()
            if k not in loop_arguments and not _is_default(v, signature.parameters[k].default)
        )
        if unsupported:
            raise ValueError(
                f"fit by strategy.run (train_loop {self.train_loop!r}, "
                f"{type(self.distribute_strategy).__name__}) does not take {unsupported}"
            )
        return fit_by_strategy_run(self, given.pop("x"), **given)

    # === Hooks ===

    def uses_update_loss(self) -> bool:
        return hasattr(self, "update_loss")

    def step_outputs(
        self, x: Any, y: Any = None, sample_weight: Any = None, *, training: bool
    ) -> Any:
        """The model's outputs on one batch of a step (targets and weights at
        hand, for a model whose call arguments depend on them)."""
        return self(x, training=training)

    # === The step ===

    def make_train_function(self, force: bool = False) -> Any:
        """Keras' train function, with the optimizer's variables made first.

        Without a distribution strategy Keras leaves the optimizer unbuilt until
        the first step's trace, which then creates its slots; a `tf.function`
        whose first trace created variables is traced a second time (the
        variable-free trace it calls from then on), so the first step paid for
        two traces of the whole forward, backward and update graph (2x the
        tracing, about 10 s of `fit`'s first step for MiniLM on 2 cores:
        benchmarks/first_step.py). Built here, once, as Keras' own symbolic
        build does under a strategy: the same variables, one trace."""
        optimizer = getattr(self, "optimizer", None)
        if (
            optimizer is not None
            and not optimizer.built
            and all(layer.built for layer in self._flatten_layers())
        ):
            with self.distribute_strategy.scope():
                optimizer.build(self.trainable_variables)
        return super().make_train_function(force)

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        self.apply_update(data)
        return self.get_metrics_result()

    def apply_update(self, data: Any) -> None:
        """One optimizer update from one (per-replica) dataset element: `fit`
        calls it through `train_step`, a custom loop inside `strategy.run`."""
        batch = keras.utils.unpack_x_y_sample_weight(data)  # (x, y, sample_weight)
        steps = self.gradient_accumulation_steps
        normaliser = None
        if self.uses_update_loss() and hasattr(self, "update_normaliser"):
            normaliser = self.update_normaliser(*batch)
        if steps == 1:
            total, gradients = self._loss_and_gradients(batch, normaliser, 1)
        else:
            total, gradients = self._accumulated_loss_and_gradients(batch, normaliser, steps)
        variables = self.trainable_variables
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(gradients, variables) if g is not None]
        )
        # Each replica's loss is its share of the global one (as Keras' own step).
        num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
        self._loss_tracker.update_state(
            total * num_replicas, sample_weight=tf.shape(_first_tensor(batch[0]))[0]
        )

    def _micro_batch_loss(self, batch, normaliser, micro_batches):
        """One (micro-)batch's share of the update's loss (see the module docstring)."""
        x, y, sample_weight = batch
        if self.uses_update_loss():
            loss, y_pred = self.update_loss(x, y, sample_weight, normaliser, micro_batches)
        else:
            y_pred = self.step_outputs(x, y, sample_weight, training=True)
            loss = self.compute_loss(x, y, y_pred, sample_weight, training=True)
            loss = loss / micro_batches
        if y_pred is not None and self._compile_metrics is not None:
            self._compile_metrics.update_state(y, y_pred, sample_weight)
        return loss

    def _loss_and_gradients(self, batch, normaliser, micro_batches):
        with tf.GradientTape() as tape:
            loss = self._micro_batch_loss(batch, normaliser, micro_batches)
            scaled = self.optimizer.scale_loss(loss)  # float16 loss scaling, else identity
        return loss, tape.gradient(scaled, self.trainable_variables)

    def _accumulated_loss_and_gradients(self, batch, normaliser, steps):
        rows = _first_tensor(batch[0]).shape[0]
        if rows is not None and rows % steps:
            raise ValueError(
                f"a batch of {rows} sequences per replica does not split into "
                f"gradient_accumulation_steps={steps} equal micro-batches"
            )
        micro = tf.nest.map_structure(
            lambda t: (
                None
                if t is None
                else tf.reshape(t, tf.concat([[steps, -1], tf.shape(t)[1:]], axis=0))
            ),
            batch,
        )  # (k, B / k, ...)

        def micro_batch(i):
            return tf.nest.map_structure(lambda t: None if t is None else t[i], micro)

        # The first micro-batch outside the loop: its gradients give the sums'
        # initial values and show which variables get none (e.g. the pooler
        # without a next-sentence head); Keras skips those, so must we.
        first_loss, first = self._loss_and_gradients(micro_batch(0), normaliser, steps)
        present = [i for i, g in enumerate(first) if g is not None]

        def body(i, total, sums):
            loss, gradients = self._loss_and_gradients(micro_batch(i), normaliser, steps)
            return (
                i + 1,
                total + loss,
                [s + tf.convert_to_tensor(gradients[j]) for s, j in zip(sums, present)],
            )

        # parallel_iterations=1: one micro-batch at a time (activation memory of one).
        _, total, sums = tf.while_loop(
            lambda i, *_: i < steps,
            body,
            (tf.constant(1), first_loss, [tf.convert_to_tensor(first[j]) for j in present]),
            parallel_iterations=1,
        )
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
            values = [
                context.all_reduce(reductions[v.aggregation], value)
                if v.aggregation in reductions
                else value
                for v, value in zip(metric.variables, values)
            ]
            result = metric.stateless_result(values)
            results.update(result if isinstance(result, dict) else {metric.name: result})
        return results
