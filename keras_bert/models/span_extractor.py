"""BertSpanExtractor: extractive question answering (SQuAD v1.1 / v2.0).

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras

from keras_bert.layers.task_heads import SpanHead
from keras_bert.models.classifier import deserialize_encoder, encoder_inputs, serialize_encoder

if TYPE_CHECKING:
    from keras_bert.models.encoder import BertEncoder


@keras.saving.register_keras_serializable(package="keras_bert")
class BertSpanExtractor(keras.Model):
    """A start vector S and an end vector E scored against every token T_i.

    The answer span (i, j) scores S·T_i + E·T_j with j >= i and at most
    `max_answer_length` pieces; SQuAD v2.0's no-answer score is the span at
    `[CLS]` (position 0). The span search and the no-answer threshold live in
    `keras_bert.tasks.squad`, on the logits this model returns. As run_squad.py,
    one dense layer of width 2 (S and E as its two columns) and no dropout.

    Args:
      encoder: a `BertEncoder`.
      max_answer_length: longest answer in word pieces (30, as the paper);
        kept in the config for post-processing and export.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Outputs: `start_logits` and `end_logits`, each (B, T).
    """

    def __init__(self, encoder: BertEncoder | dict, max_answer_length: int = 30,
                 **kwargs: Any) -> None:
        encoder = deserialize_encoder(encoder)

        # === Layers ===
        span_head = SpanHead(encoder.config.initializer_range, name="span_head")

        # === Functional Model ===
        inputs = encoder_inputs()
        sequence = encoder(inputs)["sequence_output"]  # (B, T, H)
        start_logits, end_logits = span_head(sequence)  # (B, T) each
        outputs = {"start_logits": start_logits, "end_logits": end_logits}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.max_answer_length = max_answer_length

    def get_config(self) -> dict:
        return {"encoder": serialize_encoder(self.encoder),
                "max_answer_length": self.max_answer_length,
                "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config: dict) -> BertSpanExtractor:
        return cls(**config)
