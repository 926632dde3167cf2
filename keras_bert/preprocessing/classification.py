"""Classifier logits -> answers: probabilities and label names, or a score.

One implementation for `BertClassifier.predict` on text and the exported
classifier's signatures, so the two give the same answers.

Legend for shape comments: B = batch, C = classes.
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
