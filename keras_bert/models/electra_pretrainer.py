"""ElectraPretrainer: ELECTRA's replaced-token detection (Clark et al., 2020).

A small generator, a masked LM narrower than the discriminator that reads the
discriminator's own token, position and segment embeddings, fills the masked
positions with ids sampled from its softmax; the discriminator, the
BertEncoder being pretrained, tells at every real token whether it is the
original. The loss of a batch:

    generator masked-LM cross-entropy (averaged with masked_lm_weights)
    + discriminator_weight (50) x sigmoid cross-entropy (averaged over real tokens)

A sample equal to the original counts as original, and the samples carry no
gradient: the generator learns from its masked-LM loss alone.

`compile` + `fit` train it on the dataset dicts `BertPretrainer` reads
(`input_ids`, `input_mask`, `segment_ids` and the `masked_lm_*` features,
from pre-masked records or dynamic masking), with the training step every
keras_bert model has (`keras_bert.models.update_step`: accumulation, loss
scaling, global-batch metrics under tf.distribute). Each update's draws come
from one seed generator, saved in checkpoints with the dropout RNG, and cover
the whole global batch, so a sequence gets the same sample on one device as on
several replicas or micro-batches (`ReplacedTokens.update_draws`).

Legend for shape comments: B = batch, T = sequence length, P = masked
positions per sequence, H = hidden size, V = vocabulary size.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Mapping

import keras
import tensorflow as tf
from keras import ops

from keras_bert import features
from keras_bert.checkpoints.load import (
    POOLER_TENSORS,
    assign_head_weights,
    discriminator_head_variables,
    encoder_variables,
    generator_head_variables,
)
from keras_bert.checkpoints.source import PretrainedSource, resolve
from keras_bert.config import BertConfig
from keras_bert.config_fields import EncoderConfigFields
from keras_bert.kernels.masked_lm_loss import loss_and_prediction
from keras_bert.layers.electra_heads import ReplacedTokenHead, ReplacedTokens
from keras_bert.layers.packing import TokenPacking
from keras_bert.models.electra import checked_encoder, discriminator_head, generator_head
from keras_bert.models.encoder import (
    BertEncoder,
    EncoderLayers,
    encoder_forward,
    load_encoder_and_heads,
)
from keras_bert.models.global_batch import global_weight_sum
from keras_bert.models.pretrainer import LabelsInFeatures, masked_lm_share, model_inputs
from keras_bert.models.unpadded import may_pack_padding
from keras_bert.models.update_step import UpdateStep

MODEL_INPUTS = features.ENCODER_INPUTS + features.MASKED_LM_FEATURES
GENERATOR_INPUTS = features.ENCODER_INPUTS + ("masked_lm_positions",)
# Each update's uniform draws, one per prediction, added to its batch by
# `apply_update` so that micro-batches are cut from them with the rest.
DRAWS = "replacement_draws"
# The embeddings the generator reads from the discriminator (original names).
SHARED_TENSORS = tuple(
    f"bert/embeddings/{name}"
    for name in (
        "word_embeddings",
        "token_type_embeddings",
        "position_embeddings",
        "LayerNorm/gamma",
        "LayerNorm/beta",
    )
)
# Where a keras-bert ELECTRA export keeps its generator (beside the discriminator).
GENERATOR_FOLDER = "generator"


def electra_generator_config(
    discriminator: BertConfig, hidden_size: float = 0.25, num_layers: int | None = None
) -> BertConfig:
    """ELECTRA's generator for a discriminator (google-research/electra's
    `get_generator_config`): `hidden_size` a fraction of the discriminator's,
    heads of 64 dimensions (at least one), a feed-forward 4x as wide,
    `num_layers` (default: the discriminator's); its embeddings the
    discriminator's (projected to its own width where they differ)."""
    if not (isinstance(hidden_size, (int, float)) and 0 < hidden_size <= 1):
        raise ValueError(
            "generator_hidden_size must be a fraction in (0, 1] of the "
            f"discriminator's hidden size, got {hidden_size!r}"
        )
    width = max(1, round(discriminator.hidden_size * hidden_size))
    heads = max(1, width // 64)
    if width % heads:
        raise ValueError(
            f"generator_hidden_size {hidden_size} of {discriminator.hidden_size} gives a width "
            f"of {width}, which {heads} heads of 64 do not divide; pick a fraction giving "
            "a multiple of 64 (or a width below 128)"
        )
    return dataclasses.replace(
        discriminator,
        hidden_size=width,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        num_hidden_layers=num_layers or discriminator.num_hidden_layers,
        embedding_size=discriminator.embedding_width,
    )


def _check_generator(discriminator: BertConfig, generator: BertConfig) -> None:
    """The generator reads the discriminator's embeddings: their shapes must agree."""
    for field, theirs, ours in (
        ("vocab_size", discriminator.vocab_size, generator.vocab_size),
        ("type_vocab_size", discriminator.type_vocab_size, generator.type_vocab_size),
        (
            "max_position_embeddings",
            discriminator.max_position_embeddings,
            generator.max_position_embeddings,
        ),
        ("embedding width", discriminator.embedding_width, generator.embedding_width),
    ):
        if theirs != ours:
            raise ValueError(
                f"ElectraPretrainer: the generator's {field} is {ours}, the "
                f"discriminator's {theirs}; the generator shares the discriminator's "
                "embeddings, so they must agree (electra_generator_config makes one that does)"
            )
    for name, config in (("discriminator", discriminator), ("generator", generator)):
        if config.attention != "bidirectional":
            raise ValueError(
                f"ElectraPretrainer: the {name}'s attention is {config.attention!r}; "
                "replaced-token detection needs bidirectional attention"
            )


# The discriminator's layers the generator reads (ELECTRA's tied embeddings).
SHARED_EMBEDDING_LAYERS = (
    "token_embedding",
    "segment_embedding",
    "position_embedding",
    "embeddings_layer_norm",
)


def generator_on_shared_embeddings(
    discriminator: keras.Model, config: Any, layers_type: type, shared: tuple[str, ...]
) -> Any:
    """The generator's layers (a `layers_type` dataclass, what its forward
    pass reads): an encoder of the discriminator's class and `config`, built
    whole in the discriminator's dtype and kernels, with its `shared`
    embedding layers the discriminator's (the same variables, one copy)."""
    generator = type(discriminator)(
        config,
        dtype=discriminator.token_embedding.dtype_policy.name,
        fast_kernels=discriminator.fast_kernels,
        name="generator",
    )
    layers = {
        field.name: getattr(generator, field.name) for field in dataclasses.fields(layers_type)
    }
    layers.update({name: getattr(discriminator, name) for name in shared})
    return layers_type(**layers)


def _generator_model(layers: EncoderLayers) -> keras.Model:
    """The generator's encoder as a functional model of its own inside the
    pretrainer's (its layers have BertEncoder's names, which the
    discriminator's have too): the encoder's inputs and masked_lm_positions
    -> the last block's output there only, (B, P, H_generator)."""
    inputs = {
        name: keras.Input(shape=(None,), dtype="int32", name=name) for name in GENERATOR_INPUTS
    }
    hidden = encoder_forward(layers, inputs, query_positions=inputs["masked_lm_positions"])
    return keras.Model(inputs=inputs, outputs=hidden["sequence_output"], name="generator")


@dataclasses.dataclass(frozen=True)
class ReplacedTokenParts:
    """What an ELECTRA pretrainer's forward pass reads (`ElectraPretrainer`'s,
    `ModernBertElectraPretrainer`'s); a built one has the same attributes."""

    encoder: keras.Model  # the discriminator
    generator_model: keras.Model
    generator_head: keras.layers.Layer
    replaced_tokens: ReplacedTokens
    discriminator_head: ReplacedTokenHead


def replaced_token_inputs(names: tuple[str, ...]) -> dict[str, keras.KerasTensor]:
    """The functional model's inputs `names`, (B, T) or (B, P): int32, the
    masked-LM weights float32."""
    return {
        name: keras.Input(
            shape=(None,),
            dtype="float32" if name == "masked_lm_weights" else "int32",
            name=name,
        )
        for name in names
    }


def replaced_token_outputs(parts, inputs, masked_lm_logits, discriminate, draws=None):
    """The generator's logits at the masked positions (B, P, V) -> its samples
    written into the input, their labels and the discriminator's logits: an
    ELECTRA pretrainer's outputs (see `ElectraPretrainer`). `discriminate`:
    the replaced ids (B, T) -> the discriminator's sequence output (B, T, H)."""
    replaced_ids, labels = parts.replaced_tokens(
        masked_lm_logits,
        inputs["input_ids"],
        inputs["masked_lm_positions"],
        inputs["masked_lm_ids"],
        inputs["masked_lm_weights"],
        draws=draws,
    )  # (B, T) each
    return {
        "masked_lm_logits": masked_lm_logits,
        "replaced_ids": replaced_ids,
        "replaced_token_labels": labels,
        "replaced_token_logits": parts.discriminator_head(discriminate(replaced_ids)),  # (B, T)
    }


def _forward(parts, inputs, draws=None, training=None, packing=None):
    """Generator, samples, discriminator: the model's outputs (see the class);
    with `packing`, the discriminator skips the padding (its loss reads only
    real tokens; `keras_bert.models.unpadded`)."""
    generated = parts.generator_model(
        {name: inputs[name] for name in GENERATOR_INPUTS}, training=training
    )  # (B, P, H_generator)

    def discriminate(replaced_ids):
        return encoder_forward(
            parts.encoder,
            {**inputs, "input_ids": replaced_ids},
            packing=packing,
            training=training,
        )["sequence_output"]  # (B, T, H), the padding 0 if packed

    return replaced_token_outputs(
        parts, inputs, parts.generator_head(generated), discriminate, draws
    )  # masked_lm_logits (B, P, V)


class ReplacedTokenDetection(LabelsInFeatures):
    """ELECTRA's training step and loss, for a pretrainer of any encoder
    (`ElectraPretrainer`, `ModernBertElectraPretrainer`): each update's
    draws in its batch, the loss of `replaced_token_outputs`' outputs:

        generator masked-LM cross-entropy (averaged with masked_lm_weights)
        + discriminator_weight x sigmoid cross-entropy (averaged over real tokens)

    A subclass has `pretrainer_inputs` (the features its call reads),
    `graph_forward(parts, inputs)` (its forward pass) and
    `training_outputs(inputs, draws)` (the same in training), and hands its
    layers to this constructor."""

    pretrainer_inputs: tuple[str, ...]

    def __init__(
        self,
        parts: ReplacedTokenParts,
        generator_layers: Any,
        discriminator_weight: float,
        **kwargs: Any,
    ) -> None:
        """The functional model of `parts`: `pretrainer_inputs` ->
        `graph_forward(parts, inputs)`; the parts kept as its attributes (the
        training step's forward pass reads them there) and the metrics: the
        generator's masked-LM loss and accuracy, the discriminator's loss and
        accuracy and the replaced fraction of the real tokens."""
        inputs = replaced_token_inputs(self.pretrainer_inputs)
        super().__init__(inputs=inputs, outputs=self.graph_forward(parts, inputs), **kwargs)
        self.encoder = parts.encoder
        self.discriminator_weight = discriminator_weight
        self.generator_layers = generator_layers  # (the generator_model's, by role)
        self.generator_model = parts.generator_model
        self.generator_head = parts.generator_head
        self.replaced_tokens = parts.replaced_tokens
        self.discriminator_head = parts.discriminator_head
        self.masked_lm_loss_tracker = keras.metrics.Mean(name="masked_lm_loss")
        self.masked_lm_accuracy_tracker = keras.metrics.Mean(name="masked_lm_accuracy")
        self.discriminator_loss_tracker = keras.metrics.Mean(name="discriminator_loss")
        self.discriminator_accuracy_tracker = keras.metrics.Mean(name="discriminator_accuracy")
        self.replaced_fraction_tracker = keras.metrics.Mean(name="replaced_fraction")

    @staticmethod
    def graph_forward(parts: ReplacedTokenParts, inputs: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError("an ELECTRA pretrainer defines its graph_forward")

    def call(
        self, inputs: Mapping[str, tf.Tensor], training: bool | None = None, mask=None
    ) -> dict[str, tf.Tensor]:
        return super().call(
            model_inputs(inputs, self.pretrainer_inputs, type(self).__name__), training=training
        )

    def training_outputs(
        self, inputs: Mapping[str, tf.Tensor], draws: tf.Tensor | None
    ) -> dict[str, tf.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} defines no training_outputs")

    # === The training step ===

    def apply_update(self, data: Any) -> None:
        """`UpdateStep.apply_update`, with the update's draws in its batch."""
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        draws = self.replaced_tokens.update_draws(x["masked_lm_positions"])  # (B, P)
        super().apply_update(
            keras.utils.pack_x_y_sample_weight({**x, DRAWS: draws}, y, sample_weight)
        )

    # === Losses and metrics ===

    def update_normaliser(
        self, x: Mapping[str, tf.Tensor], y: Any = None, sample_weight: Any = None
    ) -> dict[str, tf.Tensor]:
        """The whole update's (all micro-batches, all replicas) masked-LM
        weights and real tokens, read from this replica's share `x`."""
        return {
            "masked_lm": global_weight_sum(x["masked_lm_weights"]),
            "tokens": global_weight_sum(x["input_mask"]),
        }

    def update_loss(
        self,
        x: Mapping[str, tf.Tensor],
        y: Any = None,
        sample_weight: Any = None,
        normaliser: Mapping[str, tf.Tensor] | None = None,
        micro_batches: int = 1,
    ) -> tuple[tf.Tensor, None]:
        """Batch `x`'s share of the update's loss (normalised by `normaliser`,
        `update_normaliser` of the whole update), with the draws
        `apply_update` put in it; updates the metric trackers."""
        if normaliser is None:
            normaliser = self.update_normaliser(x)
        inputs = model_inputs(x, self.pretrainer_inputs, type(self).__name__)
        outputs = self.training_outputs(inputs, x.get(DRAWS))
        return self._electra_loss(x, outputs, normaliser), None

    def outputs_loss(
        self, x: Mapping[str, tf.Tensor], y_pred: Mapping[str, tf.Tensor]
    ) -> tf.Tensor:
        """Loss of one (per-replica) batch from its outputs (`evaluate`'s
        `compute_loss`), this replica's share of the global batch's."""
        return self._electra_loss(x, y_pred, self.update_normaliser(x))

    def _electra_loss(self, x, outputs, normaliser):
        per_prediction, predicted = loss_and_prediction(
            outputs["masked_lm_logits"],
            x["masked_lm_ids"],
            labels_name="masked_lm_ids",
            fast_kernels=self.generator_head.runs_fast_kernels,
        )  # (B, P), (B, P)
        generator_loss = masked_lm_share(
            self, x, per_prediction, predicted, normaliser["masked_lm"]
        )
        real = ops.cast(x["input_mask"], "float32")  # (B, T)
        labels = ops.cast(outputs["replaced_token_labels"], "float32")  # (B, T)
        logits = outputs["replaced_token_logits"]  # (B, T)
        per_token = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        discriminator_loss = ops.sum(per_token * real) / normaliser["tokens"]
        self.discriminator_loss_tracker.update_state(per_token, sample_weight=real)
        self.discriminator_accuracy_tracker.update_state(
            ops.cast(ops.equal(ops.cast(logits > 0, "float32"), labels), "float32"),
            sample_weight=real,
        )
        self.replaced_fraction_tracker.update_state(labels, sample_weight=real)
        return generator_loss + self.discriminator_weight * discriminator_loss


def check_discriminator_weight(discriminator_weight: Any) -> None:
    """A positive, finite number, or a ValueError naming it."""
    if not (
        isinstance(discriminator_weight, (int, float))
        and math.isfinite(discriminator_weight)
        and discriminator_weight > 0
    ):
        raise ValueError(
            f"discriminator_weight must be a positive number, got {discriminator_weight!r}"
        )


@keras.saving.register_keras_serializable(package="keras_bert")
class ElectraPretrainer(ReplacedTokenDetection, UpdateStep, EncoderConfigFields, keras.Model):
    """ELECTRA's generator and discriminator, trained together.

    `encoder`: the discriminator, the BertEncoder being pretrained (what
    fine-tuning starts from). `generator_config`: the generator's BertConfig
    (`electra_generator_config`: ELECTRA's quarter width); its vocabulary,
    positions, segments and embedding width the discriminator's, whose
    embedding layers it reads (one copy of their variables), with its own
    projection where its hidden size differs from their width.
    `discriminator_weight`: the discriminator loss's weight (ELECTRA's 50).

    Inputs: `input_ids`, `input_mask`, `segment_ids` (B, T) and
    `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` (B, P).
    Outputs: `masked_lm_logits` (B, P, V) float32 (the generator's),
    `replaced_ids` (B, T) (the discriminator's input), `replaced_token_labels`
    (B, T) (1: replaced) and `replaced_token_logits` (B, T) float32.
    Metrics: masked_lm_loss, masked_lm_accuracy (the generator's),
    discriminator_loss, discriminator_accuracy and replaced_fraction (of the
    real tokens).
    """

    def __init__(
        self,
        encoder: BertEncoder | dict,
        generator_config: BertConfig | dict,
        discriminator_weight: float = 50.0,
        **kwargs: Any,
    ) -> None:
        encoder = checked_encoder(encoder, "ElectraPretrainer")
        generator = generator_config
        if isinstance(generator, dict):
            generator = BertConfig.from_dict(generator)
        if not isinstance(generator, BertConfig):
            raise TypeError(
                "generator_config must be a BertConfig (electra_generator_config(encoder.config) "
                f"makes ELECTRA's), got {type(generator).__name__}"
            )
        _check_generator(encoder.config, generator)
        check_discriminator_weight(discriminator_weight)

        # === Layers ===
        # (The generator's pooler is its own: ELECTRA's generator has none, never called.)
        generator_layers = generator_on_shared_embeddings(
            encoder, generator, EncoderLayers, SHARED_EMBEDDING_LAYERS
        )
        generator_predictions = generator_head(
            encoder, encoder.token_embedding, generator.hidden_act
        )
        replaced_tokens = ReplacedTokens(name="replaced_tokens")
        discriminator_predictions = discriminator_head(encoder)

        # === Functional Model === (ReplacedTokenDetection: the inputs -> _forward)
        parts = ReplacedTokenParts(
            encoder,
            _generator_model(generator_layers),
            generator_predictions,
            replaced_tokens,
            discriminator_predictions,
        )
        super().__init__(parts, generator_layers, discriminator_weight, **kwargs)

        # === Config ===
        self.generator_config = generator
        self.tie_embeddings = True  # the generator's output layer: the word embeddings

    pretrainer_inputs = MODEL_INPUTS
    graph_forward = staticmethod(_forward)

    def training_outputs(
        self, inputs: Mapping[str, tf.Tensor], draws: tf.Tensor | None
    ) -> dict[str, tf.Tensor]:
        """The forward pass of `update_loss`: the discriminator skips the
        padding where shapes may vary (`keras_bert.models.unpadded`)."""
        packing = TokenPacking(inputs["input_mask"]) if may_pack_padding(self) else None
        return _forward(self, inputs, draws=draws, training=True, packing=packing)

    # === Weights in the original's names ===

    def original_variables(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """google-research/electra's names -> variables, of the discriminator
        (its encoder under `electra/`, its head) and of the generator (its
        encoder on the shared embeddings, under `electra/` as a checkpoint of
        the generator alone, its head): what the discriminator's and the
        generator's exports hold. No pooler: ELECTRA trains none."""

        def named(encoder, head_variables):
            names = {
                "electra/" + name[len("bert/") :]: variable
                for name, variable in encoder_variables(encoder).items()
                if name not in POOLER_TENSORS
            }
            names.update({name: variable for name, (variable, _) in head_variables.items()})
            return names

        return (
            named(self.encoder, discriminator_head_variables(self)),
            named(self.generator_layers, generator_head_variables(self)),
        )

    # === Config ===

    config_fields = ("discriminator_weight", "name")

    def get_config(self) -> dict:
        return {**super().get_config(), "generator_config": self.generator_config.to_dict()}

    @classmethod
    def from_pretrained(
        cls,
        path: str | PretrainedSource,
        generator_hidden_size: float = 0.25,
        generator_num_layers: int | None = None,
        discriminator_weight: float = 50.0,
        dtype: str | keras.DTypePolicy | None = None,
    ) -> ElectraPretrainer:
        """The discriminator (encoder, and head where the source has one) of
        any source `BertEncoder.from_pretrained` reads; the generator from the
        `generator/` folder of a keras-bert ELECTRA export (an earlier phase),
        else a fresh one of ELECTRA's sizes (`electra_generator_config`). The
        loaded head names are in `model.loaded_head_weights`."""
        source = path if isinstance(path, PretrainedSource) else resolve(path)
        encoder, heads = load_encoder_and_heads(source, dtype)
        saved = None
        if source.kind == "tf1":
            folder = os.path.join(os.path.dirname(source.weights), GENERATOR_FOLDER)
            if os.path.exists(os.path.join(folder, "bert_config.json")):
                saved = load_encoder_and_heads(folder, dtype)
        generator = (
            saved[0].config
            if saved
            else electra_generator_config(
                encoder.config, generator_hidden_size, generator_num_layers
            )
        )
        model = cls(encoder, generator, discriminator_weight=discriminator_weight)
        model.loaded_head_weights = assign_head_weights(
            model, heads, source=source.path, targets=discriminator_head_variables(model)
        )
        if saved:
            saved_encoder, saved_heads = saved
            ours = encoder_variables(model.generator_layers)
            for name, variable in encoder_variables(saved_encoder).items():
                if name not in SHARED_TENSORS and name not in POOLER_TENSORS:
                    ours[name].assign(variable)
            model.loaded_head_weights += assign_head_weights(
                model, saved_heads, source=folder, targets=generator_head_variables(model)
            )
        return model
