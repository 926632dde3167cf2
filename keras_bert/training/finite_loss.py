"""A run whose loss is no longer a number stops, and says so.

A learning rate far too large (1e9), float16 without loss scaling or a
broken batch turns the loss into nan or inf; from then on every update
writes nan into the weights, and a run that went on would checkpoint and
save a model of nan. `StopOnNonFiniteLoss` (Keras' `TerminateOnNaN`, but
raising an error the command prints as one line, exit 2) stops `fit` at the
first step whose loss is not finite, before that step is checkpointed, and
names the step, the loss and the last checkpoint kept. Both run drivers
pass it to `fit` (first, so that it runs before their checkpoint callback)
and call `check_losses` in their custom loops; a Python user's `fit` takes
it too:

    model.fit(x, y, callbacks=[StopOnNonFiniteLoss()])

A checkpoint is also refused when the weights themselves are not finite
(`check_finite_weights`): an update can overflow while its loss was finite.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import keras
import tensorflow as tf

from keras_bert.errors import UserError


class NonFiniteLossError(UserError):
    """The loss (or the weights) of a training run became nan or infinite."""


def _learning_rate(optimizer: Any) -> float | None:
    try:
        return float(keras.ops.convert_to_numpy(optimizer.learning_rate))
    except Exception:  # an optimizer of the user's own without one
        return None


def _kept(checkpoints: str | None) -> str:
    latest = tf.train.latest_checkpoint(checkpoints) if checkpoints else None
    if latest:
        return f"the last checkpoint, {latest}, is kept (written before the loss broke); "
    return "no checkpoint was written; "


def check_losses(
    logs: Mapping[str, Any] | None,
    step: int,
    optimizer: Any = None,
    checkpoints: str | None = None,
) -> None:
    """Raises NonFiniteLossError if a loss in `logs` (`loss`, `*_loss`) at
    optimizer step `step` is nan or infinite; `checkpoints` the run's
    checkpoint folder, to name the checkpoint kept."""
    for name, value in (logs or {}).items():
        if name != "loss" and not name.endswith("_loss"):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            continue
        rate = _learning_rate(optimizer) if optimizer is not None else None
        raise NonFiniteLossError(
            f"step {step}: the training {name} is {number} (not a finite number), so training "
            f"stopped{f' at learning rate {rate:.3g}' if rate is not None else ''}; "
            f"{_kept(checkpoints)}lower the learning rate (or raise warmup), or look for "
            "broken inputs (labels, weights); with float16, keep loss scaling"
        )


def check_finite_weights(model: keras.Model, step: int, checkpoints: str | None = None) -> None:
    """Raises NonFiniteLossError if a trainable weight of `model` holds nan or inf."""
    for variable in model.trainable_variables:
        if not bool(tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(variable)))):
            raise NonFiniteLossError(
                f"step {step}: the weight {variable.path} holds nan or inf values, so training "
                f"stopped before checkpointing them; {_kept(checkpoints)}lower the learning "
                "rate (or raise warmup), or look for broken inputs"
            )


def _step(optimizer: Any) -> int:
    return int(keras.ops.convert_to_numpy(optimizer.iterations))


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stops `fit` with a NonFiniteLossError at the first batch whose loss is
    nan or infinite (see the module docstring). `checkpoints`: the run's
    checkpoint folder, named in the error."""

    def __init__(self, checkpoints: str | None = None) -> None:
        super().__init__()
        self.checkpoints = checkpoints

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        optimizer = self.model.optimizer
        check_losses(logs, _step(optimizer), optimizer, self.checkpoints)
