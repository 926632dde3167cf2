"""BertConfig: the original `bert_config.json`, as a validated dataclass.

Field names are exactly those of google-research/bert, so Google's config files
load unchanged. HuggingFace `config.json` files are read too (same field names,
plus a few extra keys, `keras_bert.checkpoints.load.read_huggingface_config`).

One name means two functions: google-research/bert's modeling.py computes
"gelu" with the tanh approximation, HuggingFace (and Keras) the exact erf form.
In memory and in HuggingFace's `config.json`, "gelu" is the exact form and
"gelu_approximate" the tanh one; in a `bert_config.json`, the original's file,
"gelu" is the original's tanh form unless the file says `"exact_gelu": true`,
which keras_bert writes for an exact-GELU model (the original code ignores the
field and runs its tanh form, within about 1e-3), so its own files read back
as they were trained.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping, NoReturn

from keras_bert import safe_output, text_files

ACTIVATIONS = ("gelu", "gelu_approximate", "relu", "silu", "tanh")
# bidirectional: BERT; left_to_right: each position attends to itself and the
# earlier ones only (the paper's "LTR" ablation, a GPT-style causal mask).
ATTENTIONS = ("bidirectional", "left_to_right")

# HuggingFace and the original code use other spellings for the same functions.
_ACTIVATION_SPELLINGS = {
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "swish": "silu",
}
# In a bert_config.json: this field true means its "gelu" is the exact form.
EXACT_GELU_FIELD = "exact_gelu"
# The fields a config file must name (the others default to BERT-base's);
# each, like the position and segment counts, a positive integer.
_SHAPE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)


class CheckedConfig:
    """The checks an encoder's config dataclass runs in `__post_init__`
    (`BertConfig`, `ModernBertConfig`), each error naming the class and the
    field, and the head size."""

    hidden_size: int
    num_attention_heads: int

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def _refuse(self, name: str, problem: str) -> NoReturn:
        raise ValueError(f"{type(self).__name__}.{name} {problem}")

    def _normalize_activations(self, *names: str) -> None:
        """Each activation field under its one spelling (`_ACTIVATION_SPELLINGS`)."""
        for name in names:
            value = getattr(self, name)
            object.__setattr__(self, name, _ACTIVATION_SPELLINGS.get(value, value))

    def _check_one_of(self, name: str, choices: tuple[str, ...]) -> None:
        if getattr(self, name) not in choices:
            self._refuse(name, f"{getattr(self, name)!r} is not one of {choices}")

    def _check_positive_ints(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                self._refuse(name, f"must be a positive integer, got {value!r}")

    def _check_heads_divide_hidden_size(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            self._refuse(
                "hidden_size",
                f"({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})",
            )

    def _check_probabilities(self, *names: str) -> None:
        for name in names:
            if not 0.0 <= getattr(self, name) < 1.0:
                self._refuse(name, f"must be in [0, 1), got {getattr(self, name)!r}")

    def _check_positive(self, *names: str) -> None:
        for name in names:
            if getattr(self, name) <= 0:
                self._refuse(name, f"must be positive, got {getattr(self, name)!r}")


@dataclasses.dataclass(frozen=True)
class BertConfig(CheckedConfig):
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    attention: str = "bidirectional"  # not an original field: written only when not the default
    # ELECTRA's field: the width of the embedding tables when it differs from
    # hidden_size (ELECTRA-Small: 128 for 256), a Dense projecting them up after
    # the embeddings' LayerNorm. None (BERT) is hidden_size, without projection;
    # written only when set.
    embedding_size: int | None = None

    def __post_init__(self):
        self._normalize_activations("hidden_act")
        self._check_positive_ints(*_SHAPE_FIELDS, "max_position_embeddings", "type_vocab_size")
        self._check_heads_divide_hidden_size()
        self._check_one_of("hidden_act", ACTIVATIONS)
        self._check_probabilities("hidden_dropout_prob", "attention_probs_dropout_prob")
        if self.embedding_size is not None:
            if (
                not isinstance(self.embedding_size, int)
                or isinstance(self.embedding_size, bool)
                or self.embedding_size <= 0
            ):
                raise ValueError(
                    "BertConfig.embedding_size must be a positive integer or None, "
                    f"got {self.embedding_size!r}"
                )
            if self.embedding_size == self.hidden_size:  # one spelling of "no projection"
                object.__setattr__(self, "embedding_size", None)
        self._check_one_of("attention", ATTENTIONS)
        self._check_positive("initializer_range")

    @property
    def embedding_width(self) -> int:
        """The width of the embedding tables: embedding_size, else hidden_size."""
        return self.embedding_size or self.hidden_size

    # === Presets ===

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> BertConfig:
        """A named size: `tiny`, `mini`, `small`, `medium`, `base`, `large` or
        one of Google's 24 small BERTs by release name (`L-4_H-256_A-4`)."""
        if name not in PRESETS:
            raise ValueError(f"Unknown BERT preset {name!r}; known presets: {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})

    # === JSON ===

    def to_dict(self) -> dict[str, Any]:
        """The fields ("gelu" the exact GELU); `attention` only when not
        bidirectional, `embedding_size` only when set. `to_json_file` writes
        them as the original's file."""
        values = dataclasses.asdict(self)
        if values["attention"] == "bidirectional":
            del values["attention"]
        if values["embedding_size"] is None:
            del values["embedding_size"]
        return values

    @classmethod
    def from_dict(
        cls, values: Mapping[str, Any], source: str | os.PathLike = "config"
    ) -> BertConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        missing = [name for name in _SHAPE_FIELDS if name not in values]
        if missing:
            raise ValueError(f"{source}: missing field(s) {missing}")
        return cls(**{k: v for k, v in values.items() if k in known})

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> BertConfig:
        """Reads an original `bert_config.json` (its "gelu" the original's tanh
        form, unless `"exact_gelu": true`) or a HuggingFace `config.json` (named
        so, or with HuggingFace's `model_type`: its "gelu" the exact form)."""
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        try:
            values = json.loads(
                text_files.read_text(os.fspath(path), missing="BERT config file not found")
            )
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}")
        if os.path.basename(path) == "config.json" or "model_type" in values:
            return cls.from_dict(values, source=path)
        return cls.from_dict(original_activation(values), source=path)

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes the original `bert_config.json`: the exact GELU as "gelu" with
        `"exact_gelu": true`, the tanh form as the original's "gelu"."""
        values = self.to_dict()
        if values["hidden_act"] == "gelu":
            values[EXACT_GELU_FIELD] = True
        elif values["hidden_act"] == "gelu_approximate":
            values["hidden_act"] = "gelu"
        safe_output.write_json(os.fspath(path), values, sort_keys=True)


def original_activation(values: Mapping[str, Any]) -> dict[str, Any]:
    """A bert_config.json's fields with its "gelu" named as BertConfig names
    the function the original computes: the tanh form ("gelu_approximate"),
    unless the file marks the exact one (`"exact_gelu": true`, written by
    `BertConfig.to_json_file`)."""
    values = dict(values)
    if values.get("hidden_act") == "gelu" and values.get(EXACT_GELU_FIELD) is not True:
        values["hidden_act"] = "gelu_approximate"
    return values


def _sized(layers, hidden):
    return dict(
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden,
    )


PRESETS = {
    "tiny": _sized(2, 128),
    "mini": _sized(4, 256),
    "small": _sized(4, 512),
    "medium": _sized(8, 512),
    "base": _sized(12, 768),
    "large": _sized(24, 1024),
}
# Google's grid of smaller BERTs (Turc et al., 2019): L in {2..12}, H in {128..768}.
for _layers in (2, 4, 6, 8, 10, 12):
    for _hidden in (128, 256, 512, 768):
        PRESETS[f"L-{_layers}_H-{_hidden}_A-{_hidden // 64}"] = _sized(_layers, _hidden)
