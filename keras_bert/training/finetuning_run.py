"""One fine-tuning run: distributed, checkpointed, resumed at the exact step.

The task model trains with its own step (`TextTask`: batches cut to their
longest row, padding packed out, gradient accumulation, float16 loss scaling,
global-batch losses; `keras_bert.models.update_step`) under the run's
tf.distribute strategy, precision and XLA setting, with the names and helpers
of pretraining (`distribute`, `checkpointing`, `train_log`). Two loops over
that one step: the model's `fit` (one device, MirroredStrategy, TPUStrategy)
and `strategy.run` chunks (MultiWorkerMirroredStrategy, which Keras 3's `fit`
does not run). What this module adds to `fit` is what a command-line run
needs around it: exact resume, the best model on dev, early stopping, logs.

Resuming: with a `run_dir`, a checkpoint is written every `checkpoint_every`
steps and at the end of every epoch. It holds the model, the optimizer (its
step, hence the schedule and the position in the data), the dropout RNG and
the early-stopping state (best dev score, its epoch, whether the run
stopped). Every epoch's order is a function of the seed and the epoch
(`finetuning_data`), so rerunning the same command skips exactly the batches
the restored step consumed and ends with the weights of an uninterrupted run.
The best model on dev is written whole to `run_dir/best/` when dev improves
(a complete finetune output, so a kill never loses it); the run's model is
the best one when there is a dev set, else the last.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from typing import Any, Callable, Mapping

import keras
import tensorflow as tf

from keras_bert.progress import keras_verbose
from keras_bert.training import distribute, finetuning_data, steps
from keras_bert.training.checkpointing import CheckpointWriter, optimizer_step, write_json
from keras_bert.training.finite_loss import StopOnNonFiniteLoss, check_losses
from keras_bert.training.optimization import create_adamw
from keras_bert.training.train_log import TrainingLog

# Settings a resumed run may change: how it runs and reports, not what it trains.
RESUMABLE_CHANGES = frozenset(
    {
        "verbose",
        "overwrite",
        "tensorboard",
        "eval_batch_size",
        "strategy",
        "tpu",
        "devices",
        "train_loop",
        "jit_compile",
        "keep_checkpoints",
        "log_every",
        "checkpoint_every",
        "null_score_diff_threshold",
        "n_best_size",
        "output_dir",
    }
)


@dataclasses.dataclass
class RunResult:
    model: keras.Model
    dev: dict | None  # the best epoch's dev metrics (None without dev data)
    best_epoch: int | None  # 1-based; the last epoch without dev data
    chief: bool = True  # this process writes the run's files
    steps: int = 0  # optimizer updates made (all epochs, resumed ones included)


class FinetuneRun:
    """Trains the task model `build_model(dtype)` on `train_data` (see `finetune`).

    `task` (a task family of `keras_bert.training.finetuning`) says how the
    read data becomes `fit`'s (x, y) (`task.fit_data`) and scores dev
    (`task.score`); the model's preprocessor encodes the text, once.
    `build_model(dtype)` makes the task model inside the strategy's scope;
    `save_model(model, directory, dev_results)` writes a finetune output (used
    for `best/`). `strategy`: the config's, built beforehand (multi-worker
    collectives must be set up before TensorFlow runs an op).
    """

    def __init__(
        self,
        config: Any,
        task: Any,
        train_data: Any,
        dev_data: Any,
        run_dir: str | None,
        build_model: Callable[[str | None], keras.Model],
        save_model: Callable[[keras.Model, str, dict], None],
        strategy: tf.distribute.Strategy | None = None,
    ) -> None:
        self.config, self.task = config, task
        self.dev_data = dev_data
        self.run_dir, self.save_model = run_dir, save_model
        self.strategy = strategy or distribute.build_strategy(
            config.strategy, tpu=config.tpu, devices=config.devices
        )
        self.chief = distribute.is_chief(self.strategy)
        self._build_model(build_model)
        self.train_data = self._encode(train_data)
        self.custom_loop = config.train_loop == "custom" or (
            config.train_loop == "auto" and distribute.is_multi_worker(self.strategy)
        )
        replicas = self.strategy.num_replicas_in_sync
        if config.batch_size % replicas:
            raise ValueError(
                f"batch_size {config.batch_size} is not divisible by the {replicas} replicas"
            )
        # One element is one update; equal shares per replica and micro-batch
        # (so losses are global-batch means) and static shapes on TPUs.
        self.update_rows = config.batch_size * config.gradient_accumulation_steps
        self.static_shapes = isinstance(self.strategy, tf.distribute.TPUStrategy)
        self.drop_remainder = (
            replicas > 1 or config.gradient_accumulation_steps > 1 or self.static_shapes
        )
        self.steps_per_epoch = config.steps_per_epoch or finetuning_data.batches_per_epoch(
            self.train_data,
            self.update_rows,
            config.seq_length,
            config.bucket_by_length,
            self.drop_remainder,
        )
        if self.steps_per_epoch < 1:
            raise ValueError(
                f"{finetuning_data.num_rows(self.train_data)} training examples make "
                f"no full batch of {self.update_rows}"
            )
        self.total_steps = max(int(self.steps_per_epoch * config.epochs), 1)
        self.epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        self._compile()

    # === Model, data, optimizer, checkpoint ===

    def _build_model(self, build_model):
        config = self.config
        # Same seed, same initial weights and dropout masks in every process.
        keras.utils.set_random_seed(config.seed)
        with self.strategy.scope():
            self.model = build_model(distribute.model_dtype(config.mixed_precision))
            if getattr(config, "lora_rank", None):
                self.model.enable_lora(config.lora_rank)  # the encoder frozen but its adapters

    def _encode(self, data):
        """The read data -> {"features", "targets", "weights"} NumPy arrays, by the
        task model's own preprocessing (what its `fit` does with text)."""
        features, targets, weights = self.model.encode_text(*self.task.fit_data(data))
        return {"features": features, "targets": targets, "weights": weights}

    def _compile(self):
        config = self.config
        with self.strategy.scope():
            optimizer = create_adamw(
                config.learning_rate,
                self.total_steps,
                int(config.warmup_proportion * self.total_steps),
                weight_decay=config.weight_decay,
                clipnorm=config.clipnorm,
            )
            # The task model's own loss, metrics and loss weights (`TextTask.compile`).
            self.model.compile(
                optimizer=optimizer,
                gradient_accumulation_steps=config.gradient_accumulation_steps,
                jit_compile=distribute.resolve_jit_compile(config.jit_compile),
                **self.task.compile_options(),
            )
            # Built now so that restoring fills every slot variable at once.
            self.model.optimizer.build(self.model.trainable_variables)
        # The early-stopping state, checkpointed with the weights it describes.
        self.best_score = tf.Variable(-math.inf, dtype=tf.float64, trainable=False)
        self.best_epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.stopped = tf.Variable(False, trainable=False)
        self.writer = self.log = None
        if self.run_dir:
            self.writer = CheckpointWriter(
                self.strategy,
                self.model,
                self.model.optimizer,
                os.path.join(self.run_dir, "checkpoints"),
                config.keep_checkpoints,
                best_score=self.best_score,
                best_epoch=self.best_epoch,
                stopped=self.stopped,
            )
            self.log = TrainingLog(
                os.path.join(self.run_dir, "logs"),
                self.model.optimizer,
                self.update_rows,
                enabled=self.chief and config.tensorboard,
            )
        self.best_in_memory = None  # (weights, dev metrics) when there is no run_dir
        self.run_updates = None  # the custom loop's tf.function

    @property
    def step(self) -> int:
        return optimizer_step(self.model.optimizer)

    def _restore(self):
        if self.writer is None:
            return
        saved_config = os.path.join(self.run_dir, "checkpoints", "finetune_config.json")
        restored = self.writer.restore_latest()
        if restored:
            _check_same_run(saved_config, self.config)
            print(
                f"resuming from {restored} at step {self.step} (epoch "
                f"{self.step // self.steps_per_epoch + 1}, batch "
                f"{self.step % self.steps_per_epoch} of {self.steps_per_epoch})",
                flush=True,
            )
        elif self.chief:
            os.makedirs(os.path.dirname(saved_config), exist_ok=True)
            write_json(saved_config, dataclasses.asdict(self.config))

    def _checkpoint(self):
        # Never a second save at one step (resumed at an epoch's end): a
        # checkpoint is not rewritten in place.
        if self.writer is not None and self.writer.latest != os.path.join(
            self.run_dir, "checkpoints", f"ckpt-{self.step}"
        ):
            self.writer.save(self.step)
        self.last_saved = self.step

    # === Training ===

    def run(self) -> RunResult:
        self._restore()
        self.last_saved = self.step
        start_epoch = self.step // self.steps_per_epoch
        if self.log is not None:
            self.log.restart_clock()
        for epoch in range(start_epoch, self.epochs):
            if bool(self.stopped.numpy()):
                break
            end = min((epoch + 1) * self.steps_per_epoch, self.total_steps)
            if self.step < end:
                self._train_until(epoch, end)
            self._end_epoch(epoch)
        return self._result()

    def _epoch_data(self, epoch):
        skip = self.step - epoch * self.steps_per_epoch
        config = self.config

        def dataset_fn(input_context):
            return finetuning_data.epoch_dataset(
                self.train_data,
                self.update_rows,
                config.seed,
                epoch,
                config.seq_length,
                steps=config.steps_per_epoch,
                skip=skip,
                bucket_by_length=config.bucket_by_length,
                drop_remainder=self.drop_remainder,
                trim=not self.static_shapes,
                input_context=input_context,
            )

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def _train_until(self, epoch, end):
        self.epoch_end = end
        dataset = self._epoch_data(epoch)
        if self.custom_loop:
            self._custom_loop(dataset, end)
            return
        # The loss check first: a broken step stops before it is logged or checkpointed.
        guard = StopOnNonFiniteLoss(self.writer.directory if self.writer else None)
        callback = _StepCallback(self)
        self.model.fit(
            dataset,
            initial_epoch=epoch,
            epochs=self.epochs,
            steps_per_epoch=end - self.step,
            callbacks=[guard, callback],
            verbose=keras_verbose(self.config.verbose),
            shuffle=False,
        )

    def _custom_loop(self, dataset, end):
        if self.run_updates is None:  # traced once for the run, not once an epoch
            self.run_updates = steps.update_function(self.strategy, self.model)
        iterator = iter(dataset)
        for metric in self.model.metrics:
            metric.reset_state()
        while self.step < end:
            chunk = min(end - self.step, self.config.log_every)
            self.run_updates(iterator, tf.constant(chunk))
            values = steps.metric_values(self.model)
            check_losses(
                values, self.step, self.model.optimizer, self.writer and self.writer.directory
            )
            self.after_steps(values)

    def after_steps(self, logs: Mapping[str, Any]) -> None:
        """After an update (or a chunk of them): the log and the step checkpoint
        (not at the epoch's end, whose checkpoint follows the evaluation)."""
        step = self.step
        if (
            self.log is not None
            and step % self.config.log_every == 0
            and step != self.log.last_step
        ):
            self.log.write(logs, step)
        if (
            self.config.checkpoint_every
            and step < self.epoch_end
            and step - self.last_saved >= self.config.checkpoint_every
        ):
            self._checkpoint()

    def _end_epoch(self, epoch):
        """Dev score, the best model kept, early stopping; then the epoch's checkpoint."""
        if self.dev_data is not None:
            result = self.task.score(self.model, self.dev_data)
            print(
                f"\nepoch {epoch + 1}: dev "
                + ", ".join(f"{k} {v:.4f}" for k, v in result.items() if isinstance(v, float)),
                flush=True,
            )
            if self.log is not None:
                self.log.write_scalars(
                    {f"dev_{k}": v for k, v in result.items() if isinstance(v, (int, float))},
                    self.step,
                )
                self.log.restart_clock()  # the evaluation is not training time
            score = result[self.task.primary_metric]
            if score > float(self.best_score.numpy()):
                self.best_score.assign(score)
                self.best_epoch.assign(epoch + 1)
                self._keep_best(result, epoch + 1)
            elif (
                self.config.early_stopping_patience is not None
                and epoch + 1 - int(self.best_epoch.numpy()) >= self.config.early_stopping_patience
            ):
                print(
                    f"early stopping: no dev improvement in "
                    f"{self.config.early_stopping_patience} epoch(s)",
                    flush=True,
                )
                self.stopped.assign(True)
        self._checkpoint()

    def _keep_best(self, result, epoch):
        if self.run_dir is None or not self.chief:
            self.best_in_memory = (self.model.get_weights(), result)
        else:
            self.save_model(
                self.model, os.path.join(self.run_dir, "best"), {"dev": result, "best_epoch": epoch}
            )

    def _result(self) -> RunResult:
        if self.dev_data is None:
            return RunResult(self.model, None, self.epochs, self.chief, self.step)
        if self.best_in_memory is not None:
            weights, dev = self.best_in_memory
            self.model.set_weights(weights)
            return RunResult(self.model, dev, int(self.best_epoch.numpy()), self.chief, self.step)
        # The chief's best model on disk (also after a resume, where memory has none).
        best = os.path.join(self.run_dir, "best")
        with open(os.path.join(best, "dev_results.json")) as f:
            saved = json.load(f)
        if getattr(self.model, "lora_rank", None):
            # best/model.keras is merged; its adapters and head are in lora_weights.npz.
            self.model.load_lora_weights(os.path.join(best, "lora_weights.npz"))
        else:
            kept = keras.models.load_model(os.path.join(best, "model.keras"), compile=False)
            self.model.set_weights(kept.get_weights())
        return RunResult(self.model, saved["dev"], saved["best_epoch"], self.chief, self.step)


class _StepCallback(keras.callbacks.Callback):
    """`fit`'s hooks into the run: logs and checkpoints after updates; one
    `fit` call is one epoch (the run evaluates between them)."""

    def __init__(self, run: FinetuneRun) -> None:
        super().__init__()
        self.run = run

    def on_train_batch_end(self, batch, logs=None):
        self.run.after_steps(logs or {})

    def on_epoch_end(self, epoch, logs=None):
        self.model.stop_training = True


def _effective(name, value):
    """A field's value as the run uses it: mixed_precision "auto", "float32"
    and null (older runs) all mean float32 on a machine without bfloat16."""
    if name == "mixed_precision":
        return distribute.model_dtype(value)
    return value


def _check_same_run(path, config):
    """A checkpoint resumes only the run that wrote it (same data, model, schedule)."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        saved = json.load(f)
    # A field the saved config lacks is newer than the run, which trained as
    # its default does.
    defaults = {
        field.name: field.default
        for field in dataclasses.fields(config)
        if field.default is not dataclasses.MISSING
    }
    saved = {**{name: value for name, value in defaults.items() if name not in saved}, **saved}
    current = dataclasses.asdict(config)
    changed = sorted(
        name
        for name in set(saved) | set(current)
        if name not in RESUMABLE_CHANGES
        and _effective(name, saved.get(name)) != _effective(name, current.get(name))
    )
    if changed:
        details = ", ".join(f"{n}: {saved.get(n)!r} -> {current.get(n)!r}" for n in changed)
        raise ValueError(
            f"{os.path.dirname(os.path.dirname(path))} holds checkpoints of another "
            f"run ({details}); rerun with the same settings to resume, or pass "
            "--overwrite to start afresh"
        )


def discard_run_state(run_dir: str, keep_logs: bool = False) -> None:
    """Removes a run's checkpoints and best model (a finished run), and its
    logs too unless `keep_logs` (a fresh start: --overwrite)."""
    names = ("checkpoints", "best") + (() if keep_logs else ("logs",))
    for name in names:
        shutil.rmtree(os.path.join(run_dir, name), ignore_errors=True)
