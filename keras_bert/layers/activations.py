"""BERT's activations by `BertConfig.hidden_act` name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import keras

from keras_bert.kernels.gelu import gelu_exact

if TYPE_CHECKING:
    import tensorflow as tf


def gelu(x: tf.Tensor) -> tf.Tensor:
    """The exact (erf) GELU, x * Phi(x): Keras' own (the plain path)."""
    return keras.activations.gelu(x, approximate=False)


def get_activation(name: str, fast_kernels: bool = True) -> Callable[[tf.Tensor], tf.Tensor]:
    """Maps BertConfig.hidden_act to a function; "gelu" is the exact (erf) GELU,
    with its derivative written out under the fast kernels (the same values)."""
    if name == "gelu":
        return gelu_exact if fast_kernels else gelu
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    return keras.activations.get(name)


class ActivationOption:
    """Mixin for a layer with an activation by name (`activation`) and a fast
    path (`runs_fast_kernels`): `activation_fn`, the function it names."""

    activation: str
    runs_fast_kernels: bool

    @property
    def activation_fn(self) -> Callable[[tf.Tensor], tf.Tensor]:
        return get_activation(self.activation, self.runs_fast_kernels)
