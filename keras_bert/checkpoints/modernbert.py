"""HuggingFace ModernBERT folders (config.json + model.safetensors) and their name map.

Tensors keep HuggingFace's names (`layers.3.attn.Wqkv.weight`), the one
published layout of these models, without the `model.` prefix that a task
model's checkpoint (`ModernBertForMaskedLM`, ...) puts before the encoder's.
The map reads the encoder's layers by attribute (this layer sits below the
models) and assigns all or nothing, every name and shape checked first.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from keras_bert.checkpoints.load import HF_WEIGHTS_FILE, read_config_json
from keras_bert.modernbert_config import ModernBertConfig

if TYPE_CHECKING:
    import keras

MODEL_TYPE = "modernbert"
# The prediction head (`head.*`) of these architectures is the encoder's pooler;
# in `ModernBertForMaskedLM` the same names are the masked-LM transform.
POOLER_ARCHITECTURES = ("ModernBertForSequenceClassification", "ModernBertForMultipleChoice")
# The replaced-token head of a keras-bert ModernBERT ELECTRA export (ModernBERT
# has none: HuggingFace ELECTRA's names, `ElectraForPreTraining`'s).
DISCRIMINATOR_HEAD = "discriminator_predictions."
# Task heads on top of the encoder, loaded by the task models (or left).
HEAD_PREFIXES = ("head.", "decoder.", "classifier.", DISCRIMINATOR_HEAD)


def read_config(folder: str) -> tuple[ModernBertConfig, dict[str, Any]]:
    """The ModernBertConfig of a HuggingFace folder, and the raw config.json."""
    path, values = read_config_json(folder, "ModernBERT")
    if values.get("model_type") != MODEL_TYPE:
        raise ValueError(
            f"{path}: model_type is {values.get('model_type')!r}, not {MODEL_TYPE!r}; "
            "a BERT folder loads with keras_bert.BertEncoder.from_pretrained"
        )
    return ModernBertConfig.from_dict(values, source=path), values


def read_tensors(folder: str) -> dict[str, np.ndarray]:
    """Every tensor of the folder's `model.safetensors`, the encoder's without `model.`."""
    path = os.path.join(folder, HF_WEIGHTS_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"HuggingFace ModernBERT folder {folder} lacks {HF_WEIGHTS_FILE}")
    from safetensors.numpy import load_file  # Imported here: only this path needs it.

    return {
        name[len("model.") :] if name.startswith("model.") else name: np.asarray(value)
        for name, value in load_file(path).items()
    }


def _dense(prefix: str, dense: Any) -> dict[str, tuple[Any, bool]]:
    # torch.nn.Linear stores (out, in); Keras (in, out).
    names = {f"{prefix}.weight": (dense.kernel, True)}
    if dense.bias is not None:
        names[f"{prefix}.bias"] = (dense.bias, False)
    return names


def _norm(prefix: str, norm: Any) -> dict[str, tuple[Any, bool]]:
    names = {f"{prefix}.weight": (norm.gamma, False)}
    if norm.beta is not None:
        names[f"{prefix}.bias"] = (norm.beta, False)
    return names


def encoder_variables(encoder: keras.Model) -> dict[str, tuple[keras.Variable, bool]]:
    """HuggingFace name -> (the `ModernBertEncoder`'s variable, stored transposed)."""
    names = {"embeddings.tok_embeddings.weight": (encoder.token_embedding.embeddings, False)}
    names |= _norm("embeddings.norm", encoder.embeddings_layer_norm)
    for i, block in enumerate(encoder.transformer_blocks):
        prefix = f"layers.{i}"
        if block.attention_layer_norm is not None:
            names |= _norm(f"{prefix}.attn_norm", block.attention_layer_norm)
        names |= _dense(f"{prefix}.attn.Wqkv", block.attention.qkv)
        names |= _dense(f"{prefix}.attn.Wo", block.attention.attention_output)
        names |= _norm(f"{prefix}.mlp_norm", block.mlp_layer_norm)
        names |= _dense(f"{prefix}.mlp.Wi", block.feed_forward.input_and_gate)
        names |= _dense(f"{prefix}.mlp.Wo", block.feed_forward.ffn_output)
    names |= _norm("final_norm", encoder.final_layer_norm)
    return names


def prediction_head_variables(head: Any) -> dict[str, tuple[keras.Variable, bool]]:
    """`head.*` -> a `PredictionHead`'s variables (the pooler, or the masked-LM transform)."""
    return _dense("head.dense", head.dense) | _norm("head.norm", head.layer_norm)


def masked_lm_head_variables(head: Any) -> dict[str, tuple[keras.Variable, bool]]:
    """`head.*` and `decoder.bias` -> a `ModernBertMaskedLMHead`'s variables
    (its output layer's weight is the token embedding table, tied)."""
    names = prediction_head_variables(head)
    if head.output_bias is not None:
        names["decoder.bias"] = (head.output_bias, False)
    return names


def replaced_token_head_variables(head: Any) -> dict[str, tuple[keras.Variable, bool]]:
    """`discriminator_predictions.*` -> a `ReplacedTokenHead`'s variables
    (its dense, then its one-unit prediction: HuggingFace ELECTRA's
    `dense` and `dense_prediction`)."""
    return _dense(f"{DISCRIMINATOR_HEAD}dense", head.dense) | _dense(
        f"{DISCRIMINATOR_HEAD}dense_prediction", head.prediction
    )


def assign(
    targets: Mapping[str, tuple[keras.Variable, bool]],
    tensors: Mapping[str, np.ndarray],
    source: str,
) -> None:
    """Assigns every target from `tensors`; all-or-nothing: a missing name or
    a wrong shape is refused before any variable changes."""
    missing = sorted(set(targets) - set(tensors))
    if missing:
        raise ValueError(
            f"{source}: missing tensor(s): {missing[:5]}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            + " (does config.json's attention_bias / mlp_bias / norm_bias match the weights?)"
        )
    values = {}
    for name, (variable, transposed) in targets.items():
        value = tensors[name].T if transposed else tensors[name]
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(
                f"{source}: tensor {name} has shape {tuple(tensors[name].shape)} but the "
                f"model expects {tuple(variable.shape)}" + (" (transposed)" if transposed else "")
            )
        values[name] = value
    for name, (variable, _) in targets.items():
        variable.assign(values[name].astype(variable.dtype))


def assign_encoder_weights(
    encoder: keras.Model, tensors: Mapping[str, np.ndarray], architectures: list, source: str
) -> dict[str, np.ndarray]:
    """Loads the encoder (and its pooler where the checkpoint's head is one);
    returns the task-head tensors left (`head.*`, `decoder.*`, `classifier.*`).
    A tensor that is neither the encoder's nor a head's is refused."""
    targets = encoder_variables(encoder)
    unexpected = sorted(
        name for name in tensors if name not in targets and not name.startswith(HEAD_PREFIXES)
    )
    if unexpected:
        raise ValueError(
            f"{source}: unexpected tensor(s) not part of ModernBERT: {unexpected[:5]}"
            + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else "")
        )
    if any(name in POOLER_ARCHITECTURES for name in architectures):
        targets |= prediction_head_variables(encoder.pooler)
    assign(targets, tensors, source)
    return {name: value for name, value in tensors.items() if name not in targets}


def write_masked_lm_folder(directory: str, encoder: keras.Model, head: Any) -> str:
    """Writes `encoder` and its masked-LM `head` as a HuggingFace
    `ModernBertForMaskedLM` folder (config.json + model.safetensors, float32,
    the encoder's tensors under `model.`), which `ModernBertEncoder`,
    `ModernBertMaskedLM` and `ModernBertPretrainer.from_pretrained` read. The
    folder is written beside `directory` and renamed into place whole: a
    failed or killed write leaves the previous one."""
    from keras_bert import safe_output  # Imported here: reading a folder needs none of it.

    with safe_output.replacing(directory, folder=True) as staging:
        write_folder_files(staging, encoder, masked_lm_head_variables(head))
    return directory


def write_folder_files(
    folder: str,
    encoder: Any,
    heads: Mapping[str, tuple[keras.Variable, bool]],
    architecture: str = "ModernBertForMaskedLM",
) -> None:
    """Writes config.json and model.safetensors (float32) into `folder` (no
    renaming: the caller's `safe_output.replacing` makes it whole): the
    encoder's tensors (under `model.` beside a task head, as HuggingFace's
    task models store them; the bare names for `ModernBertModel`) and the
    `heads`' (HuggingFace name -> (variable, stored transposed))."""
    import keras  # Imported here: reading a folder needs no Keras.
    from safetensors.numpy import save

    from keras_bert import safe_output

    prefix = "" if architecture == "ModernBertModel" else "model."
    targets = {f"{prefix}{name}": target for name, target in encoder_variables(encoder).items()}
    targets |= heads
    tensors = {}
    for name, (variable, transposed) in targets.items():
        value = keras.ops.convert_to_numpy(variable).astype(np.float32)
        tensors[name] = np.ascontiguousarray(value.T if transposed else value)
    values = {
        **encoder.config.to_dict(),
        "model_type": MODEL_TYPE,
        "architectures": [architecture],
        "tie_word_embeddings": True,
    }
    safe_output.write_bytes(
        os.path.join(folder, HF_WEIGHTS_FILE), save(tensors, metadata={"format": "pt"})
    )
    safe_output.write_json(os.path.join(folder, "config.json"), values)
