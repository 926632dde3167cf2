"""LoRA (Hu et al., 2021): low-rank adapters on the encoder's projections, the rest frozen.

Each adapted projection computes x (W + (alpha / r) A B) with W (I, O) the
pretrained kernel, frozen, and A (I, r), B (r, O) trained: Keras' own
`Dense.enable_lora`, whose B starts at zero (so the model starts equal to the
base) and A from He-uniform, as peft and keras-hub do. `alpha` defaults to the
rank (a scale of 1, Keras' and keras-hub's default; peft's default is alpha
8 at rank 8, the same scale).

Adapted: every block's query, key, value and attention output, and both
feed-forward projections. Frozen: the rest of the encoder (embeddings,
LayerNorms, biases, the pooler). Trained: the adapters and everything outside
the encoder, the task head (peft's `modules_to_save`).

The adapter file (`save_adapters`) holds the adapters and the head, a few MB
for MiniLM instead of 90; `load_adapters` puts it onto the same task model
built from the same base checkpoint. `merged_copy` folds A B into W for export:
a plain model of the same class, no adapters, the same outputs.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np

from keras_bert import safe_output
from keras_bert.preprocessing.preprocessor import config_sharing_preprocessor

ADAPTER_NAMES = ("lora_kernel_a", "lora_kernel_b")
_METADATA_KEY = "__lora__"
_FINGERPRINT_KEY = "__base_fingerprint__"
# The first values of each frozen weight: a different base checkpoint with the
# same shapes differs far beyond the tolerance; a float16 copy of the same one does not.
_FINGERPRINT_VALUES = 2
_FINGERPRINT_TOLERANCE = 1e-2


def lora_projections(encoder: keras.Model) -> list[keras.layers.Dense]:
    """The adapted Dense layers, block by block: query, key, value, attention
    output, intermediate, feed-forward output."""
    layers = []
    for block in encoder.transformer_blocks:
        attention = block.attention
        layers += [
            attention.query,
            attention.key,
            attention.value,
            attention.attention_output,
            block.intermediate,
            block.ffn_output,
        ]
    return layers


def encoder_of(model: keras.Model) -> keras.Model:
    """A task model's encoder, or the encoder itself."""
    return getattr(model, "encoder", model)


def lora_rank(model: keras.Model) -> int | None:
    """The adapters' rank, None without LoRA."""
    first = lora_projections(encoder_of(model))[0]
    return first.lora_rank if first.lora_enabled else None


def enable_lora(model: keras.Model, rank: int, alpha: float | None = None) -> None:
    """Adds rank-`rank` adapters to the encoder of `model` (or to `model`, an
    encoder) and freezes the encoder's other weights."""
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ValueError(f"LoRA rank must be a positive integer, got {rank!r}")
    if alpha is not None and not alpha > 0:
        raise ValueError(f"LoRA alpha must be > 0, got {alpha!r}")
    if lora_rank(model) is not None:
        raise ValueError(
            f"LoRA is already enabled (rank {lora_rank(model)}); build a new model "
            "to change the rank"
        )
    encoder = encoder_of(model)
    for layer in lora_projections(encoder):
        layer.enable_lora(rank, lora_alpha=alpha)
    adapters = {id(v) for v in _adapter_variables(encoder).values()}
    for variable in encoder.weights:
        variable.trainable = id(variable) in adapters


def _adapter_variables(encoder):
    return {
        f"{layer.path}/{name}": getattr(layer, name)
        for layer in lora_projections(encoder)
        if layer.lora_enabled
        for name in ADAPTER_NAMES
    }


def _head_variables(model):
    """The task model's variables outside the encoder, by path."""
    in_encoder = {id(v) for v in model.encoder.weights}
    return {v.path: v for v in model.weights if id(v) not in in_encoder}


def trained_variables(model: keras.Model) -> dict[str, keras.Variable]:
    """What a LoRA model trains and its adapter file holds: adapters and head, by path."""
    _require_lora(model)
    return {**_adapter_variables(model.encoder), **_head_variables(model)}


def base_fingerprint(encoder: keras.Model) -> list[float]:
    """The first values of every frozen encoder weight: tells base checkpoints
    apart (a sum over all weights did not always: two random initialisations
    of a small encoder summed alike within a part per thousand)."""
    adapters = {id(v) for v in _adapter_variables(encoder).values()}
    return [
        float(x)
        for v in encoder.weights
        if id(v) not in adapters
        for x in keras.ops.convert_to_numpy(v).astype(np.float64).ravel()[:_FINGERPRINT_VALUES]
    ]


def save_adapters(model: keras.Model, path: str | os.PathLike) -> str:
    """Writes the adapters and the head (an `.npz`); returns the path."""
    path = os.fspath(path)
    if not path.endswith(".npz"):
        raise ValueError(f"the LoRA weights file must end in .npz, got {path}")
    first = lora_projections(model.encoder)[0]
    metadata = {"model": type(model).__name__, "rank": lora_rank(model), "alpha": first.lora_alpha}
    arrays = {name: keras.ops.convert_to_numpy(v) for name, v in trained_variables(model).items()}
    with safe_output.replacing(path, keep_extension=True) as partial:  # NumPy adds .npz
        np.savez(
            partial,
            **arrays,
            **{
                _METADATA_KEY: np.array(json.dumps(metadata)),
                _FINGERPRINT_KEY: np.asarray(base_fingerprint(model.encoder)),
            },
        )
    return path


def load_adapters(model: keras.Model, path: str | os.PathLike) -> None:
    """Reads `save_adapters`' file into `model` (enabling LoRA at the file's
    rank if it is not yet enabled). Fails, naming the mismatch, on another
    task model, rank, alpha, base checkpoint or shape."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no LoRA weights file at {path}")
    with np.load(path, allow_pickle=False) as stored:
        if _METADATA_KEY not in stored:
            raise ValueError(
                f"{path}: not a LoRA weights file (no {_METADATA_KEY} entry); "
                "write one with save_lora_weights"
            )
        metadata = json.loads(str(stored[_METADATA_KEY]))
        saved = stored[_FINGERPRINT_KEY] if _FINGERPRINT_KEY in stored.files else np.zeros(0)
        arrays = {
            name: stored[name]
            for name in stored.files
            if name not in (_METADATA_KEY, _FINGERPRINT_KEY)
        }
    if metadata["model"] != type(model).__name__:
        raise ValueError(
            f"{path}: adapters of a {metadata['model']}, not of a {type(model).__name__}"
        )
    if lora_rank(model) is None:
        enable_lora(model, metadata["rank"], metadata["alpha"])
    first = lora_projections(model.encoder)[0]
    if (first.lora_rank, first.lora_alpha) != (metadata["rank"], metadata["alpha"]):
        raise ValueError(
            f"{path}: rank {metadata['rank']} alpha {metadata['alpha']}, but the "
            f"model's adapters have rank {first.lora_rank} alpha {first.lora_alpha}"
        )
    variables = trained_variables(model)
    missing, unexpected = sorted(set(variables) - set(arrays)), sorted(set(arrays) - set(variables))
    if missing or unexpected:
        raise ValueError(
            f"{path}: weights missing from the file {missing[:5]}, in the file "
            f"but not in the model {unexpected[:5]}"
        )
    for name, variable in variables.items():
        if tuple(arrays[name].shape) != tuple(variable.shape):
            raise ValueError(
                f"{path}: {name} has shape {arrays[name].shape} in the file, "
                f"{tuple(variable.shape)} in the model"
            )
    fingerprint = np.asarray(base_fingerprint(model.encoder))
    if saved.shape != fingerprint.shape or not np.allclose(
        fingerprint, saved, rtol=_FINGERPRINT_TOLERANCE, atol=_FINGERPRINT_TOLERANCE
    ):
        differ = (
            int(
                np.sum(
                    ~np.isclose(
                        fingerprint, saved, rtol=_FINGERPRINT_TOLERANCE, atol=_FINGERPRINT_TOLERANCE
                    )
                )
            )
            if saved.shape == fingerprint.shape
            else len(fingerprint)
        )
        raise ValueError(
            f"{path}: the adapters were trained on another base encoder "
            f"({differ} of {len(fingerprint)} sampled base weights differ): "
            "build the model from the same checkpoint"
        )
    for name, variable in variables.items():
        variable.assign(arrays[name])


def merged_copy(model: keras.Model) -> keras.Model:
    """A plain model of `model`'s class and config whose kernels are W + (alpha / r) A B."""
    _require_lora(model)
    merged = {}
    for layer in lora_projections(encoder_of(model)):
        # `_kernel`: the stored kernel (Keras' `kernel` property adds the adapters).
        kernel, a, b = (
            keras.ops.convert_to_numpy(v)
            for v in (layer._kernel, layer.lora_kernel_a, layer.lora_kernel_b)
        )
        # In float32 (the adapters' dtype), then stored in the kernel's dtype.
        merged[f"{layer.path}/kernel"] = kernel.astype(np.float32) + (
            layer.lora_alpha / layer.lora_rank
        ) * (a @ b)
    source = {v.path: v for v in model.weights}
    if len(source) != len(model.weights):
        raise ValueError(f"{type(model).__name__}: variable paths are not unique, cannot merge")
    copy = type(model).from_config(config_sharing_preprocessor(model))
    for variable in copy.weights:
        value = merged[variable.path] if variable.path in merged else source[variable.path]
        variable.assign(keras.ops.cast(value, variable.dtype))
    return copy


def _require_lora(model):
    if lora_rank(model) is None:
        raise ValueError(
            f"this {type(model).__name__} has no LoRA adapters: call enable_lora(rank) first"
        )
