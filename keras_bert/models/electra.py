"""ELECTRA (Clark et al., 2020): its discriminator and generator around a BertEncoder.

ELECTRA's encoder is BERT's, its embeddings narrower than its blocks where
`BertConfig.embedding_size` says so (a Dense projects them up), so
`BertEncoder.from_pretrained` reads an ELECTRA checkpoint as it reads BERT's.
These two models add ELECTRA's heads:

  ElectraDiscriminator  replaced-token detection: one logit per token
                        (`replaced_token_logits`, B x T; positive: replaced).
  ElectraGenerator      the small masked LM that proposes the replacements:
                        logits over the vocabulary at every position
                        (`masked_lm_logits`, B x T x V), its output layer the
                        word embeddings (tied, ELECTRA's) or a table of its own.

Both take `input_ids`, `input_mask`, `segment_ids` and read HuggingFace
`ElectraForPreTraining` / `ElectraForMaskedLM` folders and google-research/electra
checkpoints (`from_pretrained`); the encoder is `model.encoder`.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
V = vocabulary size.
"""

from __future__ import annotations

import os
from typing import Any

import keras

from keras_bert.checkpoints.load import (
    assign_head_weights,
    discriminator_head_variables,
    generator_head_variables,
    read_json,
)
from keras_bert.checkpoints.source import PretrainedSource, resolve
from keras_bert.config_fields import EncoderConfigFields
from keras_bert.features import ENCODER_INPUTS
from keras_bert.layers.electra_heads import ReplacedTokenHead
from keras_bert.layers.pretraining_heads import MaskedLMHead
from keras_bert.models.encoder import BertEncoder, load_encoder_and_heads


def checked_encoder(encoder: BertEncoder | dict, model: str) -> BertEncoder:
    """`encoder`, rebuilt if it is a serialized config; anything else refused naming `model`."""
    if isinstance(encoder, dict):
        encoder = keras.saving.deserialize_keras_object(encoder)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(
            f"{model} needs a BertEncoder (or its serialized config), got {type(encoder).__name__}"
        )
    return encoder


def _encoder_inputs() -> dict[str, keras.KerasTensor]:
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in ENCODER_INPUTS}


def _source(path: str | PretrainedSource) -> PretrainedSource:
    return path if isinstance(path, PretrainedSource) else resolve(path)


def discriminator_head(encoder: BertEncoder) -> ReplacedTokenHead:
    """ELECTRA's replaced-token head on `encoder`'s outputs."""
    config = encoder.config
    return ReplacedTokenHead(
        config.hidden_size,
        activation=config.hidden_act,
        initializer_range=config.initializer_range,
        dtype=encoder.dtype_policy,
        name="discriminator_predictions",
    )


def generator_head(
    encoder: BertEncoder, output_table: keras.layers.Embedding, activation: str
) -> MaskedLMHead:
    """ELECTRA's generator head (BERT's masked-LM head) on `encoder`'s outputs,
    its output layer `output_table` (V, E)."""
    return MaskedLMHead(
        output_table,
        activation=activation,
        initializer_range=encoder.config.initializer_range,
        dtype=encoder.dtype_policy,
        fast_kernels=encoder.fast_kernels,
        name="generator_predictions",
    )


class _AroundEncoder(EncoderConfigFields, keras.Model):
    """What both ELECTRA models save: their encoder whole, then their fields."""


@keras.saving.register_keras_serializable(package="keras_bert")
class ElectraDiscriminator(_AroundEncoder):
    """ELECTRA's discriminator: a BertEncoder and `ReplacedTokenHead`.

    Outputs {"replaced_token_logits": (B, T) float32}: for each token, the
    logit that the generator replaced it (padding's logits mean nothing).
    """

    def __init__(self, encoder: BertEncoder | dict, **kwargs: Any) -> None:
        encoder = checked_encoder(encoder, "ElectraDiscriminator")

        # === Layers ===
        head = discriminator_head(encoder)

        # === Functional Model ===
        inputs = _encoder_inputs()
        sequence_output = encoder(inputs)["sequence_output"]  # (B, T, H)
        outputs = {"replaced_token_logits": head(sequence_output)}  # (B, T)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.discriminator_head = head

    config_fields = ("name",)

    @classmethod
    def from_pretrained(
        cls, path: str | PretrainedSource, dtype: str | keras.DTypePolicy | None = None
    ) -> ElectraDiscriminator:
        """The discriminator of any source `BertEncoder.from_pretrained` reads:
        the encoder always, the head where the source has it (its names in
        `model.loaded_head_weights`; otherwise it starts fresh)."""
        source = _source(path)
        encoder, heads = load_encoder_and_heads(source, dtype)
        model = cls(encoder)
        model.loaded_head_weights = assign_head_weights(
            model, heads, source=source.path, targets=discriminator_head_variables(model)
        )
        return model


@keras.saving.register_keras_serializable(package="keras_bert")
class ElectraGenerator(_AroundEncoder):
    """ELECTRA's generator: a BertEncoder and BERT's masked-LM head (dense to
    the embedding width, activation, LayerNorm, then the output layer + bias).

    `tie_embeddings`: the output layer is the encoder's word embeddings
    (ELECTRA's, HuggingFace's default), else a (V, E) table of its own.
    `head_activation`: the head's activation, by default the encoder's
    `hidden_act`; HuggingFace's generator always computes the exact "gelu".
    Outputs {"masked_lm_logits": (B, T, V) float32}, at every position.
    """

    def __init__(
        self,
        encoder: BertEncoder | dict,
        tie_embeddings: bool = True,
        head_activation: str | None = None,
        **kwargs: Any,
    ) -> None:
        encoder = checked_encoder(encoder, "ElectraGenerator")
        config = encoder.config

        # === Layers ===
        output_table = encoder.token_embedding
        if not tie_embeddings:
            output_table = keras.layers.Embedding(
                config.vocab_size,
                config.embedding_width,
                embeddings_initializer=keras.initializers.TruncatedNormal(
                    stddev=config.initializer_range
                ),
                dtype=encoder.dtype_policy,
                name="output_embedding",
            )
        head = generator_head(encoder, output_table, head_activation or config.hidden_act)

        # === Functional Model ===
        inputs = _encoder_inputs()
        sequence_output = encoder(inputs)["sequence_output"]  # (B, T, H)
        # Without positions the head reads every row: (B, T, V).
        outputs = {"masked_lm_logits": head(sequence_output)}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.tie_embeddings = tie_embeddings
        self.head_activation = head_activation
        self.generator_head = head

    config_fields = ("tie_embeddings", "head_activation", "name")

    @classmethod
    def from_pretrained(
        cls, path: str | PretrainedSource, dtype: str | keras.DTypePolicy | None = None
    ) -> ElectraGenerator:
        """The generator of any source `BertEncoder.from_pretrained` reads:
        the encoder always, the head where the source has it (its names in
        `model.loaded_head_weights`). A HuggingFace folder's config says
        whether its output layer is tied (`tie_word_embeddings`)."""
        source = _source(path)
        encoder, heads = load_encoder_and_heads(source, dtype)
        tie_embeddings, head_activation = True, None
        if source.kind == "huggingface":
            hf_config = read_json(os.path.join(os.path.dirname(source.weights), "config.json"))
            tie_embeddings = hf_config.get("tie_word_embeddings", True) is not False
            head_activation = "gelu"  # ElectraGeneratorPredictions' fixed activation
        model = cls(encoder, tie_embeddings=tie_embeddings, head_activation=head_activation)
        model.loaded_head_weights = assign_head_weights(
            model, heads, source=source.path, targets=generator_head_variables(model)
        )
        return model
