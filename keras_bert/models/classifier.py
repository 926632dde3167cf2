"""BertClassifier: sentence (pair) classification and regression on `pooled_output`.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
C = number of classes.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras

from keras_bert import features
from keras_bert.models.encoder import BertEncoder


def serialize_encoder(encoder: BertEncoder) -> dict:
    return keras.saving.serialize_keras_object(encoder)


def deserialize_encoder(encoder: BertEncoder | dict) -> BertEncoder:
    if isinstance(encoder, dict):
        return keras.saving.deserialize_keras_object(
            encoder, custom_objects={"BertEncoder": BertEncoder})
    return encoder


def encoder_inputs() -> dict[str, keras.KerasTensor]:
    """The three int32 (B, T) inputs under their original BERT names."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in features.ENCODER_INPUTS}


@keras.saving.register_keras_serializable(package="keras_bert")
class BertClassifier(keras.Model):
    """The paper's classifier: dropout then one dense layer on the pooled `[CLS]`.

    Args:
      encoder: a `BertEncoder` (pretrained weights loaded beforehand).
      num_classes: number of classes; 1 makes a regressor (STS-B) whose
        single output is the predicted score.
      dropout: dropout rate before the output layer (the paper keeps 0.1).
      label_names: optional class names, index-aligned with the logits; kept in
        the config so exported models can return strings.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Output: logits (B, C) (for `num_classes=1`, the score (B, 1)).
    """

    def __init__(self, encoder: BertEncoder | dict, num_classes: int, dropout: float = 0.1,
                 label_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        encoder = deserialize_encoder(encoder)
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"{len(label_names)} label_names for num_classes={num_classes}")
        init = keras.initializers.TruncatedNormal(stddev=encoder.config.initializer_range)

        # === Layers ===
        dropout_layer = keras.layers.Dropout(dropout, name="classifier_dropout")
        output_layer = keras.layers.Dense(num_classes, kernel_initializer=init,
                                          name="classifier_output")

        # === Functional Model ===
        inputs = encoder_inputs()
        pooled = encoder(inputs)["pooled_output"]  # (B, H)
        logits = output_layer(dropout_layer(pooled))  # (B, C)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = list(label_names) if label_names is not None else None

    def get_config(self) -> dict:
        return {"encoder": serialize_encoder(self.encoder), "num_classes": self.num_classes,
                "dropout": self.dropout, "label_names": self.label_names,
                "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config: dict) -> BertClassifier:
        return cls(**config)
