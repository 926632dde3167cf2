"""Cutting a batch's padding off before the encoder runs on it.

Rows are padded to one width (`seq_length`) so that they batch. The positions
past the batch's longest real row are masked out of attention and carry no
label, so outputs and losses on real tokens do not depend on them: only the
work does. Fine-tuning on CPU is bound by the matrix products, which scale
with the width: at natural lengths (reviews and tweets average under 30
pieces, padded to 64) the cut saves a third to half of every step.

`TextTask.train_step` / `test_step` cut in the graph (Keras `fit` on arrays
hands every batch at the full width). XLA and TPUs need static shapes: the
width is left alone there.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from keras_bert.text.tokenizer import padded_width

# Widths are rounded up to a multiple of this: few distinct shapes for a
# pipeline's retracing, at most 7 padded positions kept.
LENGTH_MULTIPLE = 8


def longest_width(input_mask: tf.Tensor, width: int, multiple: int = LENGTH_MULTIPLE) -> tf.Tensor:
    """The width (B, width) rows need: the longest real row of `input_mask`
    rounded up to `multiple`, at most `width`; an int32 scalar."""
    return padded_width(tf.reduce_sum(tf.cast(input_mask, tf.int32), axis=1), width, multiple)


def trim_padding(elements: Any, width: int, length: tf.Tensor) -> Any:
    """Every rank-2 tensor of `elements` (a nest) whose static second dimension
    is `width` cut to its first `length` columns; everything else unchanged."""

    def trim(t):
        if isinstance(t, tf.Tensor) and t.shape.rank == 2 and t.shape[1] == width:
            return t[:, :length]
        return t

    return tf.nest.map_structure(trim, elements)


def trim_features_batch(
    x: Any, y: Any = None, sample_weight: Any = None, *, token_level_targets: bool = False
) -> tuple[Any, Any, Any]:
    """(x, y, sample_weight) of one batch of encoder features with the padding
    past the longest row cut: x always, y and the weights when they are per
    token (`token_level_targets`, a tagger's). Unchanged when x is not a
    features dict of a static width (already variable, or not ids at all).
    Rows of several texts (an embedding model's {"anchor": features,
    "positive": ...}) have each column cut to its own longest row."""
    if (
        isinstance(x, dict)
        and x
        and all(isinstance(part, dict) and "input_mask" in part for part in x.values())
    ):
        return {name: trim_features_batch(part)[0] for name, part in x.items()}, y, sample_weight
    mask = x.get("input_mask") if isinstance(x, dict) else None
    if not isinstance(mask, tf.Tensor) or mask.shape.rank != 2 or mask.shape[1] is None:
        return x, y, sample_weight
    width = mask.shape[1]
    length = longest_width(mask, width)
    x = trim_padding(x, width, length)
    if token_level_targets:
        y, sample_weight = trim_padding((y, sample_weight), width, length)
    return x, y, sample_weight
