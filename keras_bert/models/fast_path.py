"""A model's copy on the plain ops: `fast_kernels=False` in every layer.

The fast kernels are a model option (`keras_bert.kernels.switch`), fixed when
a layer is built. A converter that only knows the standard ops (LiteRT) and a
test that compares both paths need the same model on the other path: its
config with the option flipped everywhere, and its weights.
"""

from __future__ import annotations

from typing import Any

import keras

from keras_bert.preprocessing.preprocessor import config_sharing_preprocessor


def _with_option(config: Any, fast_kernels: bool) -> Any:
    """Every `fast_kernels` entry of a nested config set to `fast_kernels`."""
    if isinstance(config, dict):
        return {
            key: fast_kernels if key == "fast_kernels" else _with_option(value, fast_kernels)
            for key, value in config.items()
        }
    if isinstance(config, list):
        return [_with_option(value, fast_kernels) for value in config]
    return config


def with_fast_kernels(model: keras.Model, fast_kernels: bool) -> keras.Model:
    """A copy of `model` (an encoder or a task model) with `fast_kernels` set
    in every layer, and the same weights (its preprocessor shared)."""
    copy = type(model).from_config(_with_option(config_sharing_preprocessor(model), fast_kernels))
    copy.set_weights(model.get_weights())
    return copy
