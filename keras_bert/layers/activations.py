"""BERT's activations by `BertConfig.hidden_act` name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import keras

from keras_bert.kernels.gelu import gelu_exact
from keras_bert.kernels.switch import fast_kernels_enabled

if TYPE_CHECKING:
    import tensorflow as tf


def gelu(x: tf.Tensor) -> tf.Tensor:
    """The exact (erf) GELU, x * Phi(x): with its derivative written out under
    the fast kernels, Keras' own otherwise (the same values)."""
    if fast_kernels_enabled():
        return gelu_exact(x)
    return keras.activations.gelu(x, approximate=False)


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """Maps BertConfig.hidden_act to a function; "gelu" is the exact (erf) GELU."""
    if name == "gelu":
        return gelu
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    return keras.activations.get(name)
