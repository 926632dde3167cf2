"""ModernBertConfig: the shape and settings of a ModernBERT-style encoder, a dataclass.

ModernBERT (Warner et al., 2024) keeps BERT's bidirectional encoder and
changes the block: LayerNorm before attention and the feed-forward layer (and
once at the end), no biases, a GeGLU feed-forward layer, rotary position
embeddings instead of learned ones, and attention that is global only every
few layers, local (a sliding window) in between. Field names are
HuggingFace's `ModernBertConfig`'s, so a `config.json` reads unchanged
(`from_dict` also takes its newer `layer_types` / `rope_parameters` form).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

# The activations BertConfig knows, under HuggingFace's spellings too (one
# table for both encoders: "gelu" the exact form, "gelu_pytorch_tanh" the tanh one).
from keras_bert.config import ACTIVATIONS, CheckedConfig

POOLINGS = ("cls", "mean")
_POSITIVE_INTS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "global_attn_every_n_layers",
    "local_attention",
)
_PROBABILITIES = ("embedding_dropout", "attention_dropout", "mlp_dropout")
# HuggingFace's newer config.json names the two kinds of layer so.
GLOBAL_LAYER, LOCAL_LAYER = "full_attention", "sliding_attention"


@dataclasses.dataclass(frozen=True)
class ModernBertConfig(CheckedConfig):
    """Defaults are ModernBERT-base's (answerdotai/ModernBERT-base)."""

    vocab_size: int = 50368
    hidden_size: int = 768
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    intermediate_size: int = 1152  # the GeGLU's width: its input projection is twice this
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192  # what it was trained to; rotary embeddings set no limit
    initializer_range: float = 0.02
    norm_eps: float = 1e-5
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    embedding_dropout: float = 0.0
    attention_dropout: float = 0.0
    mlp_dropout: float = 0.0
    # Layer i attends globally when i % global_attn_every_n_layers == 0, else
    # within local_attention tokens: local_attention // 2 on each side.
    global_attn_every_n_layers: int = 3
    local_attention: int = 128
    global_rope_theta: float = 160_000.0
    local_rope_theta: float = 10_000.0
    # The pooled output (a classifier's input): [CLS] or the mean over real
    # tokens, through dense -> activation -> LayerNorm (HuggingFace's head).
    classifier_pooling: str = "cls"
    classifier_activation: str = "gelu"
    classifier_bias: bool = False
    decoder_bias: bool = True  # the masked-LM output layer's bias
    pad_token_id: int = 50283

    def __post_init__(self):
        self._normalize_activations("hidden_activation", "classifier_activation")
        self._check_one_of("hidden_activation", ACTIVATIONS)
        self._check_one_of("classifier_activation", ACTIVATIONS)
        self._check_positive_ints(*_POSITIVE_INTS)
        self._check_heads_divide_hidden_size()
        if self.head_size % 2:
            raise ValueError(
                f"ModernBertConfig: the head size ({self.head_size}) must be even, "
                "rotary embeddings turn pairs of its dimensions"
            )
        self._check_probabilities(*_PROBABILITIES)
        self._check_positive(
            "initializer_range", "norm_eps", "global_rope_theta", "local_rope_theta"
        )
        self._check_one_of("classifier_pooling", POOLINGS)

    @property
    def window_radius(self) -> int:
        """How far a local layer's query sees on each side (HuggingFace's `sliding_window`)."""
        return self.local_attention // 2

    def is_global_layer(self, index: int) -> bool:
        return index % self.global_attn_every_n_layers == 0

    # === Presets ===

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModernBertConfig:
        """`base` or `large`, the released ModernBERT sizes."""
        if name not in PRESETS:
            raise ValueError(
                f"Unknown ModernBERT preset {name!r}; known presets: {sorted(PRESETS)}"
            )
        return cls(**{**PRESETS[name], **overrides})

    # === JSON ===

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> ModernBertConfig:
        """Our own fields or a HuggingFace `config.json`'s (either of its
        forms; keys that change nothing here, such as token ids, are left)."""
        values = {**values, **_from_huggingface_layout(values, source)}
        known = {f.name for f in dataclasses.fields(cls)}
        missing = [name for name in _POSITIVE_INTS[:5] if name not in values]
        if missing:
            raise ValueError(f"{source}: missing field(s) {missing}")
        return cls(**{k: v for k, v in values.items() if k in known and v is not None})


def _from_huggingface_layout(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """HuggingFace's `layer_types` and `rope_parameters` (transformers 5) as
    `global_attn_every_n_layers` and the two thetas; a layout this encoder
    cannot build (global layers not every n-th, another rotary type) refused."""
    found: dict[str, Any] = {}
    layer_types = values.get("layer_types")
    if layer_types:
        every = next((i for i, kind in enumerate(layer_types) if i and kind == GLOBAL_LAYER), None)
        every = every or len(layer_types) + 1  # one global layer, the first: never again
        expected = [
            GLOBAL_LAYER if i % every == 0 else LOCAL_LAYER for i in range(len(layer_types))
        ]
        if list(layer_types) != expected:
            raise ValueError(
                f"{source}: layer_types {list(layer_types)} are not a global layer every n "
                "layers from the first, the only layout ModernBertConfig describes"
            )
        found["global_attn_every_n_layers"] = every
    rope = values.get("rope_parameters") or {}
    for kind, field in ((GLOBAL_LAYER, "global_rope_theta"), (LOCAL_LAYER, "local_rope_theta")):
        parameters = rope.get(kind)
        if not parameters:
            continue
        if parameters.get("rope_type", "default") != "default":
            raise ValueError(
                f"{source}: rope_parameters[{kind!r}] has rope_type "
                f"{parameters['rope_type']!r}; only the plain rotary embedding ('default') is built"
            )
        if "rope_theta" in parameters:
            found[field] = float(parameters["rope_theta"])
    if values.get("rope_scaling"):
        raise ValueError(f"{source}: rope_scaling {values['rope_scaling']!r} is not supported")
    return found


PRESETS = {
    "base": dict(
        num_hidden_layers=22, hidden_size=768, num_attention_heads=12, intermediate_size=1152
    ),
    "large": dict(
        num_hidden_layers=28, hidden_size=1024, num_attention_heads=16, intermediate_size=2624
    ),
}
