"""Input pipelines whose iterators end at once: tf.data's autotuning left off.

Why: with autotuning on (tf.data's default), every iterator runs a model
thread that wakes at growing intervals (tens of seconds into a run) to retune buffer
sizes and parallelism. Deleting the iterator cancels that thread and waits
for it, and often the thread sleeps out its interval first (in TensorFlow
2.20 `CancellationManager::StartCancel` appears to wake it before marking the
cancellation done, so it may find nothing cancelled). Keras deletes its
iterator at the end of every `fit`, `evaluate` and `predict`, so `fit` could
return many seconds after its last step, on a task model as on a plain
one-layer Keras model.

Our pipelines do little per batch (a gather of rows, a cut of padding) ahead
of a train step that takes far longer, so there is nothing for autotuning to
find; their `tf.data.AUTOTUNE` settings then take TensorFlow's static
defaults. Pretraining's file-reading pipeline keeps autotuning: it has one
iterator for a whole run.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import keras
import numpy as np
import tensorflow as tf


def without_autotune(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's autotuning (and its model thread) off."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


# === In-memory arrays, batched as Keras batches them ===
#
# Keras offers no setting for the options of the pipeline it builds over
# arrays, so task models build that pipeline themselves (`array_batches`) and
# hand Keras a dataset. What Keras does with arrays is kept: the batch size
# (32, or enough rows for `steps` batches), a fresh permutation of all rows per
# epoch (or `shuffle="batch"`: rows shuffled within each batch), the last
# partial batch, `validation_split` (the last rows, before shuffling),
# `class_weight` (one weight per row from its label), floats in Keras' floatx,
# and data-sharding across workers.


def are_arrays(*structures: Any) -> bool:
    """True when every leaf of `structures` (x, y, sample_weight; Nones aside)
    is a NumPy array of numbers or booleans or a dense eager tf.Tensor: what
    `array_batches` takes. Anything else (text, generators, PyDatasets,
    DataFrames, ragged or sparse tensors) is left to Keras."""
    leaves = [leaf for leaf in tf.nest.flatten(structures) if leaf is not None]
    return bool(leaves) and all(
        (isinstance(leaf, np.ndarray) and leaf.dtype.kind in "biuf" and leaf.ndim >= 1)
        or (isinstance(leaf, tf.Tensor) and hasattr(leaf, "numpy") and leaf.shape.rank)
        for leaf in leaves
    )


def default_batch_size(x: Any, batch_size: int | None, steps: int | None) -> int:
    """Keras' batch size for arrays: the one given, else enough rows for
    `steps` batches, else 32."""
    if batch_size is not None and (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        # Keras would go on to trace a step with no rows, failing far from here.
        raise ValueError(f"`batch_size` must be a whole number of at least 1, got {batch_size!r}")
    if batch_size:
        return int(batch_size)
    return int(math.ceil(num_rows(x) / steps)) if steps else 32


def split_validation(x: Any, y: Any, sample_weight: Any, validation_split: float):
    """((x, y, sample_weight) for training, the same for validation): the last
    `validation_split` of the rows validate, taken before any shuffling (as Keras)."""
    rows = num_rows(x)
    split_at = int(math.floor(rows * (1.0 - validation_split)))
    if split_at == 0 or split_at == rows:
        raise ValueError(
            f"the training data has {rows} rows, which is not enough to split "
            f"with validation_split={validation_split}: the split leaves "
            f"{split_at} for training and {rows - split_at} for validation"
        )
    head = tf.nest.map_structure(
        lambda a: None if a is None else a[:split_at], (x, y, sample_weight)
    )
    tail = tf.nest.map_structure(
        lambda a: None if a is None else a[split_at:], (x, y, sample_weight)
    )
    return head, tail


def class_weights_per_row(
    y: Any, sample_weight: Any, class_weight: Mapping[int, float]
) -> np.ndarray:
    """Keras' `class_weight` for arrays as one sample weight per row: the weight
    of the row's label (an integer, a (n, 1) column rounded, or the argmax of a
    one-hot row), 1.0 for labels the mapping lacks."""
    if sample_weight is not None:
        raise ValueError("`class_weight` and `sample_weight` cannot both be given")
    if tf.nest.is_nested(y) or y is None:
        raise ValueError("`class_weight` needs a single array of labels `y` (one output)")
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = labels[..., 0] if labels.shape[-1] == 1 else np.argmax(labels, axis=-1)
    labels = np.round(labels).astype(np.int64)
    if labels.ndim != 1:
        raise ValueError(f"`class_weight` needs one label per row; y has shape {np.shape(y)}")
    return np.asarray(
        [class_weight.get(int(label), 1.0) for label in labels], dtype=keras.config.floatx()
    )


def array_batches(
    x: Any,
    y: Any = None,
    sample_weight: Any = None,
    *,
    batch_size: int,
    shuffle: bool | str = False,
) -> tf.data.Dataset:
    """(x[, y[, sample_weight]]) batches of `batch_size` rows of in-memory arrays,
    the last one partial, in order, or with `shuffle=True` in a fresh
    permutation of all rows each time the dataset is iterated (each epoch);
    without autotuning."""
    rows = num_rows(x)
    indices = tf.data.Dataset.range(rows)
    if shuffle and shuffle != "batch":
        indices = indices.shuffle(rows, reshuffle_each_iteration=True)
    indices = indices.batch(batch_size)
    if shuffle == "batch":
        indices = indices.map(tf.random.shuffle)
    return _gathered(indices, x, y, sample_weight, shuffled=bool(shuffle))


def _gathered(indices, x, y, sample_weight, shuffled):
    """Batches of row indices -> the rows of (x[, y[, sample_weight]]): one
    gather per batch, prefetched, autotuning off."""
    # Whole arrays once, beside the index batches: captured by the map instead,
    # they would be copied into its graph as constants.
    inputs = keras.tree.lists_to_tuples(
        keras.utils.pack_x_y_sample_weight(*tf.nest.map_structure(_floatx, (x, y, sample_weight)))
    )
    dataset = tf.data.Dataset.zip((indices, tf.data.Dataset.from_tensors(inputs).repeat()))
    dataset = dataset.map(
        lambda index, arrays: tf.nest.map_structure(lambda a: tf.gather(a, index), arrays),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    options = tf.data.Options()
    # As Keras' own array pipeline: each worker reads its share of every batch.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    if shuffled:  # the shuffles' random state need not be checkpointed or shipped
        options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return without_autotune(dataset.with_options(options).prefetch(tf.data.AUTOTUNE))


def _floatx(array):
    """Floats in Keras' floatx, as Keras casts the arrays it is given."""
    if array is None:
        return None
    dtype = tf.as_dtype(array.dtype)
    if dtype.is_floating and dtype.name != keras.config.floatx():
        return tf.cast(array, keras.config.floatx())
    return array


def num_rows(x):
    rows = {int(leaf.shape[0]) for leaf in tf.nest.flatten(x) if leaf is not None}
    if len(rows) != 1:
        raise ValueError(f"the arrays have different numbers of rows: {sorted(rows)}")
    return rows.pop()


# === Batches in an order that is a function of the seed and the epoch ===
#
# What makes a run resumable at the exact step (`keras_bert.callbacks.ExactResume`):
# a rerun rebuilds epoch e's batches from (seed, e) and starts at the batch the
# restored optimizer step reached, instead of depending on a shuffle buffer's
# random state. Each batch is one optimizer update.


def epoch_order(rows: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of `rows` that epoch `epoch` of a run with `seed` reads."""
    return np.random.default_rng([seed, epoch]).permutation(rows)


def bucket_boundaries(seq_length: int) -> list[int]:
    """Length buckets of 16 tokens (batches of similar lengths: less padding)."""
    return list(range(16, seq_length, 16))


def feature_sets(features: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The encoder features of one row layout: `features` itself (one text or
    pair per row), or each text column's ({"anchor": features, "positive":
    ...}: an embedding model's rows of 2-3 texts)."""
    return [features] if "input_mask" in features else list(features.values())


def row_lengths(features: Mapping[str, Any]) -> np.ndarray:
    """Each row's length in tokens: its longest text's (rows of several texts)."""
    return np.max(
        [np.asarray(part["input_mask"]).sum(axis=1) for part in feature_sets(features)], axis=0
    )


def epoch_batches(
    lengths: np.ndarray,
    batch_size: int,
    seed: int,
    epoch: int,
    *,
    bucket_width: int | None = None,
    drop_remainder: bool = False,
    steps: int | None = None,
) -> list[np.ndarray]:
    """Epoch `epoch`'s batches of row indices. With `bucket_width` (the
    features' width), rows go into buckets of 16 tokens as they come in the
    epoch's order; a bucket is a batch once full, and the partial buckets end
    the epoch (shortest first) unless `drop_remainder`. `steps`: the epoch's
    length when it is not one pass (smoke runs: the pass repeats)."""
    order = epoch_order(len(lengths), seed, epoch)
    if bucket_width is None:
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        if drop_remainder and batches and len(batches[-1]) < batch_size:
            batches.pop()
    else:
        buckets = np.searchsorted(bucket_boundaries(bucket_width), lengths[order], side="right")
        pending: dict[int, list[int]] = {}
        batches = []
        for row, bucket in zip(order.tolist(), buckets.tolist()):
            pending.setdefault(bucket, []).append(row)
            if len(pending[bucket]) == batch_size:
                batches.append(np.asarray(pending.pop(bucket)))
        if not drop_remainder:
            batches += [np.asarray(pending[bucket]) for bucket in sorted(pending)]
    if steps is not None and batches:
        batches = [batches[i % len(batches)] for i in range(steps)]
    return batches


def ordered_batches(
    x: Any, y: Any = None, sample_weight: Any = None, *, batches: list[np.ndarray]
) -> tf.data.Dataset:
    """(x[, y[, sample_weight]]) batches of in-memory arrays, the rows of each
    batch given (`epoch_batches`), without autotuning."""
    lengths = np.asarray([len(batch) for batch in batches], dtype=np.int64)
    flat = np.concatenate(batches).astype(np.int64) if batches else np.zeros([0], np.int64)
    indices = tf.data.Dataset.from_tensor_slices(tf.RaggedTensor.from_row_lengths(flat, lengths))
    return _gathered(indices, x, y, sample_weight, shuffled=False)
