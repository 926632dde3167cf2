"""`train_log.jsonl` and TensorBoard scalars of a training run, keyed by the
optimizer step, so that a resumed run continues the same curves: records past
the restored step (written again by the resumed run) are dropped on restart."""

from __future__ import annotations

import json
import os
import time
from typing import Mapping

import keras
import tensorflow as tf

from keras_bert import safe_output
from keras_bert.training.checkpointing import optimizer_step


class TrainingLog:
    """TensorBoard scalars + `train_log.jsonl` every `log_every` steps: losses,
    accuracies, learning rate and sequences/second, keyed by the optimizer step
    (so a resumed run continues the same curves)."""

    def __init__(
        self,
        directory: str,
        optimizer: keras.optimizers.Optimizer,
        sequences_per_step: int,
        enabled: bool = True,
    ) -> None:
        self.sequences_per_step = sequences_per_step
        self.optimizer = optimizer
        self.enabled = enabled
        self.writer = (
            tf.summary.create_file_writer(os.path.join(directory, "tensorboard", "train"))
            if enabled
            else None
        )
        self.path = os.path.join(directory, "train_log.jsonl")
        self.last_time = time.perf_counter()
        self.last_step = optimizer_step(optimizer)
        if enabled and tf.io.gfile.exists(self.path):
            # Records past the restored step were lost with the killed process
            # and will be written again: drop them so each step appears once.
            # A kill while a record was written leaves a torn line: dropped too
            # (it is past the restored step), never a reason not to resume.
            kept = []
            with tf.io.gfile.GFile(self.path) as f:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                        step = int(record["step"])
                    except (ValueError, KeyError, TypeError):
                        print(
                            f"{self.path}, line {number}: not a complete record "
                            "(a run killed while writing it): dropped",
                            flush=True,
                        )
                        continue
                    if step <= self.last_step:
                        kept.append(json.dumps(record) + "\n")
            safe_output.write_text(self.path, "".join(kept))

    def restart_clock(self) -> None:
        self.last_time = time.perf_counter()
        self.last_step = optimizer_step(self.optimizer)

    def write(self, metrics: Mapping[str, float], step: int | None = None) -> dict[str, float]:
        step = optimizer_step(self.optimizer) if step is None else step
        now = time.perf_counter()
        sequences = (step - self.last_step) * self.sequences_per_step
        record = {
            "step": step,
            **{k: float(v) for k, v in metrics.items()},
            "learning_rate": float(keras.ops.convert_to_numpy(self.optimizer.learning_rate)),
            "sequences_per_second": sequences / max(now - self.last_time, 1e-9),
        }
        self.last_time, self.last_step = now, step
        return self.write_scalars(record, step)

    def write_scalars(self, values: Mapping[str, float], step: int) -> dict[str, float]:
        """One record of `values` at `step` as they are (e.g. an epoch's dev metrics)."""
        record = {"step": step, **{k: float(v) for k, v in values.items() if k != "step"}}
        if not self.enabled:
            return record
        with self.writer.as_default(step=step):
            for name, value in record.items():
                if name != "step":
                    tf.summary.scalar(name, value)
        self.writer.flush()
        # Appended (a record at a time, not the file rewritten): a kill or a
        # full disk mid-line leaves a torn last line, which a resumed run drops.
        with safe_output.reporting_write_errors(self.path), tf.io.gfile.GFile(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        return record
