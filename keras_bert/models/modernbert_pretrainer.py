"""ModernBertPretrainer: a ModernBertEncoder pretrained with the masked LM alone.

ModernBERT (Warner et al., 2024) drops next-sentence prediction, as RoBERTa
did: the objective is the masked LM, HuggingFace's head (dense, activation,
LayerNorm, the token embedding table as output layer) read only at the masked
positions. It trains on the records and dataset dicts `BertPretrainer` trains
on (`input_ids`, `input_mask`, `masked_lm_positions`, `masked_lm_ids`,
`masked_lm_weights`; `segment_ids` and `next_sentence_labels`, if there, are
not read), with the same loss: the cross-entropy weighted by
`masked_lm_weights` over their sum in the whole update (every micro-batch,
every replica), and the same training step (`keras_bert.models.update_step`:
gradient accumulation, loss scaling, global-batch metrics).

    pretrainer = ModernBertPretrainer(ModernBertEncoder(config))
    pretrainer.compile(optimizer=..., gradient_accumulation_steps=2)
    pretrainer.fit(dataset)   # the pretraining dataset's dicts, no y

Legend for shape comments: B = batch, T = sequence length, P = masked
positions per sequence, H = hidden size, V = vocabulary size.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from keras_bert import features
from keras_bert.config_fields import EncoderConfigFields
from keras_bert.kernels.masked_lm_loss import loss_and_prediction
from keras_bert.models.modernbert import (
    MODERNBERT_INPUTS,
    ModernBertEncoder,
    load_encoder_and_heads,
)
from keras_bert.models.modernbert_masked_lm import encoder_and_masked_lm_head, load_masked_lm_head
from keras_bert.models.pretrainer import MaskedLMUpdates, masked_lm_share, model_inputs
from keras_bert.models.unpadded import may_pack_padding
from keras_bert.models.update_step import UpdateStep

MASKED_LM_POSITIONS = features.MASKED_LM_FEATURES[0]
MODEL_INPUTS = MODERNBERT_INPUTS + (MASKED_LM_POSITIONS,)


def masked_rows(x: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """(B, T) int32, 1 at the masked positions of a nonzero weight."""
    length = tf.shape(x["input_ids"])[1]
    weighted = tf.cast(tf.not_equal(x["masked_lm_weights"], 0), tf.int32)  # (B, P)
    one_hot = tf.one_hot(x[MASKED_LM_POSITIONS], length, dtype=tf.int32)  # (B, P, T)
    return tf.reduce_max(one_hot * weighted[..., None], axis=1)


@keras.saving.register_keras_serializable(package="keras_bert")
class ModernBertPretrainer(MaskedLMUpdates, UpdateStep, EncoderConfigFields, keras.Model):
    """Masked LM over a ModernBertEncoder, at the masked positions only.

    Inputs: `input_ids`, `input_mask` (B, T) and `masked_lm_positions` (B, P),
    int32; a dataset dict's other features are left. Output:
    `masked_lm_logits` (B, P, V), float32: `ModernBertMaskedLM`'s logits at
    those positions. `compile` + `fit` train it on the pretraining dataset's
    dicts (the labels are in them); metrics `masked_lm_loss` and
    `masked_lm_accuracy`, means weighted by `masked_lm_weights` over the
    global batch.
    """

    def __init__(self, encoder: ModernBertEncoder | dict, **kwargs: Any) -> None:
        # === Layers ===
        encoder, masked_lm_head = encoder_and_masked_lm_head(encoder)

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in MODEL_INPUTS
        }
        sequence_output = encoder({name: inputs[name] for name in MODERNBERT_INPUTS})[
            "sequence_output"
        ]  # (B, T, H)
        outputs = {
            "masked_lm_logits": masked_lm_head(sequence_output, inputs[MASKED_LM_POSITIONS])
        }  # (B, P, V)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.masked_lm_head = masked_lm_head

        # === Metrics ===
        self.masked_lm_loss_tracker = keras.metrics.Mean(name="masked_lm_loss")
        self.masked_lm_accuracy_tracker = keras.metrics.Mean(name="masked_lm_accuracy")

    def call(
        self, inputs: Mapping[str, tf.Tensor], training: bool | None = None, mask=None
    ) -> dict[str, tf.Tensor]:
        return super().call(
            model_inputs(inputs, MODEL_INPUTS, "ModernBertPretrainer"), training=training
        )

    # === Losses and metrics ===

    def update_loss(
        self,
        x: Mapping[str, tf.Tensor],
        y: Any = None,
        sample_weight: Any = None,
        normaliser: tf.Tensor | None = None,
        micro_batches: int = 1,
    ) -> tuple[tf.Tensor, None]:
        """Batch `x`'s share of the update's loss (normalised by `normaliser`,
        the update's weight sum, whatever the number of `micro_batches`); updates
        the metrics. No tape here: the training step records it."""
        if normaliser is None:
            normaliser = self.update_normaliser(x)
        logits = self(x, training=True, **self.step_arguments(x))["masked_lm_logits"]  # (B, P, V)
        return self._masked_lm_loss(x, logits, normaliser), None

    def step_arguments(self, x: Mapping[str, tf.Tensor]) -> dict[str, Any]:
        """The training call's arguments: where shapes may vary, the encoder
        skips the padding and its last block runs at the masked positions
        alone, the rows the loss reads (`keras_bert.models.unpadded`)."""
        if not may_pack_padding(self):
            return {}
        return {"remove_padding": True, "read_positions": masked_rows(x)}

    def outputs_loss(
        self, x: Mapping[str, tf.Tensor], y_pred: Mapping[str, tf.Tensor]
    ) -> tf.Tensor:
        """This (per-replica) batch's share of the global batch's loss, from
        its logits (`evaluate`'s `compute_loss`)."""
        return self._masked_lm_loss(x, y_pred["masked_lm_logits"], self.update_normaliser(x))

    def _masked_lm_loss(self, x, logits, normaliser):
        per_prediction, predicted = loss_and_prediction(
            logits,
            x["masked_lm_ids"],
            labels_name="masked_lm_ids",
            fast_kernels=self.masked_lm_head.runs_fast_kernels,
        )  # (B, P), (B, P)
        return masked_lm_share(self, x, per_prediction, predicted, normaliser)

    # === Config ===

    config_fields = ("name", "trainable")

    @classmethod
    def from_pretrained(
        cls, folder: str, dtype: str | keras.DTypePolicy | None = None
    ) -> ModernBertPretrainer:
        """A pretrainer from a HuggingFace ModernBERT folder (a released
        checkpoint, or a `keras-bert pretrain` run's `export/`): the encoder
        always, the masked-LM head where the folder has one
        (`ModernBertForMaskedLM`; its names in `loaded_head_weights`, [] where
        the head starts as drawn)."""
        encoder, heads, raw_config = load_encoder_and_heads(folder, dtype)
        pretrainer = cls(encoder)
        pretrainer.loaded_head_weights = load_masked_lm_head(
            pretrainer.masked_lm_head, heads, raw_config, folder, cls.__name__, required=False
        )
        return pretrainer
