"""BertTokenClassifier: one label per token (named entities, part of speech).

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
K = number of labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import keras

from keras_bert.models.classifier import deserialize_encoder, encoder_inputs, serialize_encoder

if TYPE_CHECKING:
    from keras_bert.models.encoder import BertEncoder


@keras.saving.register_keras_serializable(package="keras_bert")
class BertTokenClassifier(keras.Model):
    """Dropout then one dense layer on every token of `sequence_output`.

    As in the paper, each word is labelled on its first word piece; training
    gives the other pieces zero weight (see `keras_bert.tasks.tagging`).

    Args:
      encoder: a `BertEncoder`.
      num_labels: number of tags (e.g. BIO tags of every entity type, with `O`).
      dropout: dropout rate before the output layer.
      label_names: optional tag names, index-aligned with the logits.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Output: logits (B, T, K).
    """

    def __init__(self, encoder: BertEncoder | dict, num_labels: int, dropout: float = 0.1,
                 label_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        encoder = deserialize_encoder(encoder)
        if label_names is not None and len(label_names) != num_labels:
            raise ValueError(f"{len(label_names)} label_names for num_labels={num_labels}")
        init = keras.initializers.TruncatedNormal(stddev=encoder.config.initializer_range)

        # === Layers ===
        dropout_layer = keras.layers.Dropout(dropout, name="tagger_dropout")
        output_layer = keras.layers.Dense(num_labels, kernel_initializer=init,
                                          name="tagger_output")

        # === Functional Model ===
        inputs = encoder_inputs()
        sequence = encoder(inputs)["sequence_output"]  # (B, T, H)
        logits = output_layer(dropout_layer(sequence))  # (B, T, K)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.num_labels = num_labels
        self.dropout = dropout
        self.label_names = list(label_names) if label_names is not None else None

    def get_config(self) -> dict:
        return {"encoder": serialize_encoder(self.encoder), "num_labels": self.num_labels,
                "dropout": self.dropout, "label_names": self.label_names,
                "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config: dict) -> BertTokenClassifier:
        return cls(**config)
