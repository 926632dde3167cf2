"""BertPretrainer: the encoder with its masked-LM and next-sentence heads, and their losses.

`pretrainer.compile(optimizer=...)` then `pretrainer.fit(dataset)` trains on
the dataset dicts of `keras_bert.pretraining_data.inputs` as they are (no `y`, no loss
argument): the labels (`masked_lm_ids`, `masked_lm_weights`,
`next_sentence_labels`) are read from the same dict as the inputs.

The model says what its loss is: `outputs_loss` (from the logits, for
`evaluate`'s `compute_loss`) and `update_normaliser` / `update_loss` (the training loss of a
micro-batch, from the hidden states). The training step itself (gradient
tape, accumulation, loss scaling, global-batch metrics under tf.distribute)
is `keras_bert.models.update_step.UpdateStep`, the one the task models train
with too.

Legend for shape comments: B = batch, T = sequence length, P = masked
positions per sequence, H = hidden size, V = vocabulary size.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf
from keras import ops

from keras_bert import features
from keras_bert.checkpoints.load import assign_head_weights
from keras_bert.config_fields import EncoderConfigFields
from keras_bert.kernels.masked_lm_loss import loss_and_prediction
from keras_bert.layers.pretraining_heads import MaskedLMHead, NextSentenceHead
from keras_bert.models.encoder import BertEncoder, encoder_forward, load_encoder_and_heads
from keras_bert.models.global_batch import global_weight_sum
from keras_bert.models.update_step import UpdateStep

MODEL_INPUTS = features.ENCODER_INPUTS + ("masked_lm_positions",)


def model_inputs(features_dict, names=MODEL_INPUTS, model="BertPretrainer"):
    """Dataset elements also hold the labels: keep only the model's inputs `names`."""
    missing = [name for name in names if name not in features_dict]
    if missing:
        raise ValueError(f"{model} inputs lack feature(s) {missing}; got {sorted(features_dict)}")
    return {name: features_dict[name] for name in names}


def masked_lm_share(model, x, per_prediction, predicted, masked_lm_total):
    """This batch's share of an update's masked-LM loss: the cross-entropy
    (B, P) summed with `masked_lm_weights` over `masked_lm_total` (the weights
    of the whole update); updates `model`'s masked_lm_loss and
    masked_lm_accuracy trackers with this batch."""
    weights = ops.cast(x["masked_lm_weights"], "float32")  # (B, P)
    ids = x["masked_lm_ids"]  # (B, P)
    local_weight = ops.sum(weights)
    correct = ops.cast(ops.equal(predicted, ops.cast(ids, "int32")), "float32")
    # Per-replica means weighted by their share: the global weighted mean.
    model.masked_lm_loss_tracker.update_state(
        ops.sum(per_prediction * weights) / ops.maximum(local_weight, 1e-5),
        sample_weight=local_weight,
    )
    model.masked_lm_accuracy_tracker.update_state(correct, sample_weight=weights)
    return ops.sum(per_prediction * weights) / masked_lm_total


def _encode_cls_and_masked(encoder, inputs, training=None):
    """The encoder's own layers (shared weights) -> the last block's output at
    [CLS] and the masked positions, (B, 1 + P, H).

    The last block runs only where the losses read it: [CLS] (the pooler)
    and the masked positions. The outputs equal those of the whole encoder,
    and the last block costs about a third of a full one. Builds the
    pretrainer's graph (symbolic inputs) and computes its training loss
    (`update_loss`).
    """
    positions = inputs["masked_lm_positions"]  # (B, P)
    cls_and_masked = ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)
    return encoder_forward(encoder, inputs, query_positions=cls_and_masked, training=training)[
        "sequence_output"
    ]  # (B, 1 + P, H)


class LabelsInFeatures:
    """Keras' `compute_loss` (`evaluate`'s) for a model whose labels are in the
    feature dict `x` (the pretrainers): its `outputs_loss(x, y_pred)`."""

    def compute_loss(
        self,
        x: Mapping[str, tf.Tensor] | None = None,
        y: Any = None,
        y_pred: Mapping[str, tf.Tensor] | None = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> tf.Tensor:
        if x is None or y_pred is None:  # Keras' signature allows None; the labels are in x
            raise ValueError(
                f"{type(self).__name__}.compute_loss needs x (the feature dict, which "
                "holds the labels) and y_pred"
            )
        return self.outputs_loss(x, y_pred)

    def outputs_loss(self, x: Mapping[str, tf.Tensor], y_pred: Any) -> tf.Tensor:
        """The loss of batch `x` from the model's outputs: each pretrainer's own."""
        raise NotImplementedError(f"{type(self).__name__} defines no outputs_loss")


class MaskedLMUpdates(LabelsInFeatures):
    """A masked-LM pretrainer's update normaliser (BERT's and ModernBERT's)."""

    def update_normaliser(
        self, x: Mapping[str, tf.Tensor], y: Any = None, sample_weight: Any = None
    ) -> tf.Tensor:
        """What normalises the masked-LM loss of one optimizer update: the
        masked_lm_weights of its whole batch (all micro-batches, all replicas),
        read from this replica's share `x`."""
        return global_weight_sum(x["masked_lm_weights"])


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPretrainer(MaskedLMUpdates, UpdateStep, EncoderConfigFields, keras.Model):
    """Masked LM (+ next-sentence or sentence-order prediction) over a BertEncoder.

    Outputs: `masked_lm_logits` (B, P, V) and, unless `objective` is "none"
    or "lm", `next_sentence_logits` (B, 2), both float32. `objective="lm"`
    (a left-to-right encoder only) reads next-token targets in the masked-LM
    features (`keras_bert.pretraining_data.next_token.next_token_targets`):
    the same head and loss predict token t + 1 at every position t.
    Loss: masked-LM cross-entropy averaged with `masked_lm_weights` over the
    global batch (padded predictions weigh nothing) + mean next-sentence loss.
    `compile` + `fit` train it with the fused loss (`update_loss`), gradient
    accumulation (`compile(gradient_accumulation_steps=k)`), float16 loss
    scaling and global-batch metrics under every tf.distribute strategy
    (`keras_bert.models.update_step`).
    """

    def __init__(self, encoder: BertEncoder | dict, objective: str = "nsp", **kwargs: Any) -> None:
        if isinstance(encoder, dict):
            encoder = keras.saving.deserialize_keras_object(encoder)
        if not isinstance(encoder, BertEncoder):
            raise TypeError(
                f"encoder must be a BertEncoder (or its serialized config), "
                f"got {type(encoder).__name__}"
            )
        if objective not in features.PRETRAINER_OBJECTIVES:
            raise ValueError(
                f"objective must be one of {features.PRETRAINER_OBJECTIVES}, got {objective!r}"
            )
        config = encoder.config
        if (objective == "lm") != (config.attention == "left_to_right"):
            # Bidirectional attention sees the next token it should predict;
            # a left-to-right encoder cannot see a masked token's context after it.
            raise ValueError(
                f"objective {objective!r} does not fit BertConfig.attention "
                f"{config.attention!r}: the lm objective needs left_to_right "
                "attention, and left_to_right attention the lm objective"
            )

        # === Layers ===
        masked_lm_head = MaskedLMHead(
            encoder.token_embedding,
            activation=config.hidden_act,
            initializer_range=config.initializer_range,
            dtype=encoder.dtype_policy,
            fast_kernels=encoder.fast_kernels,
            name="masked_lm",
        )
        next_sentence_head = None
        if objective in ("nsp", "sop"):
            next_sentence_head = NextSentenceHead(
                initializer_range=config.initializer_range,
                dtype=encoder.dtype_policy,
                name="next_sentence",
            )

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in MODEL_INPUTS
        }
        last = _encode_cls_and_masked(encoder, inputs)  # (B, 1 + P, H)
        outputs = {"masked_lm_logits": masked_lm_head(last[:, 1:, :])}  # (B, P, V)
        if next_sentence_head is not None:
            pooled = encoder.pooler(last[:, 0, :])  # (B, H)
            outputs["next_sentence_logits"] = next_sentence_head(pooled)  # (B, 2)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.objective = objective
        self.masked_lm_head = masked_lm_head
        self.next_sentence_head = next_sentence_head

        # === Metrics ===
        self.masked_lm_loss_tracker = keras.metrics.Mean(name="masked_lm_loss")
        self.masked_lm_accuracy_tracker = keras.metrics.Mean(name="masked_lm_accuracy")
        if next_sentence_head is not None:
            self.next_sentence_loss_tracker = keras.metrics.Mean(name="next_sentence_loss")
            self.next_sentence_accuracy_tracker = keras.metrics.Mean(name="next_sentence_accuracy")

    def call(
        self, inputs: Mapping[str, tf.Tensor], training: bool | None = None, mask=None
    ) -> dict[str, tf.Tensor]:
        return super().call(model_inputs(inputs), training=training)

    # === Losses and metrics ===

    def update_loss(
        self,
        x: Mapping[str, tf.Tensor],
        y: Any = None,
        sample_weight: Any = None,
        normaliser: tf.Tensor | None = None,
        micro_batches: int = 1,
    ) -> tuple[tf.Tensor, None]:
        """The training loss of batch `x`, one of `micro_batches` equal parts of
        an update normalised by `normaliser` (`update_normaliser` of the whole
        update), and updates the metric trackers; no predictions for compiled
        metrics (None). No gradient tape here: the training step
        (`keras_bert.models.update_step`) records it.

        The model's layers run one by one rather than through `self(...)`: the
        loss reads the masked-LM head's hidden states, not its logits
        (`MaskedLMHead.loss_and_prediction`); values equal `outputs_loss`'s.
        """
        if normaliser is None:
            normaliser = self.update_normaliser(x)
        last = _encode_cls_and_masked(self.encoder, model_inputs(x), training=True)  # (B, 1 + P, H)
        per_prediction, predicted = self.masked_lm_head.loss_and_prediction(
            last[:, 1:, :], x["masked_lm_ids"]
        )  # (B, P), (B, P)
        next_sentence_logits = None
        if self.next_sentence_head is not None:
            next_sentence_logits = self.next_sentence_head(
                self.encoder.pooler(last[:, 0, :])
            )  # (B, 2)
        return self._pretraining_loss(
            x, per_prediction, predicted, next_sentence_logits, normaliser, micro_batches
        ), None

    def outputs_loss(
        self, x: Mapping[str, tf.Tensor], y_pred: Mapping[str, tf.Tensor]
    ) -> tf.Tensor:
        """Loss of one (per-replica) batch from its outputs, scaled for tf.distribute.

        Under a strategy, Keras sums the replicas' gradients, so each replica
        returns its share of the global-batch loss: the masked-LM sum over the
        global weight sum, and the next-sentence mean divided by the number of
        replicas.
        """
        masked_lm_total = self.update_normaliser(x)
        per_prediction, predicted = loss_and_prediction(
            y_pred["masked_lm_logits"],
            x["masked_lm_ids"],
            labels_name="masked_lm_ids",
            fast_kernels=self.masked_lm_head.runs_fast_kernels,
        )  # (B, P), (B, P)
        return self._pretraining_loss(
            x, per_prediction, predicted, y_pred.get("next_sentence_logits"), masked_lm_total, 1
        )

    def _pretraining_loss(
        self, x, per_prediction, predicted, next_sentence_logits, masked_lm_total, micro_batches
    ):
        """This batch's share of the update's loss, from the masked-LM
        cross-entropy and prediction (B, P) and the next-sentence logits
        (B, 2) (None without that head): the masked-LM loss summed here over
        `masked_lm_total` (the weights of the whole update), plus the
        next-sentence mean over replicas x `micro_batches` equal batches."""
        shares = tf.distribute.get_strategy().num_replicas_in_sync * micro_batches
        total = masked_lm_share(self, x, per_prediction, predicted, masked_lm_total)
        if next_sentence_logits is not None:
            labels = ops.reshape(x[features.NEXT_SENTENCE_LABELS], (-1,))  # (B,)
            nsp_logits = next_sentence_logits  # (B, 2)
            per_example = keras.losses.sparse_categorical_crossentropy(
                labels, nsp_logits, from_logits=True
            )  # (B,)
            next_sentence_loss = ops.mean(per_example)
            self.next_sentence_loss_tracker.update_state(per_example)
            self.next_sentence_accuracy_tracker.update_state(
                ops.cast(
                    ops.equal(
                        ops.cast(ops.argmax(nsp_logits, axis=-1), "int32"),
                        ops.cast(labels, "int32"),
                    ),
                    "float32",
                )
            )
            total = total + next_sentence_loss / shares
        return total

    # === Config ===

    config_fields = ("objective", "name")

    @classmethod
    def from_pretrained(
        cls, path: str, objective: str = "nsp", dtype: str | keras.DTypePolicy | None = None
    ) -> BertPretrainer:
        """A pretrainer initialised from any source `BertEncoder.from_pretrained`
        reads: the encoder always, the heads where the source has them (their
        names in `pretrainer.loaded_head_weights`)."""
        encoder, heads = load_encoder_and_heads(path, dtype=dtype)
        pretrainer = cls(encoder, objective=objective)
        pretrainer.loaded_head_weights = assign_head_weights(pretrainer, heads, source=path)
        return pretrainer
