"""Reads a sentence-transformers folder: which modules, with which settings.

A sentence-transformers model folder lists its modules in `modules.json`:
a Transformer (a HuggingFace BERT folder, often the folder itself, with
`sentence_bert_config.json`: max_seq_length, do_lower_case), a Pooling
module (`1_Pooling/config.json`: which modes), Dense modules
(`2_Dense/config.json` + `model.safetensors`) and Normalize (no files).
`read_sentence_transformer(folder)` returns them as plain data; a folder
without `modules.json` is a plain BERT checkpoint (None), which
sentence-transformers itself mean-pools.

Every field of every module's config is read (as of sentence-transformers
6.3): a field keras_bert computes is used, one at the value that changes
nothing is accepted, and any other value, or a field not known here, is
refused naming the module's folder and the field, never run as if it were
absent.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from keras_bert.checkpoints.load import read_json
from keras_bert.layers.sentence_pooling import POOLING_CONFIG_KEYS

MODULES_FILE = "modules.json"
SETTINGS_FILE = "sentence_bert_config.json"
# torch activations sentence-transformers' Dense modules name -> Keras' names.
_ACTIVATIONS = {
    "torch.nn.modules.activation.Tanh": "tanh",
    "torch.nn.modules.linear.Identity": None,
    "torch.nn.modules.activation.ReLU": "relu",
    "torch.nn.modules.activation.GELU": "gelu",
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
}


# The embedding a Dense or Normalize module reads and writes; another name
# (`token_embeddings`: one vector per token) is a pipeline keras_bert does not build.
SENTENCE_EMBEDDING = "sentence_embedding"
# modules.json: what each entry may hold.
_MODULE_ENTRY_FIELDS = ("idx", "name", "path", "type", "kwargs")
# sentence_bert_config.json fields at the value that changes nothing for a
# BERT feature extractor (sentence-transformers 6's defaults); max_seq_length
# and do_lower_case are read, unpad_inputs (how a batch is laid out for
# FlashAttention) never changes the values.
_TRANSFORMER_DEFAULTS = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings",
    "processing_kwargs": {},
    "query_length": None,
    "document_length": None,
    "query_expansion": None,
}
_TRANSFORMER_READ = ("max_seq_length", "do_lower_case", "unpad_inputs")
_POOLING_FIELDS = (
    "word_embedding_dimension",
    "embedding_dimension",
    "pooling_mode",
    "include_prompt",
    *POOLING_CONFIG_KEYS.values(),
)
_DENSE_FIELDS = (
    "in_features",
    "out_features",
    "bias",
    "activation_function",
    "module_input_name",
    "module_output_name",
    "use_residual",
)


@dataclasses.dataclass(frozen=True)
class DenseModule:
    """One Dense module: kernel (in, out), bias (out,) or None, Keras
    activation, and `use_residual`: the input added to the output, through
    `residual_kernel` (in, out) where the sizes differ (else None)."""

    kernel: np.ndarray
    bias: np.ndarray | None
    activation: str | None
    residual: bool = False
    residual_kernel: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class SentenceTransformerFolder:
    """The modules of a sentence-transformers folder, in pipeline order."""

    transformer: str  # the BERT folder (config.json, model.safetensors)
    max_seq_length: int | None  # sentence_bert_config.json's, None if unset
    lowercase_text: bool  # do_lower_case: str.lower() before the tokenizer
    pooling_modes: tuple[str, ...]
    dense: tuple[DenseModule, ...]
    normalize: bool


def is_sentence_transformer(folder: str) -> bool:
    return os.path.isdir(folder) and os.path.exists(os.path.join(folder, MODULES_FILE))


def read_sentence_transformer(folder: str) -> SentenceTransformerFolder:
    """The modules of the sentence-transformers folder `folder`; a module of a
    kind keras_bert does not build is an error naming it."""
    modules_path = os.path.join(folder, MODULES_FILE)
    modules = read_json(modules_path)
    if not isinstance(modules, list):
        raise ValueError(
            f"{modules_path}: expected a list of modules, got {type(modules).__name__}"
        )
    # sentence-transformers 2-5 name `sentence_transformers.models.Pooling`, 6
    # `sentence_transformers.sentence_transformer.modules.pooling.Pooling`.
    for module in modules:
        if not isinstance(module, dict):
            raise ValueError(f"{modules_path}: expected modules as objects, got {module!r}")
        _refuse_unknown(
            module, _MODULE_ENTRY_FIELDS, f"{modules_path} module {module.get('name')!r}"
        )
        if module.get("kwargs"):
            raise ValueError(
                f"{modules_path}: module {module.get('name')!r} takes kwargs "
                f"{module['kwargs']} (inputs beside the text, such as a task or a "
                "prompt), which keras_bert does not pass"
            )
    kinds = [module.get("type", "").rsplit(".", 1)[-1] for module in modules]
    if not kinds or kinds[0] != "Transformer":
        raise ValueError(
            f"{modules_path}: the first module must be a sentence_transformers "
            f"Transformer (BERT); got {kinds[:1]}"
        )
    if kinds.count("Pooling") != 1 or kinds.index("Pooling") != 1:
        raise ValueError(
            f"{modules_path}: expected one Pooling module right after the "
            f"Transformer; got modules {kinds}"
        )
    transformer = os.path.join(folder, modules[0].get("path", ""))
    settings = _transformer_settings(folder, transformer)
    pooling_modes = _pooling_modes(os.path.join(folder, modules[1].get("path", ""), "config.json"))
    dense, normalize = [], False
    for module, kind in zip(modules[2:], kinds[2:]):
        path = os.path.join(folder, module.get("path", ""))
        if normalize:
            raise ValueError(
                f"{modules_path}: a {kind} module after Normalize is not supported "
                "(the embeddings would no longer have unit length)"
            )
        if kind == "Dense":
            dense.append(_dense_module(path))
        elif kind == "Normalize":
            _check_normalize(path)
            normalize = True
        else:
            raise ValueError(
                f"{modules_path}: module {module.get('name')!r} of type "
                f"{module.get('type')!r} is not supported; keras_bert builds "
                "Transformer (BERT), Pooling, Dense and Normalize modules"
            )
    return SentenceTransformerFolder(
        transformer=transformer,
        max_seq_length=settings.get("max_seq_length") or _tokenizer_max_length(transformer),
        lowercase_text=bool(settings.get("do_lower_case", False)),
        pooling_modes=pooling_modes,
        dense=tuple(dense),
        normalize=normalize,
    )


def _refuse_unknown(config: dict, known, where: str) -> None:
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(
            f"{where}: field(s) {unknown} are not read by keras_bert (it reads "
            f"{sorted(known)}), so the model could compute something else; "
            "remove them if they change nothing"
        )


def _transformer_settings(folder: str, transformer: str) -> dict:
    for place in (transformer, folder):
        path = os.path.join(place, SETTINGS_FILE)
        if os.path.exists(path):
            settings = read_json(path)
            if not isinstance(settings, dict):
                raise ValueError(f"{path}: expected a JSON object")
            _refuse_unknown(settings, (*_TRANSFORMER_DEFAULTS, *_TRANSFORMER_READ), path)
            for field, default in _TRANSFORMER_DEFAULTS.items():
                if field in settings and settings[field] not in (default, None):
                    raise ValueError(
                        f"{path}: {field} {settings[field]!r} is not supported; "
                        f"keras_bert builds a BERT feature extractor ({field} {default!r})"
                    )
            return settings
    return {}


def _check_normalize(path: str) -> None:
    """sentence-transformers 6 writes Normalize's config (which embedding it
    normalises); earlier versions write no file."""
    config_path = os.path.join(path, "config.json")
    if not os.path.exists(config_path):
        return
    config = read_json(config_path)
    _refuse_unknown(config, ("module_input_name", "module_output_name"), config_path)
    _check_sentence_embedding(config, config_path)


def _check_sentence_embedding(config: dict, config_path: str) -> None:
    for field in ("module_input_name", "module_output_name"):
        if config.get(field) not in (None, SENTENCE_EMBEDDING):
            raise ValueError(
                f"{config_path}: {field} {config[field]!r} is not supported; keras_bert "
                f"builds modules on the pooled {SENTENCE_EMBEDDING!r}"
            )


def _tokenizer_max_length(transformer: str) -> int | None:
    """sentence-transformers 6 keeps max_seq_length as the tokenizer's
    model_max_length (tokenizer_config.json); HuggingFace writes a huge
    number there for "no limit", which is no setting."""
    path = os.path.join(transformer, "tokenizer_config.json")
    if not os.path.exists(path):
        return None
    length = read_json(path).get("model_max_length")
    return length if isinstance(length, int) and 0 < length < 100_000 else None


def vocabulary_of(transformer: str) -> list[str] | None:
    """The word pieces of a folder that has a HuggingFace tokenizer.json but
    no vocab.txt (sentence-transformers 6 saves only the former), by id."""
    if os.path.exists(os.path.join(transformer, "vocab.txt")):
        return None
    path = os.path.join(transformer, "tokenizer.json")
    if not os.path.exists(path):
        return None
    model = read_json(path).get("model", {})
    if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise ValueError(f"{path}: a {model.get('type')} tokenizer; BERT's is WordPiece")
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    if [index for _, index in by_id] != list(range(len(by_id))):
        raise ValueError(f"{path}: the WordPiece ids are not 0..{len(by_id) - 1}")
    return [piece for piece, _ in by_id]


def _pooling_modes(config_path: str) -> tuple[str, ...]:
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"sentence-transformers Pooling module: {config_path} is missing")
    config = read_json(config_path)
    _refuse_unknown(config, _POOLING_FIELDS, config_path)
    if config.get("include_prompt", True) is False:
        raise ValueError(
            f"{config_path}: include_prompt=false (pooling that skips an "
            "instruction prompt) is not supported"
        )
    # sentence-transformers 6: "pooling_mode": a mode or a list; before: one flag per mode.
    named = config.get("pooling_mode")
    if named is not None:
        named = [named] if isinstance(named, str) else list(named)
        unknown = [mode for mode in named if mode not in POOLING_CONFIG_KEYS]
        if unknown:
            raise ValueError(
                f"{config_path}: pooling_mode {unknown} is not supported; known: "
                f"{list(POOLING_CONFIG_KEYS)}"
            )
        return tuple(named)  # concatenated in this order
    modes = tuple(mode for mode, key in POOLING_CONFIG_KEYS.items() if config.get(key))
    if not modes:
        raise ValueError(
            f"{config_path}: no pooling mode is on (one of "
            f"{sorted(POOLING_CONFIG_KEYS.values())} must be true)"
        )
    return modes


def _dense_module(path: str) -> DenseModule:
    config_path = os.path.join(path, "config.json")
    config = read_json(config_path)
    _refuse_unknown(config, _DENSE_FIELDS, config_path)
    _check_sentence_embedding(config, config_path)
    residual = config.get("use_residual", False)
    if not isinstance(residual, bool):
        raise ValueError(f"{config_path}: use_residual must be true or false, got {residual!r}")
    activation_name = config.get("activation_function", "torch.nn.modules.activation.Tanh")
    if activation_name not in _ACTIVATIONS:
        raise ValueError(
            f"{config_path}: activation_function {activation_name!r} is not "
            f"supported; known: {sorted(_ACTIVATIONS)}"
        )
    weights_path = os.path.join(path, "model.safetensors")
    if not os.path.exists(weights_path):
        raise FileNotFoundError(
            f"sentence-transformers Dense module {path}: no model.safetensors (a "
            "pytorch_model.bin needs PyTorch to read: save the model again with a recent "
            "sentence-transformers, which writes safetensors)"
        )
    from safetensors.numpy import load_file  # Imported here: only this path needs it.

    tensors = load_file(weights_path)
    if "linear.weight" not in tensors:
        raise ValueError(f"{weights_path}: no `linear.weight` tensor (found {sorted(tensors)})")
    kernel = np.asarray(tensors["linear.weight"], np.float32).T  # torch (out, in) -> (in, out)
    expected = (config.get("in_features"), config.get("out_features"))
    if None not in expected and kernel.shape != tuple(expected):
        raise ValueError(
            f"{weights_path}: linear.weight is {kernel.shape[::-1]} (out, in), but "
            f"{config_path} says in_features={expected[0]}, "
            f"out_features={expected[1]}"
        )
    bias = tensors.get("linear.bias") if config.get("bias", True) else None
    residual_kernel = None
    if residual and kernel.shape[0] != kernel.shape[1]:
        # Sizes differ: sentence-transformers projects the input, without a bias.
        if "residual.weight" not in tensors:
            raise ValueError(
                f"{weights_path}: use_residual with in_features != out_features "
                f"needs a `residual.weight` tensor (found {sorted(tensors)})"
            )
        residual_kernel = np.asarray(tensors["residual.weight"], np.float32).T
        if residual_kernel.shape != kernel.shape:
            raise ValueError(
                f"{weights_path}: residual.weight is {residual_kernel.shape[::-1]} (out, in); "
                f"linear.weight is {kernel.shape[::-1]}"
            )
    return DenseModule(
        kernel=kernel,
        bias=None if bias is None else np.asarray(bias, np.float32),
        activation=_ACTIVATIONS[activation_name],
        residual=residual,
        residual_kernel=residual_kernel,
    )
