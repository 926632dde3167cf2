"""Classifier logits -> answers: probabilities and label names, or a score.

One implementation for `BertClassifier.predict` on text and the exported
classifier's signatures, so the two give the same answers.

A multi-label classifier's labels are independent: a sigmoid per label, and
every label whose probability is above a threshold is an answer.

Legend for shape comments: B = batch, C = classes, M = most labels of a row.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def classify_logits(logits: tf.Tensor, label_names: Sequence[str] | None) -> dict[str, tf.Tensor]:
    """(B, C) logits -> {logits, probabilities (B, C), label (B,) names};
    a regressor's (`label_names` None, C = 1) -> {score (B,)}."""
    logits = tf.cast(logits, tf.float32)
    if label_names is None:
        return {"score": logits[:, 0]}  # (B,)
    names = tf.constant([str(name) for name in label_names])
    return {
        "logits": logits,
        "probabilities": tf.nn.softmax(logits, axis=-1),
        "label": tf.gather(names, tf.argmax(logits, axis=-1)),
    }


def multi_label_logits(
    logits: tf.Tensor, label_names: Sequence[str], threshold: float = 0.5
) -> dict[str, tf.Tensor]:
    """A multi-label classifier's (B, C) logits -> {logits, probabilities (B, C)
    (a sigmoid per label), labels (B, M)}: per row the names whose probability
    is above `threshold`, most probable first, padded with "" to the batch's
    longest row (M = 0 when no row has one). Strictly above, as Keras'
    BinaryAccuracy and F1Score threshold."""
    logits = tf.cast(logits, tf.float32)
    names = tf.constant([str(name) for name in label_names])
    probabilities = tf.sigmoid(logits)  # (B, C)
    order = tf.argsort(probabilities, axis=-1, direction="DESCENDING", stable=True)  # (B, C)
    above = tf.gather(probabilities, order, batch_dims=1) > threshold  # (B, C), True first
    count = tf.reduce_sum(tf.cast(above, tf.int32), axis=-1)  # (B,)
    width = tf.reduce_max(tf.concat([count, [0]], 0))  # an empty batch has none
    labels = tf.where(above, tf.gather(names, order), "")[:, :width]  # (B, M)
    return {"logits": logits, "probabilities": probabilities, "labels": labels}


def class_names(num_classes: int, label_names: Sequence[str] | None) -> list[str] | None:
    """The names the answers use: the model's own, else "0", "1", ...; None
    for a regressor (one output)."""
    if num_classes == 1:
        return None
    if label_names is None:
        return [str(i) for i in range(num_classes)]
    if len(label_names) != num_classes:
        raise ValueError(
            f"{len(label_names)} label_names for a classifier of {num_classes} classes"
        )
    return [str(name) for name in label_names]
