"""ModernBertElectraPretrainer: a ModernBertEncoder pretrained with ELECTRA's
replaced-token detection (Clark et al., 2020), as DeBERTaV3 (He et al., 2021)
sizes its generator: as wide as the discriminator, half as deep.

The generator is a ModernBERT-style stack of its own (blocks, final LayerNorm,
HuggingFace's masked-LM head) on the discriminator's token embeddings and
their LayerNorm (the same variables; its output layer the same table), and
fills the masked positions with ids sampled from its softmax; the
discriminator, the ModernBertEncoder being pretrained, tells at every real
token whether it is the original (`ReplacedTokenHead`). The samples, their
labels, the loss (generator masked LM + discriminator_weight x sigmoid
cross-entropy over the real tokens), the metrics and the training step are
ELECTRA's (`keras_bert.models.electra_pretrainer.ReplacedTokenDetection`,
`keras_bert.models.update_step`): only the encoders differ.

    pretrainer = ModernBertElectraPretrainer(ModernBertEncoder(config))
    pretrainer.compile(optimizer=..., gradient_accumulation_steps=2)
    pretrainer.fit(dataset)   # the pretraining dataset's dicts, no y

Its export (`keras_bert.training.modernbert_pretraining.export`) is a
HuggingFace ModernBERT folder of the discriminator, which
`ModernBertEncoder.from_pretrained` reads, with the generator as a
`ModernBertForMaskedLM` folder in `generator/`; `from_pretrained` reads both
back (the next phase).

Legend for shape comments: B = batch, T = sequence length, P = masked
positions per sequence, H = hidden size, V = vocabulary size.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

import keras
import tensorflow as tf

from keras_bert import features
from keras_bert.checkpoints import modernbert as checkpoint
from keras_bert.config_fields import EncoderConfigFields
from keras_bert.layers.electra_heads import ReplacedTokenHead, ReplacedTokens
from keras_bert.layers.packing import TokenPacking
from keras_bert.models.electra_pretrainer import (
    GENERATOR_FOLDER,
    ReplacedTokenDetection,
    ReplacedTokenParts,
    check_discriminator_weight,
    generator_on_shared_embeddings,
    replaced_token_outputs,
)
from keras_bert.models.modernbert import (
    MODERNBERT_INPUTS,
    ModernBertEncoder,
    ModernBertLayers,
    load_encoder_and_heads,
    modernbert_forward,
)
from keras_bert.models.modernbert_masked_lm import encoder_and_masked_lm_head, load_masked_lm_head
from keras_bert.models.unpadded import may_pack_padding
from keras_bert.models.update_step import UpdateStep
from keras_bert.modernbert_config import ModernBertConfig

MODEL_INPUTS = MODERNBERT_INPUTS + features.MASKED_LM_FEATURES
# The discriminator's layers the generator reads (their variables, one copy),
# and their tensors' HuggingFace names (`embeddings.tok_embeddings.weight`, ...).
SHARED_EMBEDDING_LAYERS = ("token_embedding", "embeddings_layer_norm")
SHARED_TENSORS_PREFIX = "embeddings."


def generator_config(
    discriminator: ModernBertConfig, num_layers: int | None = None
) -> ModernBertConfig:
    """The generator of a discriminator: its config, `num_layers` blocks
    (default: half the discriminator's, at least one; DeBERTaV3's choice)."""
    if num_layers is None:
        num_layers = max(1, discriminator.num_hidden_layers // 2)
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
        raise ValueError(f"generator_num_layers must be a positive integer, got {num_layers!r}")
    return dataclasses.replace(discriminator, num_hidden_layers=num_layers)


def _generator_model(layers: ModernBertLayers) -> keras.Model:
    """The generator's encoder as a functional model of its own inside the
    pretrainer's (its layers have ModernBertEncoder's names, which the
    discriminator's have too): input_ids, input_mask -> the final
    LayerNorm's output (B, T, H)."""
    inputs = {
        name: keras.Input(shape=(None,), dtype="int32", name=name) for name in MODERNBERT_INPUTS
    }
    outputs = modernbert_forward(layers, inputs)["sequence_output"]
    return keras.Model(inputs=inputs, outputs=outputs, name="generator")


def _forward(parts, inputs, draws=None, training=None, packing=None):
    """Generator, samples, discriminator: the model's outputs (see the class);
    with `packing`, the discriminator skips the padding (its loss reads only
    real tokens; `keras_bert.models.unpadded`)."""
    encoder_inputs = {name: inputs[name] for name in MODERNBERT_INPUTS}
    generated = parts.generator_model(encoder_inputs, training=training)  # (B, T, H)
    masked_lm_logits = parts.generator_head(generated, inputs["masked_lm_positions"])  # (B, P, V)

    def discriminate(replaced_ids):
        return modernbert_forward(
            parts.encoder,
            {**encoder_inputs, "input_ids": replaced_ids},
            packing=packing,
            training=training,
        )["sequence_output"]  # (B, T, H), the padding 0 if packed

    return replaced_token_outputs(parts, inputs, masked_lm_logits, discriminate, draws)


@keras.saving.register_keras_serializable(package="keras_bert")
class ModernBertElectraPretrainer(
    ReplacedTokenDetection, UpdateStep, EncoderConfigFields, keras.Model
):
    """ELECTRA's generator and discriminator around a ModernBertEncoder,
    trained together.

    `encoder`: the discriminator, the ModernBertEncoder being pretrained
    (what fine-tuning starts from). `generator_num_layers`: the generator's
    blocks (default: half the encoder's; `generator_config`), as wide as the
    encoder, on its token embeddings and their LayerNorm.
    `discriminator_weight`: the discriminator loss's weight (ELECTRA's 50).

    Inputs: `input_ids`, `input_mask` (B, T) and `masked_lm_positions`,
    `masked_lm_ids`, `masked_lm_weights` (B, P). Outputs: `masked_lm_logits`
    (B, P, V) float32 (the generator's), `replaced_ids` (B, T) (the
    discriminator's input), `replaced_token_labels` (B, T) (1: replaced)
    and `replaced_token_logits` (B, T) float32. Metrics: masked_lm_loss,
    masked_lm_accuracy (the generator's), discriminator_loss,
    discriminator_accuracy and replaced_fraction (of the real tokens).
    """

    def __init__(
        self,
        encoder: ModernBertEncoder | dict,
        generator_num_layers: int | None = None,
        discriminator_weight: float = 50.0,
        **kwargs: Any,
    ) -> None:
        # The generator's head is tied to the shared token embeddings.
        encoder, generator_predictions = encoder_and_masked_lm_head(encoder)
        config = encoder.config
        generator = generator_config(config, generator_num_layers)
        check_discriminator_weight(discriminator_weight)

        # === Layers ===
        # Its own dropout, blocks and final LayerNorm (and pooler, never called).
        generator_layers = generator_on_shared_embeddings(
            encoder, generator, ModernBertLayers, SHARED_EMBEDDING_LAYERS
        )
        replaced_tokens = ReplacedTokens(name="replaced_tokens")
        discriminator_predictions = ReplacedTokenHead(
            config.hidden_size,
            activation=config.hidden_activation,
            initializer_range=config.initializer_range,
            dtype=encoder.dtype_policy,
            name="discriminator_predictions",
        )

        # === Functional Model === (ReplacedTokenDetection: the inputs -> _forward)
        super().__init__(
            ReplacedTokenParts(
                encoder,
                _generator_model(generator_layers),
                generator_predictions,
                replaced_tokens,
                discriminator_predictions,
            ),
            generator_layers,
            discriminator_weight,
            **kwargs,
        )

        # === Config ===
        self.generator_num_layers = generator_num_layers
        self.generator_config = generator

    pretrainer_inputs = MODEL_INPUTS
    graph_forward = staticmethod(_forward)

    def training_outputs(
        self, inputs: Mapping[str, tf.Tensor], draws: tf.Tensor | None
    ) -> dict[str, tf.Tensor]:
        """The forward pass of `update_loss`, with the update's draws: the
        discriminator skips the padding where shapes may vary
        (`keras_bert.models.unpadded`), as `ElectraPretrainer`'s."""
        packing = TokenPacking(inputs["input_mask"]) if may_pack_padding(self) else None
        return _forward(self, inputs, draws=draws, training=True, packing=packing)

    # === Config ===

    config_fields = ("generator_num_layers", "discriminator_weight", "name")

    @classmethod
    def from_pretrained(
        cls,
        folder: str,
        generator_num_layers: int | None = None,
        discriminator_weight: float = 50.0,
        dtype: str | keras.DTypePolicy | None = None,
    ) -> ModernBertElectraPretrainer:
        """The discriminator of a HuggingFace ModernBERT folder (its
        replaced-token head too where the folder has it: a keras-bert export);
        the generator from the folder's `generator/` (a keras-bert export,
        an earlier phase), else a fresh one of `generator_num_layers`. The
        loaded head names are in `model.loaded_head_weights`."""
        encoder, heads, _ = load_encoder_and_heads(folder, dtype)
        generator_folder = os.path.join(folder, GENERATOR_FOLDER)
        saved = None
        if os.path.exists(os.path.join(generator_folder, "config.json")):
            saved = checkpoint.read_config(generator_folder)
            layers = saved[0].num_hidden_layers
            if generator_num_layers not in (None, layers):
                raise ValueError(
                    f"generator_num_layers is {generator_num_layers}, but the generator in "
                    f"{generator_folder} has {layers} layers; leave it unset to go on with that one"
                )
            generator_num_layers = layers
            if saved[0] != generator_config(encoder.config, layers):
                raise ValueError(
                    f"{generator_folder}: the generator's config.json differs from the "
                    "discriminator's in more than num_hidden_layers; the generator reads "
                    "the discriminator's embeddings and is as wide"
                )
        model = cls(
            encoder,
            generator_num_layers=generator_num_layers,
            discriminator_weight=discriminator_weight,
        )
        model.loaded_head_weights = []
        targets = checkpoint.replaced_token_head_variables(model.discriminator_head)
        if any(name in heads for name in targets):
            checkpoint.assign(targets, heads, source=folder)
            model.loaded_head_weights = sorted(targets)
        if saved is not None:
            tensors = checkpoint.read_tensors(generator_folder)
            generator_targets = {
                name: target
                for name, target in checkpoint.encoder_variables(model.generator_layers).items()
                if not name.startswith(SHARED_TENSORS_PREFIX)  # the discriminator's, loaded
            }
            checkpoint.assign(generator_targets, tensors, source=generator_folder)
            model.loaded_head_weights += load_masked_lm_head(
                model.generator_head, tensors, saved[1], generator_folder, cls.__name__
            )
        return model
