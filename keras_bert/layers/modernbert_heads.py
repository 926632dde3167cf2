"""ModernBERT's heads: the prediction head (dense -> activation -> LayerNorm)
that both its classifier and its masked-LM read, and the pooling before the
classifier's ([CLS] or the mean of the real tokens).

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
V = vocabulary size.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.kernels.dense import FastDense
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.kernels.switch import FastKernelsOption
from keras_bert.layers.activations import get_activation


def pool_tokens(hidden: tf.Tensor, input_mask: tf.Tensor, pooling: str) -> tf.Tensor:
    """(B, T, H), (B, T) -> (B, H): [CLS] (`"cls"`), or the mean of the real
    positions (`"mean"`: in a local layer [CLS] sees only its window, so on
    long inputs the mean can read more of the text)."""
    if pooling == "cls":
        return hidden[:, 0, :]
    mask = ops.cast(input_mask, hidden.dtype)[:, :, None]  # (B, T, 1)
    return ops.sum(hidden * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)


@keras.saving.register_keras_serializable(package="keras_bert")
class PredictionHead(FastKernelsOption, keras.layers.Layer):
    """(..., H) -> (..., H): dense, activation, LayerNorm (HuggingFace's
    `ModernBertPredictionHead`)."""

    def __init__(
        self,
        activation: str = "gelu",
        use_bias: bool = False,
        norm_bias: bool = False,
        norm_epsilon: float = 1e-5,
        initializer_range: float = 0.02,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._init_fast_kernels(fast_kernels)
        self.activation = activation
        self.use_bias = use_bias
        self.norm_bias = norm_bias
        self.norm_epsilon = norm_epsilon
        self.initializer_range = initializer_range
        self.activation_fn = get_activation(activation, self.runs_fast_kernels)
        self.layer_norm = FastLayerNorm(
            epsilon=norm_epsilon,
            center=norm_bias,
            dtype=self.dtype_policy,
            name="layer_norm",
            fast_kernels=fast_kernels,
        )

    def build(self, hidden_shape: tuple) -> None:
        self.dense = FastDense(
            hidden_shape[-1],
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            dtype=self.dtype_policy,
            name="dense",
            fast_kernels=self.fast_kernels,
        )
        self.dense.build(hidden_shape)
        self.layer_norm.build(hidden_shape)

    def call(self, hidden: tf.Tensor) -> tf.Tensor:
        return self.layer_norm(self.activation_fn(self.dense(hidden)))

    def compute_output_shape(self, hidden_shape: tuple) -> tuple:
        return hidden_shape

    def get_config(self) -> dict:
        return self._fast_kernels_config(
            {
                **super().get_config(),
                "activation": self.activation,
                "use_bias": self.use_bias,
                "norm_bias": self.norm_bias,
                "norm_epsilon": self.norm_epsilon,
                "initializer_range": self.initializer_range,
            }
        )
