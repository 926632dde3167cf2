"""Sentence-transformers' pooling modes and its Normalize module, as Keras layers.

A sentence-transformers model is a pipeline of modules: the Transformer
(BERT's token outputs), a Pooling module (one or more modes, concatenated),
optional Dense modules and an optional Normalize. These layers compute what
`sentence_transformers.models.Pooling` and `Normalize` compute, with the
same conventions (padding filled with -1e9 before max pooling, weighted
mean weights 1..T by position, the last real token for `lasttoken`).
They are keras_bert's one pooling of sentence embeddings: mean pooling and
normalisation here is also `BertFeatureExtractor`'s `sentence_embedding`,
`keras-bert encode` and a bare encoder's export.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
M = number of pooling modes.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import tensorflow as tf
from keras import ops

from keras_bert.layers.pooling import last_real_positions

# In the order sentence-transformers before 6 concatenated them (`Pooling.forward`).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# sentence-transformers' 1_Pooling/config.json keys for each mode.
POOLING_CONFIG_KEYS = {
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean": "pooling_mode_mean_tokens",
    "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}
# What sentence-transformers fills padded positions with before max pooling,
# and the least token count it divides by.
_MAX_PADDING = -1e9
_MIN_COUNT = 1e-9


def pool_tokens(tokens: tf.Tensor, input_mask: tf.Tensor, mode: str) -> tf.Tensor:
    """(B, T, H) token outputs, (B, T) mask -> (B, H), pooled by `mode`."""
    # expand_dims, not [..., None]: on a dynamic length the slice that adds an
    # axis has no LiteRT kernel (a LiteRT file padded to the longest text).
    mask = ops.expand_dims(ops.cast(ops.not_equal(input_mask, 0), tokens.dtype), -1)  # (B, T, 1)
    if mode == "cls":
        return tokens[:, 0, :]
    if mode == "max":
        return ops.max(ops.where(mask > 0, tokens, ops.cast(_MAX_PADDING, tokens.dtype)), axis=1)
    if mode in ("mean", "mean_sqrt_len_tokens", "weightedmean"):
        if mode == "weightedmean":  # position t (from 0) weighs t + 1
            positions = ops.arange(1, ops.shape(tokens)[1] + 1, dtype=tokens.dtype)
            mask = mask * ops.reshape(positions, (1, -1, 1))
        total = ops.sum(tokens * mask, axis=1)  # (B, H)
        count = ops.maximum(ops.sum(mask, axis=1), _MIN_COUNT)  # (B, 1)
        return total / (ops.sqrt(count) if mode == "mean_sqrt_len_tokens" else count)
    if mode == "lasttoken":
        last = ops.cast(last_real_positions(input_mask), tokens.dtype)  # (B, T)
        # A row without real tokens reads the last position, as sentence-transformers.
        empty = ops.cast(ops.sum(last, axis=1, keepdims=True) == 0, tokens.dtype)  # (B, 1)
        final = ops.cast(
            ops.arange(ops.shape(tokens)[1]) == ops.shape(tokens)[1] - 1, tokens.dtype
        )  # (T,)
        return ops.einsum("bt,bth->bh", last + empty * final[None, :], tokens)
    raise ValueError(f"pooling mode {mode!r}: choose among {POOLING_MODES}")


def check_modes(modes: Sequence[str]) -> tuple[str, ...]:
    """`modes` (a name or several, each once) as a tuple, in the order given:
    sentence-transformers 6 concatenates a `pooling_mode` list in its order
    (older configs, one flag per mode, read in `POOLING_MODES` order)."""
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    unknown = [mode for mode in modes if mode not in POOLING_MODES]
    if unknown or not modes or len(set(modes)) != len(modes):
        raise ValueError(
            f"pooling modes {list(modes)}: choose one or more of {POOLING_MODES}, each once"
        )
    return modes


@keras.saving.register_keras_serializable(package="keras_bert")
class SentencePooling(keras.layers.Layer):
    """(B, T, H), (B, T) -> (B, M*H): each of `modes` (see `POOLING_MODES`),
    concatenated in their order."""

    def __init__(self, modes: Sequence[str] = ("mean",), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.modes = check_modes(modes)

    def call(self, sequence_output: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
        pooled = [pool_tokens(sequence_output, input_mask, mode) for mode in self.modes]
        return pooled[0] if len(pooled) == 1 else ops.concatenate(pooled, axis=-1)

    def compute_output_shape(self, sequence_output_shape: tuple, input_mask_shape: tuple) -> tuple:
        return (sequence_output_shape[0], sequence_output_shape[-1] * len(self.modes))

    def get_config(self) -> dict:
        return {**super().get_config(), "modes": list(self.modes)}


def l2_normalize(x: tf.Tensor, epsilon: float = 1e-12) -> tf.Tensor:
    """x / max(||x||, epsilon) along the last axis: torch's F.normalize,
    which sentence-transformers' Normalize calls."""
    norm = ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True))
    return x / ops.maximum(norm, ops.cast(epsilon, x.dtype))


@keras.saving.register_keras_serializable(package="keras_bert")
class L2Normalize(keras.layers.Layer):
    """(B, D) -> (B, D) of unit length: sentence-transformers' Normalize module."""

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        return l2_normalize(inputs)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return tuple(input_shape)


@keras.saving.register_keras_serializable(package="keras_bert")
class MeanPool(keras.layers.Layer):
    """(B, T, H), (B, T) -> (B, H): mean pooling then L2 normalisation in one
    layer, `SentencePooling("mean")` and `L2Normalize`'s arithmetic. Kept
    registered so that files saved with it (`keras_bert>MeanPool`) load."""

    def call(self, sequence_output: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
        return l2_normalize(pool_tokens(sequence_output, input_mask, "mean"))

    def compute_output_shape(self, sequence_output_shape: tuple, input_mask_shape: tuple) -> tuple:
        return (sequence_output_shape[0], sequence_output_shape[-1])
