"""Input pipelines whose iterators end at once: tf.data's autotuning left off.

Why: with autotuning on (tf.data's default), every iterator runs a model
thread that wakes at growing intervals (tens of seconds into a run) to retune buffer
sizes and parallelism. Deleting the iterator cancels that thread and waits
for it, and about half the time the thread sleeps out its interval first
(seen with gdb in TensorFlow 2.20: the deleting thread in
`~LogicalThreadWrapper`, the model thread waiting in `Model::OptimizeLoop`;
our reading of the cause: `CancellationManager::StartCancel` wakes it before
marking the cancellation done, so it may find nothing cancelled). Keras
deletes its iterator at the end of every `fit`, `evaluate` and `predict`:
fine-tuning wnut16 (an epoch of ~27 s on 2 cores), `fit` returned 9-22 s
after its last step in about half the calls, and a plain one-layer Keras
model on arrays showed the same.

Our pipelines do little per batch (a gather of rows, a cut of padding) ahead
of a train step that takes far longer, so there is nothing for autotuning to
find; their `tf.data.AUTOTUNE` settings then take TensorFlow's static
defaults. Pretraining's file-reading pipeline keeps autotuning: it has one
iterator for a whole run.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import tensorflow as tf


def without_autotune(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's autotuning (and its model thread) off."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


_lock = threading.Lock()
_depth = 0  # nested keras_arrays_without_autotune() calls (evaluate inside fit)
_keras_build = None  # Keras' own ArrayDataAdapter.get_tf_dataset while wrapped


@contextlib.contextmanager
def keras_arrays_without_autotune() -> Iterator[None]:
    """Keras' own pipelines over in-memory arrays (what `fit`, `evaluate` and
    `predict` build from NumPy inputs) made without autotuning while inside.

    Keras offers no setting for that pipeline's options, so its builder
    (`ArrayDataAdapter.get_tf_dataset`) is wrapped for the duration; where a
    Keras version lacks it, nothing changes.
    """
    global _depth, _keras_build
    try:
        from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter
    except ImportError:  # another Keras layout: its pipelines as they are
        yield
        return
    with _lock:
        if _depth == 0:
            _keras_build = build = ArrayDataAdapter.get_tf_dataset
            ArrayDataAdapter.get_tf_dataset = lambda self: without_autotune(build(self))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                ArrayDataAdapter.get_tf_dataset, _keras_build = _keras_build, None
