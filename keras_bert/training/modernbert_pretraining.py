"""What the pretraining driver does differently for `architecture: modernbert`.

`keras-bert pretrain` (`keras_bert.training.pretraining`) runs one loop for
every architecture: the same records, strategy, optimizer, checkpoints, exact
resume and log. A ModernBERT-style run differs in three places, all here:
its config fields (`modernbert_config`; `objective: none`, the masked LM
alone, or `objective: electra`, ELECTRA's replaced-token detection with a
generator as wide as the encoder and `generator_num_layers` deep), its model
(`ModernBertPretrainer` or `ModernBertElectraPretrainer`, fresh or from
`init_checkpoint`) and its export (a HuggingFace ModernBERT folder, which
`ModernBertEncoder.from_pretrained` reads for fine-tuning: the masked LM's
`ModernBertForMaskedLM`, or ELECTRA's discriminator with its generator as a
`ModernBertForMaskedLM` in `generator/`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import keras

from keras_bert import safe_output, text_files
from keras_bert.checkpoints.modernbert import (
    masked_lm_head_variables,
    replaced_token_head_variables,
    write_folder_files,
    write_masked_lm_folder,
)
from keras_bert.models.electra_pretrainer import GENERATOR_FOLDER
from keras_bert.models.modernbert import ModernBertEncoder
from keras_bert.models.modernbert_electra import ModernBertElectraPretrainer
from keras_bert.models.modernbert_pretrainer import ModernBertPretrainer
from keras_bert.modernbert_config import ModernBertConfig

ARCHITECTURES = ("bert", "modernbert")
MODERNBERT = "modernbert"
OBJECTIVES = ("none", "electra")
# A ModernBERT-style generator is the encoder's width (DeBERTaV3's choice): only
# its depth is set (generator_num_layers).
SAME_WIDTH = 1.0
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
    if config.objective not in OBJECTIVES:
        # ModernBERT (as RoBERTa) has no next-sentence objective: its encoder
        # has no next-sentence head, and its own ids have no next token.
        raise ValueError(
            f"config field objective is {config.objective!r}; architecture modernbert "
            "pretrains with the masked LM alone or with ELECTRA's replaced-token detection: "
            "set objective: none (--set objective=none) or objective: electra"
        )
    if config.objective == "electra" and config.generator_hidden_size not in (
        defaults["generator_hidden_size"],
        SAME_WIDTH,
    ):
        raise ValueError(
            f"config field generator_hidden_size ({config.generator_hidden_size!r}) applies "
            "to architecture bert only: a ModernBERT-style generator is as wide as the "
            "encoder, and generator_num_layers sets its depth (default: half the encoder's)"
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


def build_pretrainer(
    config: Any, dtype: str | keras.DTypePolicy | None
) -> ModernBertPretrainer | ModernBertElectraPretrainer:
    """The run's pretrainer (inside the current strategy scope), of its
    objective: from `init_checkpoint` (a HuggingFace ModernBERT folder, or an
    earlier run's export/, its generator/ too for ELECTRA) or fresh from
    `modernbert_config`."""
    if config.objective == "electra":
        electra = dict(
            generator_num_layers=config.generator_num_layers,
            discriminator_weight=config.discriminator_weight,
        )
        if config.init_checkpoint:
            return ModernBertElectraPretrainer.from_pretrained(
                config.init_checkpoint, dtype=dtype, **electra
            )
        encoder = ModernBertEncoder(modernbert_config_of(config), dtype=dtype)
        return ModernBertElectraPretrainer(encoder, **electra)
    if config.init_checkpoint:
        return ModernBertPretrainer.from_pretrained(config.init_checkpoint, dtype=dtype)
    return ModernBertPretrainer(ModernBertEncoder(modernbert_config_of(config), dtype=dtype))


def export(pretrainer: ModernBertPretrainer | ModernBertElectraPretrainer, directory: str) -> str:
    """The run's export/: a HuggingFace ModernBERT folder, for
    `ModernBertEncoder.from_pretrained` (fine-tuning) and the next phase's
    `init_checkpoint`. The masked LM's: a `ModernBertForMaskedLM`.
    ELECTRA's: the discriminator (a `ModernBertModel`, its replaced-token
    head beside it under HuggingFace ELECTRA's names), and the generator as a
    `ModernBertForMaskedLM` in `generator/` (its embeddings copies of the
    discriminator's); both written whole or not at all."""
    if not isinstance(pretrainer, ModernBertElectraPretrainer):
        return write_masked_lm_folder(directory, pretrainer.encoder, pretrainer.masked_lm_head)
    with safe_output.replacing(directory, folder=True) as staging:
        write_folder_files(
            staging,
            pretrainer.encoder,
            replaced_token_head_variables(pretrainer.discriminator_head),
            architecture="ModernBertModel",
        )
        write_folder_files(
            os.path.join(staging, GENERATOR_FOLDER),
            pretrainer.generator_layers,
            masked_lm_head_variables(pretrainer.generator_head),
        )
    return directory
