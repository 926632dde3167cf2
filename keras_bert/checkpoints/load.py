"""Pretrained BERT weights: original TF1 checkpoints and HuggingFace folders.

Both formats are read into one canonical form, a dict from the original
google-research/bert variable names (`bert/encoder/layer_0/attention/self/query/kernel`)
to NumPy arrays in the original layouts, then assigned to a given encoder by
one function that checks every name and shape before it changes anything.
Models are built a layer up (`BertEncoder.from_pretrained`): this module only
reads arrays and assigns them to the variables of an encoder or pretrainer it
is handed.

ELECTRA's checkpoints (google-research/electra's `electra/...`, HuggingFace's
`ElectraForPreTraining` / `ElectraForMaskedLM`) read into the same names: its
encoder is BERT's under `bert/`, with `bert/embeddings_project` where its
embeddings are narrower than its blocks, and its heads keep the original's
names (`discriminator_predictions/...`, `generator_predictions/...`).
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any, Collection, Mapping

import numpy as np
import tensorflow as tf

from keras_bert import text_files
from keras_bert.config import BertConfig

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
# ELECTRA's heads (google-research/electra's names): the discriminator's
# replaced-token detection (`dense_1` is its one-logit output) and the
# generator's masked LM, whose output layer is the word embeddings plus
# `output_bias`; `output_weights` (V, E) is HuggingFace's untied output layer
# (`tie_word_embeddings: false`), a name the original never writes.
ELECTRA_HEAD_TENSORS = (
    "discriminator_predictions/dense/kernel",
    "discriminator_predictions/dense/bias",
    "discriminator_predictions/dense_1/kernel",
    "discriminator_predictions/dense_1/bias",
    "generator_predictions/dense/kernel",
    "generator_predictions/dense/bias",
    "generator_predictions/LayerNorm/gamma",
    "generator_predictions/LayerNorm/beta",
    "generator_predictions/output_bias",
    "generator_predictions/output_weights",
)
# ELECTRA has no pooler: an encoder read from it keeps a fresh one (as the
# original's fine-tuning starts from one).
POOLER_TENSORS = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")
# In google-research/electra's pretraining checkpoints, the generator beside
# the discriminator: not part of the encoder read from them.
_ELECTRA_GENERATOR_SCOPE = "generator/"
# Fine-tuned heads of the original scripts (`keras_bert.checkpoints.task_heads`
# loads them into task models): an encoder loaded from such a checkpoint leaves
# them, and refuses only tensors nobody knows.
TASK_HEAD_TENSORS = (
    "output_weights",
    "output_bias",  # run_classifier.py
    "cls/squad/output_weights",
    "cls/squad/output_bias",  # run_squad.py
)


def encoder_variables(encoder: keras.Model) -> dict[str, keras.Variable]:
    """Canonical (original TF1) name -> the variable of a `BertEncoder` (read by
    its attributes: this layer sits below the models)."""
    names = {
        "bert/embeddings/word_embeddings": encoder.token_embedding.embeddings,
        "bert/embeddings/token_type_embeddings": encoder.segment_embedding.embeddings,
        "bert/embeddings/position_embeddings": encoder.position_embedding.embeddings,
        "bert/embeddings/LayerNorm/gamma": encoder.embeddings_layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": encoder.embeddings_layer_norm.beta,
        "bert/pooler/dense/kernel": encoder.pooler.kernel,
        "bert/pooler/dense/bias": encoder.pooler.bias,
    }
    if encoder.embeddings_projection is not None:  # ELECTRA's E -> H
        names["bert/embeddings_project/kernel"] = encoder.embeddings_projection.kernel
        names["bert/embeddings_project/bias"] = encoder.embeddings_projection.bias
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
        for scope, norm in (
            ("attention/output/LayerNorm", block.attention_layer_norm),
            ("output/LayerNorm", block.output_layer_norm),
        ):
            names[f"{prefix}/{scope}/gamma"] = norm.gamma
            names[f"{prefix}/{scope}/beta"] = norm.beta
    return names


def assign_encoder_weights(
    encoder: keras.Model,
    tensors: Mapping[str, np.ndarray],
    source: str,
    untrained: Collection[str] = (),
) -> dict[str, np.ndarray]:
    """Assigns canonical tensors to the encoder; all-or-nothing. Returns the
    heads' tensors (BERT's `cls/...` and ELECTRA's) found beside it.

    Every encoder variable must be present with its exact shape, except those
    named in `untrained`, which the source does not hold and which keep their
    fresh values (ELECTRA's pooler), and no tensor outside the encoder and the
    known heads (pretraining and fine-tuned) may be left over.
    """
    variables = encoder_variables(encoder)
    variables = {
        name: variable
        for name, variable in variables.items()
        if not (name in untrained and name not in tensors)
    }
    missing = sorted(set(variables) - set(tensors))
    if missing:
        raise ValueError(
            f"{source}: missing tensor(s) for the encoder: {missing[:5]}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        )
    known = set(variables) | set(HEAD_TENSORS) | set(ELECTRA_HEAD_TENSORS) | set(TASK_HEAD_TENSORS)
    unexpected = sorted(
        name
        for name in tensors
        if name not in known and not name.startswith(_ELECTRA_GENERATOR_SCOPE)
    )
    if unexpected:
        raise ValueError(
            f"{source}: unexpected tensor(s) not part of BERT: {unexpected[:5]}"
            + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else "")
        )
    for name, variable in variables.items():
        if tuple(tensors[name].shape) != tuple(variable.shape):
            raise ValueError(
                f"{source}: tensor {name} has shape {tuple(tensors[name].shape)} "
                f"but the model expects {tuple(variable.shape)}"
            )
    for name, variable in variables.items():
        variable.assign(tensors[name].astype(variable.dtype))
    return {name: tensors[name] for name in HEAD_TENSORS + ELECTRA_HEAD_TENSORS if name in tensors}


def read_json(path: str) -> Any:
    """A checkpoint's JSON file; a broken one is named (downloads get cut short)."""
    text = text_files.read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path}: not valid JSON ({e}); a truncated download? fetch the file again"
        ) from None


def read_config_json(folder: str, model: str) -> tuple[str, dict[str, Any]]:
    """(path, values) of a HuggingFace `model` folder's `config.json`, a JSON
    object; a folder without one, or another JSON value, is refused."""
    path = os.path.join(folder, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"HuggingFace {model} folder {folder} lacks config.json")
    values = read_json(path)
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}")
    return path, values


# === Original TF1 checkpoints (google-research/bert) ===

# Optimizer state and bookkeeping in original checkpoints, not model weights
# (`temperature`: google-research/electra's, skipped as HuggingFace's converter does).
_TF1_IGNORED = re.compile(
    r"(adam_[mv]|global_step|Momentum|_slot_|good_steps|loss_scale|temperature)"
)
# google-research/electra's scope for the encoder BERT calls `bert/`.
_ELECTRA_SCOPE = "electra/"


def read_tf1_checkpoint(checkpoint_prefix: str) -> dict[str, np.ndarray]:
    """Canonical tensors from a google-research/bert (or /electra) checkpoint prefix."""
    try:
        reader = tf.train.load_checkpoint(checkpoint_prefix)
    except (tf.errors.NotFoundError, ValueError) as e:
        raise FileNotFoundError(f"cannot read TF1 checkpoint {checkpoint_prefix}: {e}") from None
    tensors = {}
    for name in reader.get_variable_to_shape_map():
        if _TF1_IGNORED.search(name):
            continue
        canonical = (
            "bert/" + name[len(_ELECTRA_SCOPE) :] if name.startswith(_ELECTRA_SCOPE) else name
        )
        tensors[canonical] = reader.get_tensor(name)
    return tensors


def is_electra_tf1_checkpoint(checkpoint_prefix: str) -> bool:
    """Whether the checkpoint's encoder is ELECTRA's (`electra/...`), read from its index."""
    return any(
        name.startswith(_ELECTRA_SCOPE) for name, _ in tf.train.list_variables(checkpoint_prefix)
    )


# === HuggingFace folders (config.json + model.safetensors) ===

HF_WEIGHTS_FILE = "model.safetensors"

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
    # ELECTRA (HuggingFace's names after `electra.`)
    "embeddings_project.weight": "bert/embeddings_project/kernel",
    "embeddings_project.bias": "bert/embeddings_project/bias",
    "discriminator_predictions.dense.weight": "discriminator_predictions/dense/kernel",
    "discriminator_predictions.dense.bias": "discriminator_predictions/dense/bias",
    "discriminator_predictions.dense_prediction.weight": "discriminator_predictions/dense_1/kernel",
    "discriminator_predictions.dense_prediction.bias": "discriminator_predictions/dense_1/bias",
    "generator_predictions.dense.weight": "generator_predictions/dense/kernel",
    "generator_predictions.dense.bias": "generator_predictions/dense/bias",
    "generator_predictions.LayerNorm.weight": "generator_predictions/LayerNorm/gamma",
    "generator_predictions.LayerNorm.bias": "generator_predictions/LayerNorm/beta",
    "generator_lm_head.bias": "generator_predictions/output_bias",
    "generator_lm_head.weight": "generator_predictions/output_weights",
}
# Buffers and tied copies that carry no weights of their own.
_HF_IGNORED = (
    "embeddings.position_ids",
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
)


def _hf_to_canonical(name, value):
    """One HuggingFace tensor -> (canonical name, array in the TF1 layout)."""
    for model_scope in ("bert.", "electra."):
        name = name[len(model_scope) :] if name.startswith(model_scope) else name
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )
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


# The HuggingFace `model_type`s whose encoder is BERT's (ELECTRA's, with its
# narrower embeddings projected up: `BertConfig.embedding_size`).
HF_MODEL_TYPES = ("bert", "electra")
# HuggingFace BertConfig fields that change what the model computes, with the
# one value keras_bert's encoder computes (BERT's): another value is refused,
# never converted as if it were this one.
HF_FIXED_FIELDS = {
    "position_embedding_type": "absolute",  # relative_key(_query): learned relative distances
    "layer_norm_eps": 1e-12,
    "is_decoder": False,  # causal self-attention
    "add_cross_attention": False,
}


def read_huggingface_model_type(model_dir: str) -> str:
    """The `model_type` of a HuggingFace folder's `config.json`, one of
    `HF_MODEL_TYPES` ("bert" where it names none); another is refused."""
    return _read_hf_config_json(model_dir)[1]


def _read_hf_config_json(model_dir):
    config_path, hf_config = read_config_json(model_dir, "BERT")
    model_type = hf_config.get("model_type", "bert")
    if model_type not in HF_MODEL_TYPES:
        raise ValueError(
            f"{config_path}: model_type is {model_type!r}, not one of {HF_MODEL_TYPES}"
        )
    return hf_config, model_type


def read_huggingface_config(model_dir: str) -> BertConfig:
    """The BertConfig of a HuggingFace BERT (or ELECTRA) folder's `config.json`;
    a field of `HF_FIXED_FIELDS` at another value is refused, naming it."""
    config_path = os.path.join(model_dir, "config.json")
    hf_config, _ = _read_hf_config_json(model_dir)
    for field, value in HF_FIXED_FIELDS.items():
        if field in hf_config and hf_config[field] != value:
            raise ValueError(
                f"{config_path}: {field} is {hf_config[field]!r}; keras_bert's BERT "
                f"computes only {field} {value!r} (the original BERT's), so this "
                "checkpoint cannot be converted"
            )
    return BertConfig.from_dict(hf_config, source=config_path)


def read_huggingface_tensors(weights_path: str) -> dict[str, np.ndarray]:
    """Canonical tensors from a HuggingFace `model.safetensors`."""
    if not os.path.exists(weights_path):
        raise FileNotFoundError(
            f"HuggingFace BERT folder {os.path.dirname(weights_path)} "
            f"lacks {os.path.basename(weights_path)}"
        )
    from safetensors.numpy import load_file  # Imported here: only this path needs it.

    tensors = {}
    for name, value in load_file(weights_path).items():
        canonical, value = _hf_to_canonical(name, value)
        if canonical is not None:
            tensors[canonical] = np.asarray(value)
    return tensors


def read_huggingface(model_dir: str) -> tuple[BertConfig, dict[str, np.ndarray]]:
    """(BertConfig, canonical tensors) from a HuggingFace BERT folder."""
    config = read_huggingface_config(model_dir)
    return config, read_huggingface_tensors(os.path.join(model_dir, HF_WEIGHTS_FILE))


# === Pretrainer heads (`cls/...`) ===


def masked_lm_head_variables(
    head: keras.layers.Layer, transform: str, output: str
) -> dict[str, tuple[keras.Variable, bool]]:
    """Original name -> (variable, stored transposed) of a `MaskedLMHead`: its
    transform (dense, LayerNorm) under `transform`, its output bias under
    `output` (BERT's `cls/predictions/...`, ELECTRA's `generator_predictions/...`)."""
    return {
        f"{transform}/dense/kernel": (head.dense.kernel, False),
        f"{transform}/dense/bias": (head.dense.bias, False),
        f"{transform}/LayerNorm/gamma": (head.layer_norm.gamma, False),
        f"{transform}/LayerNorm/beta": (head.layer_norm.beta, False),
        f"{output}/output_bias": (head.output_bias, False),
    }


def head_variables(pretrainer: keras.Model) -> dict[str, tuple[keras.Variable, bool]]:
    """Original TF1 name (`cls/...`) -> the head's Keras variable and whether
    the checkpoint stores it transposed."""
    names = masked_lm_head_variables(
        pretrainer.masked_lm_head, "cls/predictions/transform", "cls/predictions"
    )
    if pretrainer.next_sentence_head is not None:
        dense = pretrainer.next_sentence_head.dense
        # The original stores output_weights as (2, H); a Dense kernel is (H, 2).
        names["cls/seq_relationship/output_weights"] = (dense.kernel, True)
        names["cls/seq_relationship/output_bias"] = (dense.bias, False)
    return names


def assign_head_weights(
    pretrainer: keras.Model,
    tensors: Mapping[str, np.ndarray],
    source: str = "checkpoint",
    targets: Mapping[str, tuple[keras.Variable, bool]] | None = None,
) -> list[str]:
    """Assigns the head tensors present in `tensors` (as returned by
    `keras_bert.models.encoder.load_encoder_and_heads`) to `targets`, by
    default the pretrainer's `cls/...` (`head_variables`); heads absent there
    keep their fresh initialisation. Returns the names loaded."""
    targets = head_variables(pretrainer) if targets is None else targets
    loaded = []
    for name, (variable, transposed) in targets.items():
        if name not in tensors:
            continue
        value = np.asarray(tensors[name])
        value = value.T if transposed else value
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(
                f"{source}: tensor {name} has shape {tuple(np.shape(tensors[name]))} "
                f"but the {type(pretrainer).__name__} expects {tuple(variable.shape)}"
                + (" (transposed)" if transposed else "")
            )
        loaded.append((name, variable, value))
    for _, variable, value in loaded:
        variable.assign(value.astype(variable.dtype))
    return [name for name, _, _ in loaded]


# === ELECTRA's heads (`discriminator_predictions/...`, `generator_predictions/...`) ===


def discriminator_head_variables(model: keras.Model) -> dict[str, tuple[keras.Variable, bool]]:
    """Original name -> (variable, stored transposed) of an `ElectraDiscriminator`'s head."""
    head = model.discriminator_head
    return {
        "discriminator_predictions/dense/kernel": (head.dense.kernel, False),
        "discriminator_predictions/dense/bias": (head.dense.bias, False),
        "discriminator_predictions/dense_1/kernel": (head.prediction.kernel, False),
        "discriminator_predictions/dense_1/bias": (head.prediction.bias, False),
    }


def generator_head_variables(model: keras.Model) -> dict[str, tuple[keras.Variable, bool]]:
    """Original name -> (variable, stored transposed) of an `ElectraGenerator`'s
    head; its output layer's own table only where it is not the word embeddings."""
    head = model.generator_head
    names = masked_lm_head_variables(head, "generator_predictions", "generator_predictions")
    if not model.tie_embeddings:
        names["generator_predictions/output_weights"] = (head.token_embedding.embeddings, False)
    return names
