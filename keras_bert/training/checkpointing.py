"""What pretraining and fine-tuning runs share to survive a kill: checkpoints
of the model, its optimizer and its dropout RNG, written so that a kill at any
moment leaves the previous one intact, and files replaced whole.

tf.train.CheckpointManager writes a checkpoint's files first and updates the
`checkpoint` index last, so the index always names a complete checkpoint. In
multi-worker runs every worker saves (the variables are synchronised by
collectives, and saving is collective), but only the chief's files land in the
run's folder; the others write to a temporary folder they then remove.
"""

from __future__ import annotations

import os
from typing import Any

import keras
import tensorflow as tf

from keras_bert import safe_output
from keras_bert.training import distribute


def optimizer_step(optimizer: keras.optimizers.Optimizer) -> int:
    """Optimizer updates so far."""
    return int(keras.ops.convert_to_numpy(optimizer.iterations))


def dropout_seed_states(model: keras.Model) -> list[tf.Variable]:
    """The model's Keras seed-generator states (the dropout RNG), in the order of
    its layers: the same for every build of the same model. (Not by the states'
    paths: those carry process-wide counters, `seed_generator_9` in one build
    and `seed_generator_10` in the next sort differently, and a resumed run
    built in the process that ran the first would get its states swapped.)"""
    states = {}  # id -> state, in first-seen order (a shared layer counted once)
    # Private Keras (tests/test_keras_internals.py): `_flatten_layers` reaches
    # nested layers; `_seed_generators`, every Keras layer's list of its
    # SeedGenerators. Read directly, never with a default: a renamed list would
    # otherwise drop the dropout RNG from every checkpoint without a word.
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if not hasattr(layer, "_seed_generators"):
            raise RuntimeError(
                f"Keras {keras.__version__}: the layer {layer.name!r} has no `_seed_generators` "
                "(Keras 3.15's list of a layer's SeedGenerators), so checkpoints cannot save the "
                "dropout RNG and a resumed run would draw other masks; keras_bert is tested with "
                "Keras 3.15 (tests/test_keras_internals.py)"
            )
        for generator in layer._seed_generators:
            states.setdefault(id(generator), generator.state.value)  # the tf.Variable
    return list(states.values())


class CheckpointWriter:
    """tf.train.CheckpointManager over `directory` of a model, its optimizer,
    its dropout seed states and any `extra` trackables (a run's own counters).

    Dropout's seed generators are Keras variables that tf.train.Checkpoint does
    not reach through the model: saved beside it, a resumed run draws the
    dropout masks the uninterrupted run would have drawn. (Checkpoints written
    without them still restore; their masks restart.)
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        directory: str,
        max_to_keep: int | None,
        **extra: Any,
    ) -> None:
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, dropout_seeds=dropout_seed_states(model), **extra
        )
        self.chief = distribute.is_chief(strategy)
        self.directory = directory
        own_directory = directory
        if not self.chief:
            task = strategy.cluster_resolver.task_id
            own_directory = os.path.join(os.path.dirname(directory), f".worker_{task}_tmp")
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, own_directory, max_to_keep=max_to_keep
        )
        self.chief_manager = (
            self.manager
            if self.chief
            else tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=None)
        )

    @property
    def latest(self) -> str | None:
        return self.chief_manager.latest_checkpoint

    def restore_latest(self) -> str | None:
        latest = self.latest
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        return latest

    def save(self, step: int) -> str:
        # A full disk or a folder turned read-only mid-run: one error naming the
        # folder; the index still names the last complete checkpoint.
        with safe_output.reporting_write_errors(self.manager.directory):
            path = self.manager.save(checkpoint_number=step)
        if not self.chief:
            tf.io.gfile.rmtree(self.manager.directory)
        return path


def checkpoint_step(directory: str) -> int | None:
    """The step of the latest complete checkpoint in `directory`, or None."""
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return None
    return int(state.model_checkpoint_path.rsplit("-", 1)[1])


def write_json(path: str, record: Any) -> None:
    """Writes `record` as JSON in one piece: a kill leaves the old file or the new one."""
    safe_output.write_json(path, record)
