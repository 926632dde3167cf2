"""Next-token targets for a left-to-right language model, from masked-LM records.

The paper's "LTR & No NSP" ablation trains a left-to-right encoder to predict
the next token at every position. The same records serve: the masked tokens
are put back (their originals are the `masked_lm_ids`), and the masked-LM
features are rewritten so the masked-LM head and loss predict token t + 1 from
position t. So one set of records feeds every row of the ablation.

Legend for shape comments: B = batch, T = sequence length, P = masked positions.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf


def restore_masked_tokens(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """input_ids (B, T) with the masked positions' original ids put back."""
    input_ids = features["input_ids"]  # (B, T)
    positions = tf.cast(features["masked_lm_positions"], tf.int32)  # (B, P)
    real = tf.where(features["masked_lm_weights"] > 0)  # (R, 2): (row, slot) of real predictions
    rows = tf.cast(real[:, 0], tf.int32)
    cells = tf.stack([rows, tf.gather_nd(positions, real)], axis=1)  # (R, 2): (row, position)
    originals = tf.gather_nd(tf.cast(features["masked_lm_ids"], input_ids.dtype), real)
    return tf.tensor_scatter_nd_update(input_ids, cells, originals)


def next_token_targets(features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """A batch of (static or dynamically) masked records -> the same batch,
    unmasked, with `masked_lm_positions` 0 .. T - 2, `masked_lm_ids` the token
    after each (B, T - 1) and `masked_lm_weights` 1 where that next token is
    real (not padding)."""
    input_ids = restore_masked_tokens(features)  # (B, T)
    batch, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
    out = dict(features)
    out["input_ids"] = input_ids
    out["masked_lm_positions"] = tf.tile(tf.range(length - 1)[None], [batch, 1])  # (B, T - 1)
    out["masked_lm_ids"] = tf.cast(input_ids[:, 1:], tf.int32)  # (B, T - 1)
    out["masked_lm_weights"] = tf.cast(features["input_mask"][:, 1:], tf.float32)
    return out
