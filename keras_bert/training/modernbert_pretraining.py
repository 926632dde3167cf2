"""What the pretraining driver does differently for `architecture: modernbert`.

`keras-bert pretrain` (`keras_bert.training.pretraining`) runs one loop for
every architecture: the same records, strategy, optimizer, checkpoints, exact
resume and log. A ModernBERT-style run differs in three places, all here:
its config fields (`modernbert_config`; the masked LM alone, `objective:
none`), its model (`ModernBertPretrainer`, fresh or from `init_checkpoint`)
and its export (a HuggingFace `ModernBertForMaskedLM` folder, which
`ModernBertEncoder.from_pretrained` reads for fine-tuning).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import keras

from keras_bert import text_files
from keras_bert.checkpoints.modernbert import write_masked_lm_folder
from keras_bert.models.modernbert import ModernBertEncoder
from keras_bert.models.modernbert_pretrainer import ModernBertPretrainer
from keras_bert.modernbert_config import ModernBertConfig

ARCHITECTURES = ("bert", "modernbert")
MODERNBERT = "modernbert"
_FIELD = "config field modernbert_config"


def check_architecture_fields(config: Any) -> None:
    """The `PretrainConfig` fields that depend on `architecture`: errors name the field."""
    if config.architecture not in ARCHITECTURES:
        raise ValueError(
            f"config field architecture must be one of {ARCHITECTURES}, got {config.architecture!r}"
        )
    if config.architecture != MODERNBERT:
        if config.modernbert_config is not None:
            raise ValueError(
                "config field modernbert_config applies to architecture modernbert only "
                f"(architecture is {config.architecture!r}); a BERT run reads config field model"
            )
        return
    defaults = {field.name: field.default for field in dataclasses.fields(config)}
    if config.objective != "none":
        # ModernBERT (as RoBERTa) pretrains with the masked LM alone: its
        # encoder has no next-sentence head, and its own ids have no next token.
        raise ValueError(
            f"config field objective is {config.objective!r}; architecture modernbert "
            "pretrains with the masked LM alone: set objective: none (--set objective=none)"
        )
    if config.attention is not None:
        raise ValueError(
            "config field attention applies to architecture bert only; a ModernBERT-style "
            "encoder's attention is set by modernbert_config (global_attn_every_n_layers, "
            "local_attention)"
        )
    if config.model != defaults["model"]:
        raise ValueError(
            f"config field model ({config.model!r}) names a BERT config; with architecture "
            "modernbert give modernbert_config (a preset such as base, a config JSON file "
            "or its fields)"
        )
    if config.init_checkpoint and config.modernbert_config is not None:
        raise ValueError(
            "config fields init_checkpoint and modernbert_config are both given: a run "
            "from init_checkpoint takes the checkpoint's config.json; give one of them"
        )


def modernbert_config_of(config: Any) -> ModernBertConfig:
    """The run's ModernBertConfig: `modernbert_config` a preset name (null:
    base), a JSON file (its fields, or a HuggingFace config.json) or the
    fields; a bad one is refused naming the field."""
    value = "base" if config.modernbert_config is None else config.modernbert_config
    try:
        if isinstance(value, dict):
            return ModernBertConfig.from_dict(value, source="its fields")
        if not value.endswith(".json"):
            return ModernBertConfig.preset(value)
        values = json.loads(text_files.read_text(value, missing="no such file"))
        if not isinstance(values, dict):
            raise ValueError(f"{value} holds no JSON object")
        return ModernBertConfig.from_dict(values, source=value)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{_FIELD}: {e}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{_FIELD}: {value} is not valid JSON ({e})") from None
    except ValueError as e:
        raise ValueError(f"{_FIELD}: {e}") from None


def build_pretrainer(config: Any, dtype: str | keras.DTypePolicy | None) -> ModernBertPretrainer:
    """The run's ModernBertPretrainer (inside the current strategy scope):
    from `init_checkpoint` (a HuggingFace ModernBERT folder, or an earlier
    run's export/) or fresh from `modernbert_config`."""
    if config.init_checkpoint:
        return ModernBertPretrainer.from_pretrained(config.init_checkpoint, dtype=dtype)
    return ModernBertPretrainer(ModernBertEncoder(modernbert_config_of(config), dtype=dtype))


def export(pretrainer: ModernBertPretrainer, directory: str) -> str:
    """The run's export/: a HuggingFace `ModernBertForMaskedLM` folder, for
    `ModernBertEncoder.from_pretrained` (fine-tuning) and the next phase's
    `init_checkpoint`."""
    return write_masked_lm_folder(directory, pretrainer.encoder, pretrainer.masked_lm_head)
