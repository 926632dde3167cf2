"""One reader for every pretrained source: `resolve(path) -> PretrainedSource`.

A source is any of
  huggingface      a folder with config.json + model.safetensors (+ vocab.txt,
                   tokenizer_config.json), BERT's, ELECTRA's or ModernBERT's
                   (a ModernBertConfig: `ModernBertEncoder` reads it, also a
                   `keras-bert pretrain` model_dir of `architecture: modernbert`);
  tf1              an original google-research/bert folder (bert_config.json,
                   vocab.txt, bert_model.ckpt.*), its checkpoint prefix, or a
                   `keras-bert pretrain` model_dir (its export/ folder);
  keras            a `.keras` file holding a BertEncoder or a model with an `encoder`;
  finetune_output  a `keras-bert finetune` output folder (model.keras, vocab.txt,
                   finetune_config.json);
or a name for one of them, found in the local caches (`caches`: HuggingFace's
`ORG/NAME`, an original release's `uncased_L-12_H-768_A-12`, `bert-base-uncased`);
a local path that exists wins over a name.
`resolve` reads only the small files: the config, where the vocabulary is, what
says the model is cased or uncased. The weights are read on demand
(`read_tensors`), or loaded by Keras for `.keras` files (`BertEncoder.from_pretrained`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert import safe_output
from keras_bert.assets import VOCAB_FILE
from keras_bert.checkpoints import caches, modernbert
from keras_bert.checkpoints.casing import (
    Casing,
    casing_from_tf1_name,
    casing_from_tokenizer_config,
    casing_from_vocabulary,
    choose_lowercase,
)
from keras_bert.checkpoints.load import (
    HF_WEIGHTS_FILE,
    POOLER_TENSORS,
    is_electra_tf1_checkpoint,
    read_config_json,
    read_huggingface_config,
    read_huggingface_model_type,
    read_huggingface_tensors,
    read_json,
    read_tf1_checkpoint,
)
from keras_bert.checkpoints.tokenizer_config import read_tokenizer_options
from keras_bert.config import BertConfig
from keras_bert.modernbert_config import ModernBertConfig

KINDS = ("huggingface", "tf1", "keras", "finetune_output")
FINETUNE_CONFIG = "finetune_config.json"
FINETUNE_MODEL = "model.keras"
VOCAB = "vocab.txt"
# What a `keras-bert pretrain` model_dir's export/ holds beside its weights.
_EXPORT_CONFIGS = ("bert_config.json", "config.json")
# Weights files HuggingFace also writes, which we do not read: named in the error.
_HF_OTHER_WEIGHTS = ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")
_LAYOUTS = (
    "a HuggingFace folder (config.json + model.safetensors), an original TF1 "
    "folder (bert_config.json + bert_model.ckpt.*) or its checkpoint prefix "
    "(.../bert_model.ckpt), a .keras file, a `keras-bert finetune` output folder "
    f"({FINETUNE_CONFIG} + {FINETUNE_MODEL}) or a `keras-bert pretrain` model_dir "
    "(export/bert_config.json, or export/config.json for architecture modernbert)"
)


@dataclasses.dataclass(frozen=True)
class PretrainedSource:
    """What a pretrained path holds, read without loading its weights."""

    path: str  # as given
    kind: str  # one of KINDS
    config: BertConfig | ModernBertConfig
    weights: str  # model.safetensors, TF1 prefix or .keras file
    vocab_file: str | None  # the source's own vocabulary, if it has one
    stated_casing: Casing | None  # what the source says beside its vocabulary
    # BertTokenizer's strip_accents / special_tokens where the source sets them
    # (HuggingFace's tokenizer_config.json, a saved preprocessor).
    tokenizer_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Encoder variables (canonical names) the source does not hold, which keep
    # their fresh values: an ELECTRA checkpoint's pooler.
    untrained: tuple[str, ...] = ()

    @property
    def casing(self) -> Casing | None:
        """The source's casing: stated, else from its vocabulary; None if neither."""
        if self.stated_casing is not None:
            return self.stated_casing
        return casing_from_vocabulary(self.vocab_file) if self.vocab_file else None

    def bert_config(self) -> BertConfig:
        """The source's BertConfig; a ModernBERT source is refused, naming the
        encoder that reads it."""
        if isinstance(self.config, ModernBertConfig):
            raise ValueError(
                f"{self.path}: a ModernBERT checkpoint; its encoder is a ModernBertEncoder "
                "(ModernBertEncoder.from_pretrained; BertClassifier.from_pretrained builds on it)"
            )
        return self.config

    def read_tensors(self) -> dict[str, np.ndarray]:
        """Canonical tensors (original TF1 names) of a HuggingFace or TF1 source.
        A `.keras` file holds a Keras model: `BertEncoder.from_pretrained` loads it."""
        self.bert_config()
        if self.kind == "huggingface":
            return read_huggingface_tensors(self.weights)
        if self.kind == "tf1":
            return read_tf1_checkpoint(self.weights)
        raise ValueError(
            f"{self.path}: a {self.kind} source holds a Keras model, not "
            "checkpoint tensors; load it with BertEncoder.from_pretrained"
        )


def resolve(path: str) -> PretrainedSource:
    """The source at `path` (any of the module docstring's kinds), or of the
    checkpoint of that name in the local caches (never the network)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return _resolve_folder(path, path)
    if path.endswith(".keras"):
        folder = os.path.dirname(path)
        if os.path.basename(path) == FINETUNE_MODEL and os.path.exists(
            os.path.join(folder, FINETUNE_CONFIG)
        ):
            return dataclasses.replace(_finetune_output(folder), path=path)
        return _keras_file(path)
    if tf.io.gfile.exists(path + ".index"):
        return _tf1_prefix(path, path)
    if not os.path.exists(path):
        safe_output.check_not_in_progress(path)  # a run that has not made its folder yet
        if caches.is_name(path):
            return _resolve_folder(caches.find_cached(path), path)
        raise FileNotFoundError(f"pretrained checkpoint not found: {path}")
    raise ValueError(f"{path}: not a checkpoint; give {_LAYOUTS}")


def decide_lowercase(
    lowercase: bool | None, vocab_file: str, source: PretrainedSource | None = None
) -> bool:
    """Whether a tokenizer of `vocab_file` feeding `source`'s encoder lowercases:
    detected for `lowercase=None`, else checked (ValueError naming both).

    What the source states (tokenizer_config.json, TF1 folder name, a saved
    setting) decides first, then the vocabulary in use.
    """
    if source is not None and source.stated_casing is not None:
        return choose_lowercase(lowercase, source.stated_casing, source.path)
    return choose_lowercase(lowercase, casing_from_vocabulary(vocab_file), vocab_file)


def tokenizer_options(source: PretrainedSource | None) -> dict[str, Any]:
    """`BertTokenizer` keyword arguments beyond the vocabulary and casing that
    `source` sets (HuggingFace: strip_accents and the special tokens read in
    the text); {} for none."""
    return dict(source.tokenizer_options) if source is not None else {}


def tokenizer_settings(
    source: PretrainedSource | None, vocab_file: str | None = None, lowercase: bool | None = None
) -> tuple[str, bool]:
    """(vocabulary, lowercase) of the tokenizer for `source`'s encoder: the
    vocabulary given, else the source's own, else the shipped uncased one; the
    casing from `decide_lowercase`."""
    vocab_file = vocab_file or (source.vocab_file if source else None) or VOCAB_FILE
    return vocab_file, decide_lowercase(lowercase, vocab_file, source)


# === Folders ===


def _resolve_folder(folder: str, given: str) -> PretrainedSource:
    def has(name):
        return os.path.exists(os.path.join(folder, name))

    if has(FINETUNE_CONFIG):
        return dataclasses.replace(_finetune_output(folder), path=given)
    if has("config.json") and (has(HF_WEIGHTS_FILE) or not has("bert_config.json")):
        return _huggingface(folder, given)
    if has("bert_config.json"):
        prefix = tf.train.latest_checkpoint(folder)
        # Google's release zips hold no `checkpoint` index file: the prefix is fixed.
        if prefix is None and tf.io.gfile.exists(os.path.join(folder, "bert_model.ckpt.index")):
            prefix = os.path.join(folder, "bert_model.ckpt")
        if prefix is None:
            raise FileNotFoundError(
                f"{folder}: has bert_config.json but no TF1 checkpoint "
                "(bert_model.ckpt.index or a `checkpoint` file)"
            )
        return _tf1_prefix(prefix, given)
    # A `keras-bert pretrain` model_dir: its export/ folder is the original
    # layout, or HuggingFace's (architecture modernbert).
    if any(os.path.exists(os.path.join(folder, "export", name)) for name in _EXPORT_CONFIGS):
        return _resolve_folder(os.path.join(folder, "export"), given)
    # A finetune or pretrain writing here: its checkpoints/ and logs/ are not a model yet.
    safe_output.check_not_in_progress(folder)
    raise FileNotFoundError(f"{folder}: not a checkpoint folder; looked for {_LAYOUTS}")


def _huggingface(folder: str, given: str) -> PretrainedSource:
    weights = os.path.join(folder, HF_WEIGHTS_FILE)
    if not os.path.exists(weights):
        others = [name for name in _HF_OTHER_WEIGHTS if os.path.exists(os.path.join(folder, name))]
        hint = (
            f" (it has {', '.join(others)}: save the model again with "
            "safe_serialization=True, HuggingFace's default)"
            if others
            else ""
        )
        raise FileNotFoundError(f"HuggingFace BERT folder {folder} lacks {HF_WEIGHTS_FILE}{hint}")
    if read_config_json(folder, "BERT")[1].get("model_type") == modernbert.MODEL_TYPE:
        config, untrained = modernbert.read_config(folder)[0], ()
    else:
        config = read_huggingface_config(folder)
        untrained = POOLER_TENSORS if read_huggingface_model_type(folder) == "electra" else ()
    return PretrainedSource(
        path=given,
        kind="huggingface",
        config=config,
        weights=weights,
        vocab_file=_vocab_beside(folder),
        stated_casing=casing_from_tokenizer_config(os.path.join(folder, "tokenizer_config.json")),
        tokenizer_options=read_tokenizer_options(folder),
        untrained=untrained,
    )


def _tf1_prefix(prefix: str, given: str) -> PretrainedSource:
    folder = os.path.dirname(prefix) or "."
    config_path = os.path.join(folder, "bert_config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(
            f"TF1 checkpoint {prefix}: no bert_config.json beside it ({config_path})"
        )
    return PretrainedSource(
        path=given,
        kind="tf1",
        config=BertConfig.from_json_file(config_path),
        weights=prefix,
        vocab_file=_vocab_beside(folder),
        stated_casing=casing_from_tf1_name(os.path.abspath(prefix)),
        untrained=POOLER_TENSORS if is_electra_tf1_checkpoint(prefix) else (),
    )


def _finetune_output(folder: str) -> PretrainedSource:
    settings_path = os.path.join(folder, FINETUNE_CONFIG)
    settings = read_json(settings_path)
    model = os.path.join(folder, FINETUNE_MODEL)
    if not os.path.exists(model):
        raise FileNotFoundError(
            f"{folder}: has {FINETUNE_CONFIG} but no {FINETUNE_MODEL} "
            "(an unfinished fine-tuning run?)"
        )
    lowercase = settings.get("lowercase")
    stated = (
        Casing(lowercase, f"{FINETUNE_CONFIG} lowercase {json.dumps(lowercase)}")
        if isinstance(lowercase, bool)
        else None
    )
    saved = keras_saved_config(model)
    return PretrainedSource(
        path=folder,
        kind="finetune_output",
        config=_keras_encoder_config(saved, model),
        weights=model,
        vocab_file=_vocab_beside(folder),
        stated_casing=stated,
        tokenizer_options=_saved_tokenizer_options(saved),
    )


def _vocab_beside(folder: str) -> str | None:
    path = os.path.join(folder, VOCAB)
    return path if os.path.exists(path) else None


# === .keras files: read as the zip they are, so no model is built here ===


def _keras_file(path: str) -> PretrainedSource:
    if not os.path.exists(path):
        raise FileNotFoundError(f"pretrained checkpoint not found: {path}")
    saved = keras_saved_config(path)
    lowercase = _saved_lowercase(saved)
    stated = (
        None
        if lowercase is None
        else Casing(lowercase, f"{os.path.basename(path)} saved lowercase {json.dumps(lowercase)}")
    )
    return PretrainedSource(
        path=path,
        kind="keras",
        config=_keras_encoder_config(saved, path),
        weights=path,
        vocab_file=_vocab_beside(os.path.dirname(path) or "."),
        stated_casing=stated,
        tokenizer_options=_saved_tokenizer_options(saved),
    )


def keras_saved_config(path: str) -> dict[str, Any]:
    """The model config a `.keras` file saved (its config.json), without building it."""
    try:
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a Keras .keras file ({e})") from None


def _keras_encoder_config(saved: dict[str, Any], path: str) -> BertConfig:
    """The BertConfig of the saved BertEncoder: the model itself or its `encoder`."""
    for candidate in (saved, saved.get("config", {}).get("encoder")):
        if isinstance(candidate, dict) and candidate.get("class_name") == "BertEncoder":
            return BertConfig.from_dict(candidate["config"]["config"], source=path)
    raise ValueError(
        f"{path}: holds a {saved.get('class_name')}, neither a BertEncoder "
        "nor a model with an `encoder`"
    )


def _saved_preprocessor(node: Any) -> dict[str, Any] | None:
    """The config saved inside the model that holds a `lowercase` setting (a
    preprocessor's), if any."""
    if isinstance(node, dict):
        if isinstance(node.get("lowercase"), bool):
            return node
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _saved_preprocessor(child)
        if found is not None:
            return found
    return None


def _saved_lowercase(node: Any) -> bool | None:
    """A `lowercase` setting saved inside the model (a preprocessor's), if any."""
    found = _saved_preprocessor(node)
    return None if found is None else found["lowercase"]


def _saved_tokenizer_options(node: Any) -> dict[str, Any]:
    """The saved preprocessor's strip_accents / special_tokens (absent in models
    saved before it had them: the original rule)."""
    found = _saved_preprocessor(node) or {}
    return {key: found[key] for key in ("strip_accents", "special_tokens") if key in found}
