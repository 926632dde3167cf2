"""One run of `keras-bert finetune`: the task model's one `fit`, with the
public callbacks of `keras_bert.callbacks` that a Python script passes too.

The task model trains with its own step (`TextTask`: batches cut to their
longest row, padding packed out, gradient accumulation, float16 loss scaling,
global-batch losses) under the run's tf.distribute strategy, precision and
XLA setting; `fit` is Keras' own, or keras_bert's `strategy.run` loop where
Keras' cannot run (`keras_bert.models.strategy_run_fit`). What the command
adds around `fit` are callbacks: `ExactResume` (checkpoints every
`checkpoint_every` steps and at each epoch's end, resumed at the exact step
by rerunning the command), `BestOnDev` (the dev figures each epoch, the best
model kept in `run_dir/best/`, early stopping), `TrainLog` (train_log.jsonl
and TensorBoard) and `StopOnNonFiniteLoss`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from typing import Any, Callable

import keras
import tensorflow as tf

from keras_bert import dataset_options
from keras_bert.progress import keras_verbose
from keras_bert.training import distribute
from keras_bert.training.callbacks import (
    BestOnDev,
    ExactResume,
    StopOnNonFiniteLoss,
    TrainLog,
    drops_remainder,
)
from keras_bert.training.checkpointing import checkpoint_step, optimizer_step, write_json
from keras_bert.training.optimization import create_adamw

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


@dataclasses.dataclass
class CompiledRun:
    """The task model built, its training data encoded, compiled for the run."""

    model: keras.Model
    fit_data: tuple  # (features, targets, sample weights): `fit`'s in-memory arrays
    update_rows: int  # rows in one optimizer update
    steps_per_epoch: int
    total_steps: int
    resume: ExactResume


def compiled_run(
    config: Any,
    task: Any,
    train_data: Any,
    run_dir: str | None,
    build_model: Callable[[str | None], keras.Model],
    strategy: tf.distribute.Strategy,
) -> CompiledRun:
    """`build_model(dtype)` inside the strategy's scope, the training data
    encoded by the model's own preprocessing, AdamW over the run's steps."""
    # Same seed, same initial weights and dropout masks in every process.
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        model = build_model(distribute.model_dtype(config.mixed_precision))
        if getattr(config, "lora_rank", None):
            model.enable_lora(config.lora_rank)  # the encoder frozen but its adapters
    features, targets, weights = model.encode_text(*task.fit_data(train_data))
    replicas = strategy.num_replicas_in_sync
    if config.batch_size % replicas:
        raise ValueError(
            f"batch_size {config.batch_size} is not divisible by the {replicas} replicas"
        )
    update_rows = config.batch_size * config.gradient_accumulation_steps
    steps_per_epoch = config.steps_per_epoch or len(
        dataset_options.epoch_batches(
            dataset_options.row_lengths(features),
            update_rows,
            config.seed,
            0,
            bucket_width=config.seq_length if config.bucket_by_length else None,
            drop_remainder=drops_remainder(strategy, config.gradient_accumulation_steps),
        )
    )
    if steps_per_epoch < 1:
        raise ValueError(
            f"{dataset_options.num_rows(features)} training examples make no full "
            f"batch of {update_rows}"
        )
    total_steps = max(int(steps_per_epoch * config.epochs), 1)
    with strategy.scope():
        model.compile(
            optimizer=create_adamw(
                config.learning_rate,
                total_steps,
                int(config.warmup_proportion * total_steps),
                weight_decay=config.weight_decay,
                clipnorm=config.clipnorm,
            ),
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            jit_compile=distribute.resolve_jit_compile(config.jit_compile),
            train_loop=config.train_loop,
            **task.compile_options(),
        )
    resume = ExactResume(
        os.path.join(run_dir, "checkpoints") if run_dir else None,
        seed=config.seed,
        save_every=config.checkpoint_every,
        keep=config.keep_checkpoints,
        bucket_by_length=config.bucket_by_length,
        total_steps=total_steps,
    )
    return CompiledRun(
        model, (features, targets, weights), update_rows, steps_per_epoch, total_steps, resume
    )


def train(
    config: Any,
    task: Any,
    train_data: Any,
    dev_data: Any,
    run_dir: str | None,
    build_model: Callable[[str | None], keras.Model],
    strategy: tf.distribute.Strategy,
) -> RunResult:
    """Trains the task model `build_model(dtype)` on `train_data` with one
    `fit` (see the module docstring); `task` (a task family of
    `keras_bert.training.finetuning`) says how the read data becomes `fit`'s
    (x, y) and scores dev."""
    chief = distribute.is_chief(strategy)
    run = compiled_run(config, task, train_data, run_dir, build_model, strategy)
    if run_dir:
        _record_or_check_run(os.path.join(run_dir, "checkpoints"), config, chief)
    callbacks: list[keras.callbacks.Callback] = [
        # The loss check first: a broken step stops before it is logged or checkpointed.
        StopOnNonFiniteLoss(run.resume.directory),
        run.resume,
    ]
    best = None
    if dev_data is not None:
        best = BestOnDev(
            lambda model: task.score(model, dev_data),
            task.primary_metric,
            directory=os.path.join(run_dir, "best") if run_dir else None,
            patience=config.early_stopping_patience,
        )
        callbacks.append(best)
    if run_dir:
        callbacks.append(
            TrainLog(
                os.path.join(run_dir, "logs"),
                run.update_rows,
                config.log_every,
                tensorboard=config.tensorboard,
                enabled=chief,
            )
        )
    features, targets, weights = run.fit_data
    run.model.fit(
        features,
        targets,
        sample_weight=weights,
        batch_size=run.update_rows,
        epochs=math.ceil(run.total_steps / run.steps_per_epoch),
        steps_per_epoch=config.steps_per_epoch,
        callbacks=callbacks,
        verbose=keras_verbose(config.verbose),
    )
    steps = optimizer_step(run.model.optimizer)
    if best is None:
        epochs = math.ceil(run.total_steps / run.steps_per_epoch)
        return RunResult(run.model, None, epochs, chief, steps)
    return RunResult(run.model, best.best_results, best.best_epoch, chief, steps)


def _record_or_check_run(checkpoints, config, chief):
    """A new run records its settings beside its checkpoints; a resumed one
    must have the same (`_check_same_run`)."""
    path = os.path.join(checkpoints, "finetune_config.json")
    if checkpoint_step(checkpoints) is not None:
        _check_same_run(path, config)
    elif chief:
        os.makedirs(checkpoints, exist_ok=True)
        write_json(path, dataclasses.asdict(config))


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
