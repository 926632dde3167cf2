"""Import of pretrained BERT weights: original TF1 checkpoints and HuggingFace folders.

Both formats are first read into one canonical form, a dict from the original
google-research/bert variable names (`bert/encoder/layer_0/attention/self/query/kernel`)
to NumPy arrays in the original layouts, then assigned to a `BertEncoder` by
one function that checks every name and shape before it changes anything.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Mapping

import numpy as np
import tensorflow as tf

from keras_bert.config import BertConfig
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer

if TYPE_CHECKING:
    import keras

# Pretraining-head tensors (`cls/...`) that the pretrainer can load.
HEAD_TENSORS = (
    "cls/predictions/transform/dense/kernel",
    "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias",
    "cls/seq_relationship/output_weights",
    "cls/seq_relationship/output_bias",
)


def encoder_variables(encoder: BertEncoder) -> dict[str, keras.Variable]:
    """Canonical (original TF1) name -> the encoder's Keras variable."""
    names = {
        "bert/embeddings/word_embeddings": encoder.token_embedding.embeddings,
        "bert/embeddings/token_type_embeddings": encoder.segment_embedding.embeddings,
        "bert/embeddings/position_embeddings": encoder.position_embedding.embeddings,
        "bert/embeddings/LayerNorm/gamma": encoder.embeddings_layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": encoder.embeddings_layer_norm.beta,
        "bert/pooler/dense/kernel": encoder.pooler.kernel,
        "bert/pooler/dense/bias": encoder.pooler.bias,
    }
    for i, block in enumerate(encoder.transformer_blocks):
        prefix = f"bert/encoder/layer_{i}"
        attention = block.attention
        dense_layers = {
            "attention/self/query": attention.query,
            "attention/self/key": attention.key,
            "attention/self/value": attention.value,
            "attention/output/dense": attention.attention_output,
            "intermediate/dense": block.intermediate,
            "output/dense": block.ffn_output,
        }
        for scope, dense in dense_layers.items():
            names[f"{prefix}/{scope}/kernel"] = dense.kernel
            names[f"{prefix}/{scope}/bias"] = dense.bias
        for scope, norm in (("attention/output/LayerNorm", block.attention_layer_norm),
                            ("output/LayerNorm", block.output_layer_norm)):
            names[f"{prefix}/{scope}/gamma"] = norm.gamma
            names[f"{prefix}/{scope}/beta"] = norm.beta
    return names


def assign_encoder_weights(encoder: BertEncoder, tensors: Mapping[str, np.ndarray],
                           source: str) -> dict[str, np.ndarray]:
    """Assigns canonical tensors to the encoder; all-or-nothing.

    Every encoder variable must be present with its exact shape, and no tensor
    outside the encoder and the known heads may be left over.
    """
    variables = encoder_variables(encoder)
    missing = sorted(set(variables) - set(tensors))
    if missing:
        raise ValueError(f"{source}: missing tensor(s) for the encoder: {missing[:5]}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    unexpected = sorted(set(tensors) - set(variables) - set(HEAD_TENSORS))
    if unexpected:
        raise ValueError(f"{source}: unexpected tensor(s) not part of BERT: {unexpected[:5]}"
                         + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else ""))
    for name, variable in variables.items():
        if tuple(tensors[name].shape) != tuple(variable.shape):
            raise ValueError(f"{source}: tensor {name} has shape {tuple(tensors[name].shape)} "
                             f"but the model expects {tuple(variable.shape)}")
    for name, variable in variables.items():
        variable.assign(tensors[name].astype(variable.dtype))
    return {name: tensors[name] for name in HEAD_TENSORS if name in tensors}


# === Original TF1 checkpoints (google-research/bert) ===

# Optimizer state and bookkeeping in original checkpoints, not model weights.
_TF1_IGNORED = re.compile(r"(adam_[mv]|global_step|Momentum|_slot_|good_steps|loss_scale)")


def read_tf1_checkpoint(checkpoint_prefix: str) -> dict[str, np.ndarray]:
    """Canonical tensors from a google-research/bert checkpoint prefix."""
    try:
        reader = tf.train.load_checkpoint(checkpoint_prefix)
    except (tf.errors.NotFoundError, ValueError) as e:
        raise FileNotFoundError(f"cannot read TF1 checkpoint {checkpoint_prefix}: {e}") from None
    tensors = {}
    for name in reader.get_variable_to_shape_map():
        if _TF1_IGNORED.search(name):
            continue
        tensors[name] = reader.get_tensor(name)
    return tensors


def load_tf1(checkpoint_prefix: str, bert_config_json: str, return_head_weights: bool = False,
             dtype: str | keras.DTypePolicy | None = None
             ) -> BertEncoder | tuple[BertEncoder, dict[str, np.ndarray]]:
    """BertEncoder with the weights of an original TF1 BERT checkpoint.

    With `return_head_weights`, also returns the `cls/...` pretraining-head
    tensors that the checkpoint holds (a dict, maybe empty).
    """
    config = BertConfig.from_json_file(bert_config_json)
    encoder = BertEncoder(config, dtype=dtype)
    heads = assign_encoder_weights(encoder, read_tf1_checkpoint(checkpoint_prefix),
                                   source=checkpoint_prefix)
    return (encoder, heads) if return_head_weights else encoder


# === HuggingFace folders (config.json + model.safetensors) ===

_HF_LAYER = re.compile(r"encoder\.layer\.(\d+)\.(.+)\.(weight|bias|gamma|beta)$")
_HF_LAYER_SCOPES = {
    "attention.self.query": "attention/self/query",
    "attention.self.key": "attention/self/key",
    "attention.self.value": "attention/self/value",
    "attention.output.dense": "attention/output/dense",
    "attention.output.LayerNorm": "attention/output/LayerNorm",
    "intermediate.dense": "intermediate/dense",
    "output.dense": "output/dense",
    "output.LayerNorm": "output/LayerNorm",
}
_HF_FIXED = {
    "embeddings.word_embeddings.weight": "bert/embeddings/word_embeddings",
    "embeddings.position_embeddings.weight": "bert/embeddings/position_embeddings",
    "embeddings.token_type_embeddings.weight": "bert/embeddings/token_type_embeddings",
    "embeddings.LayerNorm.weight": "bert/embeddings/LayerNorm/gamma",
    "embeddings.LayerNorm.bias": "bert/embeddings/LayerNorm/beta",
    "pooler.dense.weight": "bert/pooler/dense/kernel",
    "pooler.dense.bias": "bert/pooler/dense/bias",
    "cls.predictions.transform.dense.weight": "cls/predictions/transform/dense/kernel",
    "cls.predictions.transform.dense.bias": "cls/predictions/transform/dense/bias",
    "cls.predictions.transform.LayerNorm.weight": "cls/predictions/transform/LayerNorm/gamma",
    "cls.predictions.transform.LayerNorm.bias": "cls/predictions/transform/LayerNorm/beta",
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
}
# Buffers and tied copies that carry no weights of their own.
_HF_IGNORED = ("embeddings.position_ids", "cls.predictions.decoder.weight",
               "cls.predictions.decoder.bias")


def _hf_to_canonical(name, value):
    """One HuggingFace tensor -> (canonical name, array in the TF1 layout)."""
    name = name[len("bert."):] if name.startswith("bert.") else name
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias")
    if name in _HF_IGNORED:
        return None, None
    if name in _HF_FIXED:
        canonical = _HF_FIXED[name]
    else:
        match = _HF_LAYER.match(name)
        if not match or match.group(2) not in _HF_LAYER_SCOPES:
            return name, value  # reported as unexpected by assign_encoder_weights
        layer, scope, kind = match.groups()
        suffix = {"weight": "kernel", "bias": "bias"}[kind]
        if scope.endswith("LayerNorm"):
            suffix = {"weight": "gamma", "bias": "beta"}[kind]
        canonical = f"bert/encoder/layer_{layer}/{_HF_LAYER_SCOPES[scope]}/{suffix}"
    # torch.nn.Linear stores (out, in); the original and Keras store (in, out).
    if canonical.endswith("/kernel"):
        value = value.T
    return canonical, value


def read_huggingface(model_dir: str) -> tuple[BertConfig, dict[str, np.ndarray]]:
    """(BertConfig, canonical tensors) from a HuggingFace BERT folder."""
    config_path = os.path.join(model_dir, "config.json")
    weights_path = os.path.join(model_dir, "model.safetensors")
    for path in (config_path, weights_path):
        if not os.path.exists(path):
            raise FileNotFoundError(f"HuggingFace BERT folder {model_dir} lacks {os.path.basename(path)}")
    with open(config_path, encoding="utf-8") as f:
        try:
            hf_config = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{config_path}: not valid JSON ({e}); a truncated download? "
                             "fetch the file again") from None
    model_type = hf_config.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(f"{config_path}: model_type is {model_type!r}, not 'bert'")
    config = BertConfig.from_dict(hf_config, source=config_path)
    from safetensors.numpy import load_file  # Imported here: only this path needs it.
    tensors = {}
    for name, value in load_file(weights_path).items():
        canonical, value = _hf_to_canonical(name, value)
        if canonical is not None:
            tensors[canonical] = np.asarray(value)
    return config, tensors


def load_huggingface(model_dir: str, return_head_weights: bool = False,
                     dtype: str | keras.DTypePolicy | None = None
                     ) -> BertEncoder | tuple[BertEncoder, dict[str, np.ndarray]]:
    """BertEncoder with the weights of a HuggingFace folder (`config.json`,
    `model.safetensors`); see `load_tf1` for `return_head_weights`."""
    config, tensors = read_huggingface(model_dir)
    encoder = BertEncoder(config, dtype=dtype)
    heads = assign_encoder_weights(encoder, tensors, source=model_dir)
    return (encoder, heads) if return_head_weights else encoder


def load_pretrained(path: str, dtype: str | keras.DTypePolicy | None = None,
                    return_head_weights: bool = False
                    ) -> BertEncoder | tuple[BertEncoder, dict[str, np.ndarray]]:
    """Any supported checkpoint: a HuggingFace folder, a folder holding an original
    checkpoint with `bert_config.json`, or an original checkpoint prefix."""
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "model.safetensors")):
        return load_huggingface(path, return_head_weights, dtype)
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    if prefix is None:
        raise FileNotFoundError(f"no checkpoint found in {path}")
    if not tf.io.gfile.exists(prefix + ".index"):
        what = "not found" if not tf.io.gfile.exists(path) else "not a checkpoint"
        raise (FileNotFoundError if what == "not found" else ValueError)(
            f"{path}: {what}; give a HuggingFace folder (config.json, model.safetensors), "
            "a folder with bert_config.json and a TF1 checkpoint, or a TF1 checkpoint "
            "prefix (.../bert_model.ckpt)")
    config_json = os.path.join(directory, "bert_config.json")
    return load_tf1(prefix, config_json, return_head_weights, dtype)


def convert(checkpoint: str, output_path: str) -> str:
    """Writes any supported checkpoint as a Keras `.keras` file; returns its path."""
    if not output_path.endswith(".keras"):
        raise ValueError(f"--output must end in .keras, got {output_path}")
    encoder = load_pretrained(checkpoint)
    directory = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(directory, exist_ok=True)
    # Written under a temporary name and renamed: a crash never leaves a file
    # that looks complete.
    partial = output_path + ".partial.keras"
    encoder.save(partial)
    os.replace(partial, output_path)
    return output_path


# === Pretrainer heads (`cls/...`) ===

def head_variables(pretrainer: BertPretrainer) -> dict[str, tuple[keras.Variable, bool]]:
    """Original TF1 name (`cls/...`) -> the head's Keras variable and whether
    the checkpoint stores it transposed."""
    head = pretrainer.masked_lm_head
    names = {
        "cls/predictions/transform/dense/kernel": (head.dense.kernel, False),
        "cls/predictions/transform/dense/bias": (head.dense.bias, False),
        "cls/predictions/transform/LayerNorm/gamma": (head.layer_norm.gamma, False),
        "cls/predictions/transform/LayerNorm/beta": (head.layer_norm.beta, False),
        "cls/predictions/output_bias": (head.output_bias, False),
    }
    if pretrainer.next_sentence_head is not None:
        dense = pretrainer.next_sentence_head.dense
        # The original stores output_weights as (2, H); a Dense kernel is (H, 2).
        names["cls/seq_relationship/output_weights"] = (dense.kernel, True)
        names["cls/seq_relationship/output_bias"] = (dense.bias, False)
    return names


def assign_head_weights(pretrainer: BertPretrainer, tensors: Mapping[str, np.ndarray],
                        source: str = "checkpoint") -> list[str]:
    """Assigns the `cls/...` tensors present in `tensors` (as returned by
    `checkpoints.load_pretrained(..., return_head_weights=True)`); heads
    absent there keep their fresh initialisation. Returns the names loaded."""
    targets = head_variables(pretrainer)
    loaded = []
    for name, (variable, transposed) in targets.items():
        if name not in tensors:
            continue
        value = np.asarray(tensors[name])
        value = value.T if transposed else value
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"{source}: tensor {name} has shape {tuple(np.shape(tensors[name]))} "
                             f"but the pretrainer expects {tuple(variable.shape)}"
                             + (" (transposed)" if transposed else ""))
        loaded.append((name, variable, value))
    for _, variable, value in loaded:
        variable.assign(value.astype(variable.dtype))
    return [name for name, _, _ in loaded]


def load_pretrainer(path: str, objective: str = "nsp",
                    dtype: str | keras.DTypePolicy | None = None) -> BertPretrainer:
    """A `BertPretrainer` initialised from any checkpoint `load_pretrained` reads:
    the encoder always, the heads where the checkpoint has them (their names in
    `pretrainer.loaded_head_weights`)."""
    encoder, heads = load_pretrained(path, dtype=dtype, return_head_weights=True)
    pretrainer = BertPretrainer(encoder, objective=objective)
    pretrainer.loaded_head_weights = assign_head_weights(pretrainer, heads, source=path)
    return pretrainer
