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
import sys
from typing import Any

import keras
import tensorflow as tf

from keras_bert import safe_output
from keras_bert.errors import UserError
from keras_bert.training import distribute, finite_loss


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
        self.model = model
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, dropout_seeds=dropout_seed_states(model), **extra
        )
        self.chief = distribute.is_chief(strategy)
        self.directory = directory
        self.own_directory = directory
        if not self.chief:
            task = strategy.cluster_resolver.task_id
            self.own_directory = os.path.join(os.path.dirname(directory), f".worker_{task}_tmp")
        self.max_to_keep = max_to_keep
        self._make_managers()

    def _make_managers(self):
        # CheckpointManager reads the `checkpoint` index once, when made.
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.own_directory, max_to_keep=self.max_to_keep
        )
        self.chief_manager = (
            self.manager
            if self.chief
            else tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=None)
        )

    @property
    def latest(self) -> str | None:
        return self.chief_manager.latest_checkpoint

    def restore_latest(self) -> str | None:
        """Restores the newest checkpoint that reads whole and returns its path
        (None: no checkpoint). A newer one that is truncated or has lost a file
        (a full disk, a copy cut short, a file removed by hand) is skipped with
        a warning naming it and why; its files are renamed `*.unreadable` and
        the index no longer lists it, so the run's next save at that step is
        not mistaken for one already written. No readable checkpoint at all is
        an error (starting afresh would throw the run away without a word)."""
        state = tf.train.get_checkpoint_state(self.directory)
        if state is None or not state.model_checkpoint_path:
            return None
        paths = list(state.all_model_checkpoint_paths)
        if state.model_checkpoint_path not in paths:
            paths.append(state.model_checkpoint_path)
        skipped = []
        for path in sorted(paths, key=_step_of, reverse=True):
            reason = _unreadable(path)
            if reason is None:
                try:
                    status = self.checkpoint.restore(path)
                except (tf.errors.OpError, IndexError) as e:
                    # (A truncated data file: TensorFlow raises IndexError
                    # "Read less bytes than requested".)
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    reason = f"cannot be read, truncated or corrupted ({first[:200]})"
            if reason is not None:
                print(
                    f"warning: skipping checkpoint {path}: {reason}; trying the one before",
                    file=sys.stderr,
                    flush=True,
                )
                skipped.append(path)
                continue
            # Another run's checkpoint (other shapes, another model): an error.
            status.assert_existing_objects_matched()
            if skipped:
                self._set_aside(skipped, path)
                print(
                    f"resuming from {path}, the newest readable checkpoint "
                    f"({len(skipped)} newer one(s) skipped)",
                    flush=True,
                )
            return path
        raise UserError(
            f"{self.directory}: none of its {len(paths)} checkpoint(s) can be read "
            f"(newest: {paths[-1] if paths else '?'}); remove the folder (or pass --overwrite) "
            "to start the run afresh"
        )

    def _set_aside(self, skipped, restored):
        """The skipped checkpoints out of the index, their files kept as `*.unreadable`."""
        if self.chief:
            for path in skipped:
                for name in tf.io.gfile.glob(path + ".*"):
                    if not name.endswith(".unreadable"):
                        tf.io.gfile.rename(name, name + ".unreadable", overwrite=True)
            # The index as CheckpointManager writes it (names relative to the
            # folder, a timestamp per checkpoint, which its max_to_keep needs),
            # less the skipped ones; written whole.
            from google.protobuf import text_format

            state = tf.train.get_checkpoint_state(self.directory)
            paths = list(state.all_model_checkpoint_paths)
            stamps = list(state.all_model_checkpoint_timestamps)
            stamps = stamps if len(stamps) == len(paths) else [None] * len(paths)
            kept = [(os.path.basename(p), t) for p, t in zip(paths, stamps) if p not in skipped]
            del state.all_model_checkpoint_paths[:]
            del state.all_model_checkpoint_timestamps[:]
            state.model_checkpoint_path = os.path.basename(restored)
            state.all_model_checkpoint_paths.extend(name for name, _ in kept)
            state.all_model_checkpoint_timestamps.extend(t for _, t in kept if t is not None)
            safe_output.write_text(
                os.path.join(self.directory, "checkpoint"), text_format.MessageToString(state)
            )
        self._make_managers()

    def save(self, step: int) -> str:
        # Never a checkpoint of nan weights: the last good one stays the latest.
        finite_loss.check_finite_weights(self.model, step, self.directory)
        # A full disk or a folder turned read-only mid-run: one error naming the
        # folder; the index still names the last complete checkpoint.
        with safe_output.reporting_write_errors(self.manager.directory):
            path = self.manager.save(checkpoint_number=step)
        if not self.chief:
            tf.io.gfile.rmtree(self.manager.directory)
        return path


def _step_of(path: str) -> int:
    try:
        return int(path.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def _unreadable(path: str) -> str | None:
    """Why the checkpoint `path` (a prefix) cannot be restored, from its
    files alone; None if they are all there."""
    name = os.path.basename(path)
    if not tf.io.gfile.exists(path + ".index"):
        return f"its index file {name}.index is missing"
    data = [n for n in tf.io.gfile.glob(path + ".data-*-of-*") if n[-1].isdigit()]
    if not data:
        return f"its data file {name}.data-* is missing"
    shards = int(data[0].rsplit("-of-", 1)[1])
    if len(data) < shards:
        return f"{shards - len(data)} of its {shards} data files are missing"
    return None


def checkpoint_step(directory: str) -> int | None:
    """The step of the latest complete checkpoint in `directory`, or None."""
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return None
    return int(state.model_checkpoint_path.rsplit("-", 1)[1])


def write_json(path: str, record: Any) -> None:
    """Writes `record` as JSON in one piece: a kill leaves the old file or the new one."""
    safe_output.write_json(path, record)
