"""ModernBertMaskedLM: a ModernBertEncoder with HuggingFace's masked-LM head,
for filling in masked tokens or going on pretraining from a checkpoint.

Legend for shape comments: B = batch, T = sequence length, V = vocabulary size.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import numpy as np

from keras_bert.checkpoints import modernbert as checkpoint
from keras_bert.layers.modernbert_heads import ModernBertMaskedLMHead
from keras_bert.models.modernbert import (
    MODERNBERT_INPUTS,
    ModernBertEncoder,
    load_encoder_and_heads,
    prediction_head_options,
)
from keras_bert.models.user_inputs import check_model_keywords


def encoder_and_masked_lm_head(
    encoder: ModernBertEncoder | dict,
) -> tuple[ModernBertEncoder, ModernBertMaskedLMHead]:
    """The encoder (a serialized one rebuilt; anything else refused) and a new
    masked-LM head on it, its output layer the encoder's token embeddings."""
    if isinstance(encoder, dict):
        encoder = keras.saving.deserialize_keras_object(encoder)
    if not isinstance(encoder, ModernBertEncoder):
        raise TypeError(
            "encoder must be a ModernBertEncoder (or its serialized config), "
            f"got {type(encoder).__name__}"
        )
    head = ModernBertMaskedLMHead(
        encoder.token_embedding,
        decoder_bias=encoder.config.decoder_bias,
        dtype=encoder.token_embedding.dtype_policy,
        fast_kernels=encoder.fast_kernels,
        name="masked_lm",
        **prediction_head_options(encoder.config),
    )
    return encoder, head


@keras.saving.register_keras_serializable(package="keras_bert")
class ModernBertMaskedLM(keras.Model):
    """Logits (B, T, V), float32, at every position, from `input_ids` and
    `input_mask`: dense, activation and LayerNorm on the encoder's
    `sequence_output`, then the token embedding table (tied) and a bias."""

    def __init__(self, encoder: ModernBertEncoder | dict, **kwargs: Any) -> None:
        check_model_keywords(type(self), kwargs)

        # === Layers ===
        encoder, head = encoder_and_masked_lm_head(encoder)

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in MODERNBERT_INPUTS
        }
        logits = head(encoder(inputs)["sequence_output"])  # (B, T, V)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.masked_lm_head = head

    def get_config(self) -> dict:
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config: dict) -> ModernBertMaskedLM:
        return cls(**config)

    @classmethod
    def from_pretrained(
        cls, folder: str, dtype: str | keras.DTypePolicy | None = None
    ) -> ModernBertMaskedLM:
        """A HuggingFace `ModernBertForMaskedLM` folder: the encoder and the
        head (`head.*`, `decoder.bias`; the decoder's weight is the tied table)."""
        encoder, heads, raw_config = load_encoder_and_heads(folder, dtype)
        model = cls(encoder)
        load_masked_lm_head(model.masked_lm_head, heads, raw_config, folder, model=cls.__name__)
        return model


def load_masked_lm_head(
    head: ModernBertMaskedLMHead,
    heads: Mapping[str, np.ndarray],
    raw_config: Mapping[str, Any],
    folder: str,
    model: str,
    required: bool = True,
) -> list[str]:
    """Assigns a `ModernBertForMaskedLM` folder's head tensors (`heads`, what
    the encoder left) to `head`, all or nothing; returns their names. Not
    `required`: a folder without them (a `ModernBertModel`'s) leaves the head
    as drawn, and gives []."""
    targets = checkpoint.masked_lm_head_variables(head)
    if not required and not any(name in heads for name in targets):
        return []
    if raw_config.get("tie_word_embeddings") is False:
        raise ValueError(
            f"{folder}: tie_word_embeddings is false; {model} ties its "
            "output layer to the token embeddings"
        )
    checkpoint.assign(targets, heads, source=folder)
    return sorted(targets)
