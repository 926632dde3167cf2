"""The one switch between the fast kernels and the plain TensorFlow / Keras ops.

A model option, not process state: `BertEncoder(config, fast_kernels=False)`
(saved in its config, so a `.keras` file reloads as it was built) hands it to
every layer it builds, and each layer keeps its own `fast_kernels` argument
(in its config too). Two models in one process can differ. On by default:
every fast kernel gives the plain ops' values (tests/kernels/test_fast_*.py
prove it, values and gradients) in less time. Off, the layers run the plain
path a reader would write from the paper: Keras' Dense, LayerNormalization
and Dropout, Keras' exact GELU, separate query / key / value products,
TensorFlow's softmax cross-entropy over the logits. `docs/fast_path.md` lists
every speed mechanism and how to turn each off.

For debugging, `KERAS_BERT_FAST_KERNELS=0` (or `1`) in the environment
overrides every layer's option for layers built while it is set, saved models
included, without changing what their configs say.
"""

from __future__ import annotations

import os
from typing import Any

from keras_bert.config_fields import keep_config_fields

FAST_KERNELS_ENV = "KERAS_BERT_FAST_KERNELS"
_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


def fast_kernels_in_effect(option: bool) -> bool:
    """A layer's `fast_kernels` option, unless the environment overrides it."""
    override = os.environ.get(FAST_KERNELS_ENV, "").strip().lower()
    if not override:
        return bool(option)
    if override in _ON:
        return True
    if override in _OFF:
        return False
    raise ValueError(
        f"{FAST_KERNELS_ENV}={os.environ[FAST_KERNELS_ENV]!r}: use 1 (fast "
        "kernels) or 0 (the plain ops)"
    )


class FastKernelsOption:
    """Mixin for the layers with a fast path: `fast_kernels` (constructor
    argument, in the config) and `runs_fast_kernels` (what the layer runs)."""

    def _init_fast_kernels(self, fast_kernels: bool) -> None:
        if not isinstance(fast_kernels, bool):
            raise ValueError(f"fast_kernels must be True or False, got {fast_kernels!r}")
        self.fast_kernels = fast_kernels
        self.runs_fast_kernels = fast_kernels_in_effect(fast_kernels)

    def _fast_kernels_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return {**config, "fast_kernels": self.fast_kernels}


class FastKernelsLayer(FastKernelsOption):
    """Mixin for keras_bert's own layers with a fast path: the constructor
    arguments named in `config_fields` kept as attributes of the same name,
    and the config Keras' own, then those, then `fast_kernels`.

        class GatedFeedForward(FastKernelsLayer, keras.layers.Layer):
            config_fields = ("intermediate_size", "activation", ...)

            def __init__(self, intermediate_size, activation="gelu", ..., **kwargs):
                super().__init__(locals())
    """

    config_fields: tuple[str, ...] = ()

    def __init__(self, arguments: dict[str, Any]) -> None:
        """`arguments`: the constructor's `locals()`; its `kwargs` go to the Keras layer."""
        super().__init__(**arguments["kwargs"])
        keep_config_fields(self, arguments)
        self._init_fast_kernels(arguments["fast_kernels"])

    def get_config(self) -> dict:
        # super() is the Keras layer this mixin comes before.
        config = super().get_config()  # type: ignore[misc]
        config.update({field: getattr(self, field) for field in self.config_fields})
        return self._fast_kernels_config(config)


class FastKerasLayer(FastKernelsOption):
    """Mixin for a Keras layer given a fast path (`FastDense`, `FastDropout`,
    `FastLayerNorm`): Keras' constructor arguments and config, and `fast_kernels`."""

    def __init__(self, *args: Any, fast_kernels: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_fast_kernels(fast_kernels)

    def get_config(self) -> dict:
        # super() is the Keras layer this mixin comes before.
        return self._fast_kernels_config(super().get_config())  # type: ignore[misc]
