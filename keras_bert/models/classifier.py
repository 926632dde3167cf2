"""BertClassifier: sentence (pair) classification and regression on `pooled_output`.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
C = number of classes.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert import features
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.text_task import TextTask, batches, deserialize_preprocessor
from keras_bert.models.user_inputs import check_class_indices, check_number, check_scores
from keras_bert.preprocessing.classification import class_names, classify_logits
from keras_bert.preprocessing.preprocessor import BertPreprocessor, text_pairs_given


def serialize_encoder(encoder: BertEncoder) -> dict:
    return keras.saving.serialize_keras_object(encoder)


def deserialize_encoder(encoder: BertEncoder | dict) -> BertEncoder:
    if isinstance(encoder, dict):
        return keras.saving.deserialize_keras_object(
            encoder, custom_objects={"BertEncoder": BertEncoder}
        )
    return encoder


def encoder_inputs() -> dict[str, keras.KerasTensor]:
    """The three int32 (B, T) inputs under their original BERT names."""
    return {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in features.ENCODER_INPUTS
    }


ACTIVATIONS = (None, "softmax")


@keras.saving.register_keras_serializable(package="keras_bert")
class BertClassifier(TextTask, keras.Model):
    """The paper's classifier: dropout then one dense layer on the pooled `[CLS]`.

    Args:
      encoder: a `BertEncoder` (pretrained weights loaded beforehand).
      num_classes: number of classes; 1 makes a regressor (STS-B) whose
        single output is the predicted score.
      dropout: dropout rate before the output layer (the paper keeps 0.1).
      label_names: optional class names, index-aligned with the logits; kept in
        the config so exported models can return strings, and `fit` can take
        them as labels.
      preprocessor: optional `BertPreprocessor`; with it the model also takes
        text (one string per example, or pairs) in `fit` / `evaluate` /
        `predict` (see `keras_bert.models.text_task`).
      activation: None (logits, the default, as keras-hub's classifiers) or
        "softmax" (probabilities out of the model, `predict` and exports alike;
        the default loss follows).
      trained_on_pairs: whether `fit` has seen text pairs: set by `fit` on
        text (True once any pairs came, False for single texts only), None
        when unknown (trained on ids, or not yet). A model trained on single
        texts warns once (Python `warnings`, once per model) when `predict`,
        `classify`, `predict_proba` or `predict_labels` get pairs: its answers
        to pairs are untrained. Kept in the config, so a saved model still
        knows; its export warns too (`keras_bert.export.classifier`).

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Output: logits (B, C) (for `num_classes=1`, the score (B, 1)), from
    `predict` on ids or on text alike; `predict_proba` and `predict_labels`
    answer text with probabilities and class names.
    """

    def __init__(
        self,
        encoder: BertEncoder | dict,
        num_classes: int,
        dropout: float = 0.1,
        label_names: Sequence[str] | None = None,
        preprocessor: BertPreprocessor | dict | None = None,
        activation: str | None = None,
        trained_on_pairs: bool | None = None,
        **kwargs: Any,
    ) -> None:
        encoder = deserialize_encoder(encoder)
        preprocessor = deserialize_preprocessor(preprocessor)
        num_classes = check_number(num_classes, "num_classes")
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"{len(label_names)} label_names for num_classes={num_classes}")
        if activation not in ACTIVATIONS or (activation and num_classes == 1):
            raise ValueError(
                f"activation must be one of {ACTIVATIONS} (a regressor, "
                f"num_classes=1: None), got {activation!r}"
            )
        init = keras.initializers.TruncatedNormal(stddev=encoder.config.initializer_range)

        # === Layers ===
        dropout_layer = keras.layers.Dropout(dropout, name="classifier_dropout")
        output_layer = keras.layers.Dense(
            num_classes, kernel_initializer=init, name="classifier_output"
        )
        # Softmax in float32: mixed precision's float16 probabilities round to 0 / 1.
        softmax = (
            keras.layers.Activation("softmax", dtype="float32", name="probabilities")
            if activation == "softmax"
            else None
        )

        # === Functional Model ===
        inputs = encoder_inputs()
        pooled = encoder(inputs)["pooled_output"]  # (B, H)
        logits = output_layer(dropout_layer(pooled))  # (B, C)
        outputs = logits if softmax is None else softmax(logits)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = list(label_names) if label_names is not None else None
        self.preprocessor = preprocessor
        self.activation = activation
        self.trained_on_pairs = None if trained_on_pairs is None else bool(trained_on_pairs)
        self._warned_about_pairs = False

    # === Text in, answers out ===

    @property
    def regression(self) -> bool:
        return self.num_classes == 1

    @property
    def outputs_logits(self) -> bool:
        return self.activation is None

    def default_loss(self) -> keras.losses.Loss:
        if self.regression:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=self.outputs_logits)

    def read_positions(self, x: Any, y: Any = None, sample_weight: Any = None) -> tf.Tensor | None:
        """None of the last layer's positions but the pooler's ([CLS], or left
        to right the last real token), which `remove_padding` always computes."""
        return tf.zeros_like(x["input_mask"]) if isinstance(x, dict) else None

    def predict_step(self, data: Any) -> Any:
        # One row of logits per example at any width: the padding is cut (and
        # packed out) here too.
        x, _, _ = keras.utils.unpack_x_y_sample_weight(self.trimmed(data))
        return self.step_outputs(x, training=False)

    def default_metrics(self) -> list:
        if self.regression:
            return []
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def encode_targets(self, y: Any) -> Any:
        """Class names (the model's `label_names`) -> class indices; indices
        and regression scores pass through."""
        if y is None:
            return y
        if self.regression:
            return check_scores(y)
        values = np.asarray(
            y.tolist() if hasattr(y, "tolist") and not isinstance(y, np.ndarray) else y
        )
        if values.dtype.kind not in "OSU":
            # The own loss is sparse: one index per text. A loss of the user's may take rows.
            own_loss = getattr(self, "_own_loss", True)
            return check_class_indices(values, self.num_classes, one_per_text=own_loss)
        # No label_names: every text label is unknown (the error below says so).
        index = {name: i for i, name in enumerate(self.answer_names() or [])}
        unknown = sorted({str(v) for v in values.ravel()} - set(index))
        if unknown:
            raise ValueError(
                f"label(s) {unknown[:5]} not among the model's label_names {self.answer_names()}"
            )
        return np.vectorize(lambda v: index[str(v)], otypes=[np.int32])(values)

    def map_text_batch(self, x: Any, y: Any = None) -> tuple[dict[str, tf.Tensor], Any, Any]:
        if y is not None and not self.regression and y.dtype == tf.string:
            names = tf.constant(self.answer_names())
            known = tf.equal(y[:, tf.newaxis], names)  # (B, C)
            check = tf.debugging.Assert(
                tf.reduce_all(tf.reduce_any(known, axis=1)),
                [f"labels must be among {self.answer_names()}; got", y],
            )
            with tf.control_dependencies([check]):
                y = tf.argmax(tf.cast(known, tf.int32), axis=1, output_type=tf.int32)
        return self.require_preprocessor()(x), y, None

    # === Single texts or pairs ===

    def fit(
        self, x: Any = None, y: Any = None, *args: Any, **kwargs: Any
    ) -> keras.callbacks.History:
        """`TextTask.fit`, remembering whether the text had pairs (`trained_on_pairs`)."""
        pairs = text_pairs_given(x)
        if pairs is not None:
            self.trained_on_pairs = bool(self.trained_on_pairs) or pairs
        return super().fit(x, y, *args, **kwargs)

    def predict(self, x: Any, batch_size: int | None = None, *args: Any, **kwargs: Any) -> Any:
        self.warn_if_pairs_are_new(x)
        return super().predict(x, batch_size, *args, **kwargs)

    def warn_if_pairs_are_new(self, x: Any) -> None:
        """Warns (once per model) when a model trained on single texts gets pairs."""
        if self.trained_on_pairs is False and not self._warned_about_pairs and text_pairs_given(x):
            self._warned_about_pairs = True
            warnings.warn(
                f"this {type(self).__name__} was trained on single texts (fit saw no "
                "text_pair) and is now given text pairs: its answers to pairs are untrained. "
                "Fine-tune it on pairs, or pass single texts (joined, if that is what you "
                "mean)",
                UserWarning,
                stacklevel=3,
            )

    def answer_names(self) -> list[str] | None:
        return class_names(self.num_classes, self.label_names)

    def classify(
        self, x: Any, batch_size: int | None = None, window_stride: int | None = None
    ) -> dict[str, np.ndarray]:
        """Text -> {logits, probabilities (N, C), label (N,)} (a regressor: {score
        (N,)}), computed as the exported classifier computes them.

        `window_stride`: texts longer than the sequence are not cut at its
        end but read as overlapping windows `window_stride` pieces apart
        (`BertPreprocessor.windows`, single texts only); a text's logits are
        the mean of its windows' logits."""
        preprocessor, parts = self.require_preprocessor(), []
        self.warn_if_pairs_are_new(x)
        for chunk in batches(x, batch_size or 32):
            if window_stride is None:
                logits = self.logits(preprocessor(chunk))  # (B, C)
            else:
                features, count = preprocessor.windows(chunk, window_stride)
                per_window = self.logits(features)  # (N, C)
                logits = tf.RaggedTensor.from_row_lengths(per_window, count).to_tensor()
                logits = tf.reduce_sum(logits, axis=1) / tf.cast(count, logits.dtype)[:, None]
            parts.append(classify_logits(logits, self.answer_names()))
        return {name: np.concatenate([part[name].numpy() for part in parts]) for name in parts[0]}

    def logits(self, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """The output layer's values (B, C), before any `activation`."""
        if self.outputs_logits:
            return self(features, training=False)
        if not hasattr(self, "_logits_model"):
            self._logits_model = keras.Model(
                self.inputs, self.get_layer("classifier_output").output
            )
        return self._logits_model(features, training=False)

    def predict_proba(
        self, x: Any, batch_size: int | None = None, window_stride: int | None = None
    ) -> np.ndarray:
        """Text -> class probabilities (N, C) (softmax of the logits)."""
        if self.regression:
            raise ValueError(
                "a regressor (num_classes=1) has no class probabilities: predict gives its scores"
            )
        return self.classify(x, batch_size, window_stride)["probabilities"]

    def predict_labels(
        self, x: Any, batch_size: int | None = None, window_stride: int | None = None
    ) -> list[str]:
        """Text -> the most probable class's name per text."""
        if self.regression:
            raise ValueError("a regressor (num_classes=1) has no labels: use predict")
        labels = self.classify(x, batch_size, window_stride)["label"]
        return [label.decode("utf-8") for label in labels]

    def score(
        self, x: Any, y: Any, glue_task: str | None = None, batch_size: int | None = None
    ) -> dict[str, float]:
        """The task's official figures on text `x` and labels `y` (class names,
        indices or scores): accuracy (and F1 for two classes), Pearson and
        Spearman for a regressor, or the GLUE task's own (`glue_task`, e.g.
        "mrpc", "cola", "stsb"). What `keras-bert finetune` reports on dev."""
        from keras_bert.datasets import metrics
        from keras_bert.datasets.glue import glue_metrics

        outputs = self.predict(x, batch_size=batch_size or 64, verbose=0)
        labels = np.asarray(self.encode_targets(y))
        if self.regression:
            predictions, labels = outputs[:, 0], labels.reshape(-1)
        else:
            predictions = np.argmax(outputs, axis=-1)
        if glue_task is not None:
            return glue_metrics(glue_task, labels, predictions)
        if self.regression:
            return {
                "pearson": metrics.pearson(labels, predictions),
                "spearman": metrics.spearman(labels, predictions),
            }
        result = {"accuracy": metrics.accuracy(labels, predictions)}
        if self.num_classes == 2:
            result["f1"] = metrics.f1(labels, predictions)
        return result

    # === Config ===

    def get_config(self) -> dict:
        return {
            "encoder": serialize_encoder(self.encoder),
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "label_names": self.label_names,
            "activation": self.activation,
            "trained_on_pairs": self.trained_on_pairs,
            "name": self.name,
            "trainable": self.trainable,
            **self.preprocessor_config(),
        }

    @classmethod
    def from_config(cls, config: dict) -> BertClassifier:
        return cls(**config)
