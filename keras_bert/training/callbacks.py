"""Keras callbacks for a fine-tuning run that survives kills: the pieces
`keras-bert finetune` passes to the task model's one `fit`, public so that a
Python script gets the same run (`keras_bert.callbacks`).

    resume = ExactResume("run/checkpoints", seed=0, save_every=100)
    best = BestOnDev(lambda model: model.score(dev_texts, dev_labels), "accuracy",
                     directory="run/best", patience=2)
    model.fit(texts, labels, epochs=3, batch_size=32,
              callbacks=[StopOnNonFiniteLoss(), resume, best, TrainLog("run/logs", 32)])

`ExactResume` makes a killed `fit`, rerun as it was, end with the weights of
the uninterrupted run (dropout masks included): in-memory data are read in an
order that is a function of the seed and the epoch, checkpoints hold the
model, the optimizer, the dropout RNG and the other callbacks' state, and the
rerun starts at the exact batch the restored optimizer step reached. Keras'
`BackupAndRestore` restarts the interrupted epoch instead.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert import dataset_options
from keras_bert.training import distribute
from keras_bert.training.checkpointing import CheckpointWriter, optimizer_step, write_json
from keras_bert.training.finite_loss import StopOnNonFiniteLoss
from keras_bert.training.train_log import TrainingLog

__all__ = ["BestOnDev", "ExactResume", "StopOnNonFiniteLoss", "TrainLog"]


class _EndOfEpoch:
    """`model.stop_training` while ExactResume ends a resumed epoch at its true
    end: truthy, so Keras leaves the epoch, and told apart from a real stop
    (EarlyStopping's True), so that only this one is taken back."""

    def __bool__(self) -> bool:
        return True


_END_OF_EPOCH = _EndOfEpoch()


class ExactResume(keras.callbacks.Callback):
    """Checkpoints a task model's `fit` in `directory` and resumes it at the
    exact step when the same `fit` is run again.

    In-memory data (texts, pairs, arrays) are read in epochs whose order is a
    function of `seed` and the epoch (`keras_bert.dataset_options.epoch_batches`),
    every batch one optimizer update, the last partial batch kept unless the
    model accumulates gradients or runs on several replicas. A checkpoint is
    written every `save_every` updates and at the end of every epoch, once
    every callback has finished it (so the best dev score and early stopping
    are saved with the weights they describe); `keep` are kept. Rerun, `fit`
    restores the newest checkpoint that reads whole, skips the batches its
    step consumed, and ends the interrupted epoch where it would have ended.

    `bucket_by_length`: batches of rows of similar lengths (several times
    faster on CPU; another batching). `total_steps`: the run ends at this
    update, inside its last epoch (fractional epochs). A `tf.data.Dataset`
    cannot be resumed exactly (its position is not known): `fit` refuses it.
    `directory=None`: the same batches and epochs, no checkpoint.
    """

    def __init__(
        self,
        directory: str | None,
        seed: int = 0,
        save_every: int | None = None,
        keep: int | None = 2,
        bucket_by_length: bool = False,
        total_steps: int | None = None,
    ) -> None:
        super().__init__()
        self.directory = directory
        self.seed, self.save_every, self.keep = seed, save_every, keep
        self.bucket_by_length, self.total_steps = bucket_by_length, total_steps
        self.writer: CheckpointWriter | None = None
        self.restored: str | None = None
        self.steps_per_epoch = 0
        self.last_saved = 0

    # === Before fit: restore, then the batches from the restored step ===

    def resume_fit(
        self, model: keras.Model, fit_arguments: dict, callbacks: Sequence[Any]
    ) -> dict | None:
        """`fit`'s bound arguments for the rest of the run (the task model's
        `fit` calls this with in-memory x / y / sample_weight), or None when
        the checkpointed run has nothing left to train."""
        x, y = fit_arguments.get("x"), fit_arguments.get("y")
        sample_weight = fit_arguments.get("sample_weight")
        if not dataset_options.are_arrays(x, y, sample_weight):
            raise ValueError(
                "ExactResume resumes `fit` on in-memory data (texts, pairs or arrays), "
                f"not on {type(x).__name__}: a dataset's position cannot be restored"
            )
        batch_size = dataset_options.default_batch_size(x, fit_arguments.get("batch_size"), None)
        epochs = int(fit_arguments.get("epochs", 1))
        plan = _EpochPlan(
            dataset_options.row_lengths(x) if self.bucket_by_length else None,
            dataset_options.num_rows(x),
            batch_size,
            self.seed,
            bucket_width=_width(x) if self.bucket_by_length else None,
            drop_remainder=_drops_remainder(model),
            steps=fit_arguments.get("steps_per_epoch"),
        )
        self.steps_per_epoch = plan.steps_per_epoch
        if self.steps_per_epoch < 1:
            raise ValueError(
                f"{plan.rows} training examples make no full batch of {batch_size} rows"
            )
        total = self.total_steps or epochs * self.steps_per_epoch
        self.set_model(model)
        start = self.restore(callbacks)
        if start >= total or any(getattr(c, "stopped_early", False) for c in callbacks):
            return None
        fit_arguments = dict(fit_arguments)
        dataset = dataset_options.ordered_batches(
            x, y, sample_weight, batches=plan.batches(start, total)
        )
        if hasattr(model, "trimmed") and not model.static_shapes():
            # Each whole batch cut to its longest row before the replicas'
            # split: one width on every replica, as on one device (a span
            # extractor's softmax spans the window, padding included).
            dataset = dataset.map(lambda *element: model.trimmed(_packed(element)))
        fit_arguments["x"] = dataset
        for name in ("y", "sample_weight", "batch_size"):
            fit_arguments.pop(name, None)
        fit_arguments.update(
            epochs=math.ceil(total / self.steps_per_epoch),
            initial_epoch=start // self.steps_per_epoch,
            steps_per_epoch=self.steps_per_epoch,
            shuffle=False,
        )
        self.total_steps = total
        return fit_arguments

    def restore(self, callbacks: Sequence[Any] = ()) -> int:
        """Restores the newest readable checkpoint (the model, its optimizer,
        the dropout RNG, the `checkpointed_state` of `callbacks`) and returns
        the optimizer step it holds (0: none yet)."""
        model = self.model
        if self.directory is None:
            self.last_saved = optimizer_step(model.optimizer)
            return self.last_saved
        with model.distribute_strategy.scope():
            # Built now so that restoring fills every slot variable at once.
            model.optimizer.build(model.trainable_variables)
        state = {}
        for callback in callbacks:
            state.update(getattr(callback, "checkpointed_state", {}))
        self.writer = CheckpointWriter(
            model.distribute_strategy,
            model,
            model.optimizer,
            self.directory,
            self.keep,
            **state,
        )
        self.restored = self.writer.restore_latest()
        step = optimizer_step(model.optimizer)
        if self.restored:
            where = ""
            if self.steps_per_epoch:
                where = (
                    f" (epoch {step // self.steps_per_epoch + 1}, batch "
                    f"{step % self.steps_per_epoch} of {self.steps_per_epoch})"
                )
            print(f"resuming from {self.restored} at step {step}{where}", flush=True)
        self.last_saved = step
        return step

    # === During fit ===

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        # The previous epoch's checkpoint, now that every callback has ended it.
        self._save_if_new()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        step = optimizer_step(self.model.optimizer)
        if self.total_steps is not None and step >= self.total_steps:
            self.model.stop_training = True  # a fractional last epoch ends here
        elif step % self.steps_per_epoch == 0 and not self.model.stop_training:
            # A resumed epoch, begun mid-way, ends where the uninterrupted one did.
            self.model.stop_training = _END_OF_EPOCH
        elif self.save_every and step - self.last_saved >= self.save_every:
            self._save_if_new()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        if self.model.stop_training is _END_OF_EPOCH:
            self.model.stop_training = False

    def on_train_end(self, logs: Any = None) -> None:
        self._save_if_new()

    def _save_if_new(self) -> None:
        # Never a second save at one step: a checkpoint is not rewritten in place.
        step = optimizer_step(self.model.optimizer)
        if self.writer is not None and step != self.last_saved:
            self.writer.save(step)
            self.last_saved = step


class _EpochPlan:
    """The run's batches: epoch by epoch, each epoch's from (seed, epoch)."""

    def __init__(self, lengths, rows, batch_size, seed, **options):
        self.rows, self.batch_size, self.seed, self.options = rows, batch_size, seed, options
        self.lengths = lengths if lengths is not None else np.zeros([rows], np.int64)
        self.steps_per_epoch = len(self.epoch(0))

    def epoch(self, epoch: int) -> list[np.ndarray]:
        return dataset_options.epoch_batches(
            self.lengths, self.batch_size, self.seed, epoch, **self.options
        )

    def batches(self, start: int, total: int) -> list[np.ndarray]:
        """The batches of steps start .. total - 1."""
        batches: list[np.ndarray] = []
        epoch = start // self.steps_per_epoch
        while start + len(batches) < total:
            skip = start - epoch * self.steps_per_epoch if not batches else 0
            batches += self.epoch(epoch)[skip:]
            epoch += 1
        return batches[: total - start]


def _packed(element):
    return element[0] if len(element) == 1 else element


def _width(x):
    return int(np.asarray(dataset_options.feature_sets(x)[0]["input_mask"]).shape[1])


def _drops_remainder(model):
    return drops_remainder(
        model.distribute_strategy, getattr(model, "gradient_accumulation_steps", 1) or 1
    )


def drops_remainder(strategy: tf.distribute.Strategy, gradient_accumulation_steps: int) -> bool:
    """Whether a run keeps only full batches: equal shares per replica and
    micro-batch (losses are global-batch means), static shapes on TPUs."""
    return (
        strategy.num_replicas_in_sync > 1
        or gradient_accumulation_steps > 1
        or isinstance(strategy, tf.distribute.TPUStrategy)
    )


class BestOnDev(keras.callbacks.Callback):
    """Scores dev at the end of every epoch, keeps the best model and stops
    after `patience` epochs without improvement.

    `score(model)` returns the dev metrics (a dict; e.g. `lambda m:
    m.score(dev_texts, dev_labels)`, the task's official figures); `metric`
    is the one to maximise. Each epoch's figures join the epoch's logs as
    `dev_<name>` (History, TensorBoard, Keras' EarlyStopping can read them).
    The best weights are kept in memory, and with a `directory` also on disk
    (`best.weights.npz` and `best.json`, each written whole), so that a run
    resumed by `ExactResume` keeps them; at the end of `fit` the model takes
    the best weights back (`restore_best`). `best_results` / `best_epoch`
    say which epoch won (1-based).
    """

    def __init__(
        self,
        score: Callable[[keras.Model], Mapping[str, Any]],
        metric: str,
        directory: str | None = None,
        patience: int | None = None,
        restore_best: bool = True,
        verbose: bool = True,
    ) -> None:
        super().__init__()
        self.score, self.metric, self.directory = score, metric, directory
        self.patience, self.restore_best, self.verbose = patience, restore_best, verbose
        # Checkpointed by ExactResume with the weights they describe.
        self.best_score = tf.Variable(-math.inf, dtype=tf.float64, trainable=False)
        self.best_epoch_variable = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.stopped = tf.Variable(False, trainable=False)
        self.best_in_memory: tuple[list, dict] | None = None

    @property
    def checkpointed_state(self) -> dict[str, tf.Variable]:
        return {
            "best_score": self.best_score,
            "best_epoch": self.best_epoch_variable,
            "stopped": self.stopped,
        }

    @property
    def stopped_early(self) -> bool:
        return bool(self.stopped.numpy())

    @property
    def best_epoch(self) -> int | None:
        epoch = int(self.best_epoch_variable.numpy())
        return epoch or None

    @property
    def best_results(self) -> dict | None:
        if self.best_in_memory is not None:
            return self.best_in_memory[1]
        saved = self._saved_record()
        return saved["dev"] if saved else None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        result = dict(self.score(self.model))
        if self.verbose:
            print(
                f"\nepoch {epoch + 1}: dev "
                + ", ".join(f"{k} {v:.4f}" for k, v in result.items() if isinstance(v, float)),
                flush=True,
            )
        if logs is not None:
            logs.update({f"dev_{k}": v for k, v in result.items() if isinstance(v, (int, float))})
        score = result[self.metric]
        if score > float(self.best_score.numpy()):
            self.best_score.assign(score)
            self.best_epoch_variable.assign(epoch + 1)
            self._keep(result, epoch + 1)
        elif (
            self.patience is not None
            and epoch + 1 - int(self.best_epoch_variable.numpy()) >= self.patience
        ):
            if self.verbose:
                print(
                    f"early stopping: no dev improvement in {self.patience} epoch(s)",
                    flush=True,
                )
            self.stopped.assign(True)
            self.model.stop_training = True

    def on_train_end(self, logs: Any = None) -> None:
        if self.restore_best:
            self.restore_best_weights()

    def restore_best_weights(self) -> None:
        """The model takes the best epoch's weights (from memory, or from
        `directory` after a resume)."""
        if self.best_in_memory is not None:
            self.model.set_weights(self.best_in_memory[0])
        elif self._saved_record() is not None:
            with np.load(os.path.join(self.directory, "best.weights.npz")) as saved:
                self.model.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])

    def _keep(self, result, epoch):
        self.best_in_memory = (self.model.get_weights(), result)
        if self.directory and distribute.is_chief(self.model.distribute_strategy):
            os.makedirs(self.directory, exist_ok=True)
            # The model's weights alone (Keras' weights file would carry the
            # optimizer's step and moments too), written aside, then renamed:
            # a kill never leaves half a file under the name.
            partial = os.path.join(self.directory, f"best.weights.partial-{os.getpid()}")
            with open(partial, "wb") as f:
                np.savez(f, *self.model.get_weights())
            os.replace(partial, os.path.join(self.directory, "best.weights.npz"))
            # The record last: a folder with best.json has its weights whole.
            write_json(
                os.path.join(self.directory, "best.json"), {"dev": result, "best_epoch": epoch}
            )

    def _saved_record(self):
        path = os.path.join(self.directory or "", "best.json")
        if not self.directory or not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)


class TrainLog(keras.callbacks.Callback):
    """`train_log.jsonl` and TensorBoard scalars in `directory` every
    `log_every` updates (losses, metrics, learning rate, rows per second),
    and each epoch's `dev_*` figures (from `BestOnDev`, listed before this
    callback), keyed by the optimizer step: a resumed run continues the same
    curves. `rows_per_step`: rows in one update (batch size times gradient
    accumulation). `enabled=False`: nothing written (a non-chief worker)."""

    def __init__(
        self,
        directory: str,
        rows_per_step: int,
        log_every: int = 50,
        tensorboard: bool = True,
        enabled: bool = True,
    ) -> None:
        super().__init__()
        self.directory, self.rows_per_step, self.log_every = directory, rows_per_step, log_every
        self.enabled = enabled and tensorboard
        self.log: TrainingLog | None = None

    def on_train_begin(self, logs: Any = None) -> None:
        # After ExactResume's restore: records past the restored step are dropped.
        self.log = TrainingLog(
            self.directory, self.model.optimizer, self.rows_per_step, enabled=self.enabled
        )

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        step = optimizer_step(self.model.optimizer)
        # (StopOnNonFiniteLoss, listed first, keeps a non-finite loss out of the log.)
        if step % self.log_every == 0 and step != self.log.last_step:
            self.log.write(logs or {}, step)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        dev = {k: v for k, v in (logs or {}).items() if k.startswith("dev_")}
        if dev:
            self.log.write_scalars(dev, optimizer_step(self.model.optimizer))
        self.log.restart_clock()  # the evaluation is not training time
