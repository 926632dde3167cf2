"""BertClassifier: sentence (pair) classification and regression on `pooled_output`.

Single-label (one class per text: softmax, cross-entropy) by default;
`multi_label=True` makes the labels independent (any number per text: a
sigmoid per label, binary cross-entropy), as HuggingFace's
`problem_type="multi_label_classification"`.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
C = number of classes.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert import features
from keras_bert.config_fields import keep_config_fields
from keras_bert.dataset_options import split_validation
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.modernbert import ModernBertEncoder
from keras_bert.models.text_task import TextTask, batches, deserialize_preprocessor
from keras_bert.models.unpadded import UNPADDED_CALL_ARGUMENTS
from keras_bert.models.user_inputs import (
    check_class_indices,
    check_labels,
    check_one_label_per_text,
    check_scores,
    check_texts,
    check_threshold,
    multi_hot_labels,
    refuse_several_labels_per_text,
)
from keras_bert.preprocessing.classification import (
    class_names,
    classify_logits,
    multi_label_logits,
)
from keras_bert.preprocessing.preprocessor import (
    BertPreprocessor,
    refuse_windows_of_pairs,
    text_pairs_given,
)


def deserialize_encoder(encoder: BertEncoder | dict) -> BertEncoder:
    if isinstance(encoder, dict):
        return keras.saving.deserialize_keras_object(
            encoder, custom_objects={"BertEncoder": BertEncoder}
        )
    return encoder


def encoder_inputs(encoder: Any = None) -> dict[str, keras.KerasTensor]:
    """The int32 (B, T) inputs under their original BERT names: the three of
    BERT, or those the encoder names (`input_features`: a ModernBertEncoder
    reads no segment ids)."""
    names = getattr(encoder, "input_features", features.ENCODER_INPUTS)
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in names}


ACTIVATIONS = (None, "softmax", "sigmoid")
# A multi-label classifier's labels above this probability are its answers.
DEFAULT_THRESHOLD = 0.5


@keras.saving.register_keras_serializable(package="keras_bert")
class MultiLabelF1(keras.metrics.F1Score):
    """Keras' `F1Score` over independent labels (multi-hot targets), reading
    logits (`from_logits=True`: a sigmoid first) or probabilities; a label
    counts as predicted above `threshold` (a probability). Keras' own takes
    probabilities only (its threshold must lie in (0, 1])."""

    def __init__(
        self,
        average: str = "micro",
        threshold: float = DEFAULT_THRESHOLD,
        from_logits: bool = True,
        name: str | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            average=average, threshold=threshold, name=name or f"f1_{average}", dtype=dtype
        )
        self.from_logits = from_logits

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_pred = keras.ops.cast(y_pred, self.dtype)
        if self.from_logits:
            y_pred = keras.ops.sigmoid(y_pred)
        super().update_state(y_true, y_pred, sample_weight)

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("beta", None)
        return {**config, "from_logits": self.from_logits}


@keras.saving.register_keras_serializable(package="keras_bert")
class BertClassifier(TextTask, keras.Model):
    """The paper's classifier: dropout then one dense layer on the pooled `[CLS]`.

    Args:
      encoder: a `BertEncoder` (pretrained weights loaded beforehand), or a
        `ModernBertEncoder` (its `pooled_output` ModernBERT's head on [CLS] or
        the mean; ids in, as it reads no segment ids and no WordPiece text).
      num_classes: number of classes; 1 makes a regressor (STS-B) whose
        single output is the predicted score.
      dropout: dropout rate before the output layer (the paper keeps 0.1).
      label_names: optional class names, index-aligned with the logits; kept in
        the config so exported models can return strings, and `fit` can take
        them as labels.
      preprocessor: optional `BertPreprocessor`; with it the model also takes
        text (one string per example, or pairs) in `fit` / `evaluate` /
        `predict` (see `keras_bert.models.text_task`).
      activation: None (logits, the default, as keras-hub's classifiers),
        "softmax" (probabilities out of the model, `predict` and exports alike;
        the default loss follows) or, for `multi_label=True`, "sigmoid".
      multi_label: False (the default): one class per text (softmax,
        cross-entropy; labels a class index or name per text). True: the
        labels are independent, any number per text (a sigmoid per label,
        binary cross-entropy from the logits; labels multi-hot rows (N, C) of
        0 / 1 or a list of label names per text); `predict_proba` gives each
        label's probability, `predict_labels` the names above a threshold,
        `score` micro / macro F1. Kept in the config.
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
        encoder: BertEncoder | ModernBertEncoder | dict,
        num_classes: int,
        dropout: float = 0.1,
        label_names: Sequence[str] | None = None,
        preprocessor: BertPreprocessor | dict | None = None,
        activation: str | None = None,
        trained_on_pairs: bool | None = None,
        multi_label: bool = False,
        **kwargs: Any,
    ) -> None:
        if not isinstance(encoder, ModernBertEncoder):  # its config dict loads as itself too
            encoder = deserialize_encoder(encoder)
        preprocessor = deserialize_preprocessor(preprocessor)
        num_classes, label_names = check_labels(num_classes, label_names, "num_classes")
        if not isinstance(multi_label, bool):
            raise ValueError(f"multi_label must be True or False, got {multi_label!r}")
        if multi_label and num_classes < 2:
            raise ValueError(
                f"multi_label=True needs num_classes of at least 2 (one output per label), "
                f"got {num_classes}: a single yes / no label is a 2-class classifier"
            )
        if activation not in ACTIVATIONS or (activation and num_classes == 1):
            raise ValueError(
                f"activation must be one of {ACTIVATIONS} (a regressor, "
                f"num_classes=1: None), got {activation!r}"
            )
        if multi_label and activation == "softmax":
            raise ValueError(
                "activation='softmax' makes the labels compete (one per text); a "
                "multi_label=True classifier takes None (logits) or 'sigmoid'"
            )
        if not multi_label and activation == "sigmoid":
            raise ValueError(
                "activation='sigmoid' is for independent labels: build the classifier "
                "with multi_label=True (any number of labels per text), or use "
                "'softmax' for one class per text"
            )
        init = keras.initializers.TruncatedNormal(stddev=encoder.config.initializer_range)

        # === Layers ===
        dropout_layer = keras.layers.Dropout(dropout, name="classifier_dropout")
        output_layer = keras.layers.Dense(
            num_classes, kernel_initializer=init, name="classifier_output"
        )
        # In float32: mixed precision's float16 probabilities round to 0 / 1.
        probabilities = (
            keras.layers.Activation(activation, dtype="float32", name="probabilities")
            if activation is not None
            else None
        )

        # === Functional Model ===
        inputs = encoder_inputs(encoder)
        pooled = encoder(inputs)["pooled_output"]  # (B, H)
        logits = output_layer(dropout_layer(pooled))  # (B, C)
        outputs = logits if probabilities is None else probabilities(logits)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        trained_on_pairs = None if trained_on_pairs is None else bool(trained_on_pairs)
        keep_config_fields(self, locals())
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
        if self.multi_label:
            # The mean over labels and texts, as PyTorch's BCEWithLogitsLoss
            # (HuggingFace's multi-label loss); from the logits, which is stable.
            return keras.losses.BinaryCrossentropy(from_logits=self.outputs_logits)
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
        if self.multi_label:
            return [
                # Per label, right or wrong; on logits the threshold 0 is probability 0.5.
                keras.metrics.BinaryAccuracy(
                    name="binary_accuracy", threshold=0.0 if self.outputs_logits else 0.5
                ),
                MultiLabelF1("micro", from_logits=self.outputs_logits),
            ]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def encode_targets(self, y: Any) -> Any:
        """Class names (the model's `label_names`) -> class indices; indices
        and regression scores pass through. Multi-label: label names per text
        or multi-hot rows -> float32 multi-hot rows (N, C)."""
        if y is None:
            return y
        if self.regression:
            return check_scores(y)
        if self.multi_label:
            return multi_hot_labels(y, self.label_list())
        refuse_several_labels_per_text(y)
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
        if y is not None and self.multi_label:
            y = self.multi_hot_batch(y)
        elif y is not None and not self.regression and y.dtype == tf.string:
            names = tf.constant(self.answer_names())
            known = tf.equal(y[:, tf.newaxis], names)  # (B, C)
            check = tf.debugging.Assert(
                tf.reduce_all(tf.reduce_any(known, axis=1)),
                [f"labels must be among {self.answer_names()}; got", y],
            )
            with tf.control_dependencies([check]):
                y = tf.argmax(tf.cast(known, tf.int32), axis=1, output_type=tf.int32)
        return self.require_preprocessor()(x), y, None

    def multi_hot_batch(self, y: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """One batch of a dataset's multi-label targets, in graph -> float32
        (B, C): label names per text ((B,) one each, (B, M) padded with "",
        or ragged (B, None)), or multi-hot rows of 0 / 1."""
        if y.dtype != tf.string:
            y = tf.cast(y, tf.float32)
            check = tf.debugging.Assert(
                tf.reduce_all((y == 0.0) | (y == 1.0)),
                ["multi-hot labels hold 0 or 1; got", y],
            )
            with tf.control_dependencies([check]):
                return tf.identity(y)
        if isinstance(y, tf.RaggedTensor):
            y = y.to_tensor("")
        if y.shape.rank == 1:
            y = y[:, tf.newaxis]
        names = tf.constant(self.answer_names())
        known = tf.equal(y[:, :, tf.newaxis], names)  # (B, M, C)
        check = tf.debugging.Assert(
            tf.reduce_all(tf.reduce_any(known, axis=-1) | tf.equal(y, "")),
            [f"labels must be among {self.answer_names()}; got", y],
        )
        with tf.control_dependencies([check]):
            return tf.cast(tf.reduce_any(known, axis=1), tf.float32)  # (B, C)

    # === Single texts or pairs ===

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        *args: Any,
        window_stride: int | None = None,
        **kwargs: Any,
    ) -> keras.callbacks.History:
        """`TextTask.fit`, remembering whether the text had pairs (`trained_on_pairs`).

        `window_stride`: texts longer than the sequence are read as overlapping
        windows `window_stride` pieces apart (`BertPreprocessor.windows`, as
        `predict_labels` reads them), each window a training example with its
        text's label and sample weight (HuggingFace's
        `return_overflowing_tokens`); in-memory single texts only, and
        `validation_split` splits the texts before they are cut."""
        if self.multi_label and kwargs.get("class_weight") is not None:
            raise ValueError(
                "class_weight weighs a row by its one class; a multi_label=True "
                "classifier's rows have several: pass sample_weight, or a loss of "
                "your own (e.g. keras.losses.BinaryFocalCrossentropy(from_logits=True))"
            )
        if window_stride is not None:
            refuse_windows_of_pairs(x)
            args, kwargs = self._windowed_fit_arguments(x, y, args, kwargs, window_stride)
            return super().fit(*args, **kwargs)
        self.note_pairs(x)
        return super().fit(x, y, *args, **kwargs)

    def train_on_batch(self, x: Any, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        """`TextTask.train_on_batch`, remembering whether the text had pairs."""
        self.note_pairs(x)
        return super().train_on_batch(x, y, *args, **kwargs)

    def note_pairs(self, x: Any) -> None:
        """`trained_on_pairs` once training text `x` is seen: True once any pairs came."""
        pairs = text_pairs_given(x)
        if pairs is not None:
            self.trained_on_pairs = bool(self.trained_on_pairs) or pairs

    def _windowed_fit_arguments(self, x, y, args, kwargs, stride):
        """Keras fit's (args, kwargs) with the texts (training and validation)
        replaced by their windows' features, labels and weights repeated per window."""
        call = inspect.signature(keras.Model.fit).bind(self, x, y, *args, **kwargs)
        given = call.arguments
        validation_data = given.get("validation_data")
        texts = [x] if validation_data is None else [x, validation_data]
        if not isinstance(validation_data, (type(None), tf.data.Dataset)):
            texts[1] = tuple(validation_data)[0]
        for data in texts:
            if isinstance(data, tf.data.Dataset) or not self.is_text(check_texts(data)):
                raise ValueError(
                    "window_stride reads in-memory texts (a list, an array, a pandas "
                    "Series); for ids or a tf.data.Dataset, cut the windows first "
                    "(BertPreprocessor.windows)"
                )
        self.trained_on_pairs = bool(self.trained_on_pairs)
        sample_weight = given.get("sample_weight")
        split = given.pop("validation_split", 0.0)
        if split and given.get("validation_data") is None:
            # Keras' last rows, taken from the texts: no text on both sides.
            (x, y, sample_weight), validation = split_validation(
                np.asarray(list(check_texts(x)), dtype=object),
                np.asarray(y),
                None if sample_weight is None else np.asarray(sample_weight),
                split,
            )
            given["validation_data"] = tuple(part for part in validation if part is not None)
        given["x"], given["y"], given["sample_weight"] = self.windowed(x, y, sample_weight, stride)
        if given.get("validation_data") is not None:
            val_x, val_y, val_weight = keras.utils.unpack_x_y_sample_weight(
                tuple(given["validation_data"])
            )
            refuse_windows_of_pairs(val_x)
            windows = self.windowed(val_x, val_y, val_weight, stride)
            given["validation_data"] = windows if windows[2] is not None else windows[:2]
        return call.args[1:], call.kwargs

    def windowed(
        self, x: Any, y: Any, sample_weight: Any, stride: int, chunk_size: int = 1024
    ) -> tuple[dict[str, np.ndarray], Any, Any]:
        """In-memory single texts -> their windows' features (N, T) and each
        window's text's target and sample weight (N,)."""
        x = check_texts(x)
        check_one_label_per_text(y, len(x))
        preprocessor, parts, counts = self.require_preprocessor(), [], []
        for chunk in batches(x, chunk_size):
            features, count = preprocessor.windows(chunk, stride)
            parts.append({name: value.numpy() for name, value in features.items()})
            counts.append(count.numpy())
        features = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
        count = np.concatenate(counts)
        targets = self.encode_targets(y)
        repeat = None if targets is None else np.repeat(np.asarray(targets), count, axis=0)
        weights = None if sample_weight is None else np.repeat(sample_weight, count, axis=0)
        return features, repeat, weights

    def predict(self, x: Any, batch_size: int | None = None, *args: Any, **kwargs: Any) -> Any:
        self.warn_if_pairs_are_new(x)
        return super().predict(x, batch_size, *args, **kwargs)

    def predict_on_batch(self, x: Any) -> Any:
        self.warn_if_pairs_are_new(x)
        return super().predict_on_batch(x)

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

    def label_list(self) -> list[str]:
        """A classifier's class names ("0", "1", ... without `label_names`)."""
        names = self.answer_names()
        if names is None:
            raise ValueError("a regressor (num_classes=1) has no labels")
        return names

    def classify(
        self,
        x: Any,
        batch_size: int | None = None,
        window_stride: int | None = None,
        threshold: float | None = None,
    ) -> dict[str, Any]:
        """Text -> {logits, probabilities (N, C), label (N,)} (a regressor: {score
        (N,)}), computed as the exported classifier computes them. Multi-label:
        {logits, probabilities (N, C) (a sigmoid per label), labels (a list per
        text of the names whose probability is above `threshold`, default 0.5,
        most probable first)}.

        `window_stride`: texts longer than the sequence are not cut at its
        end but read as overlapping windows `window_stride` pieces apart
        (`BertPreprocessor.windows`, single texts only); a text's logits are
        the mean of its windows' logits."""
        threshold = self._threshold(threshold)
        preprocessor, parts = self.require_preprocessor(), []
        if window_stride is not None:
            refuse_windows_of_pairs(x)  # before the pairs' warning: windows are the error
        self.warn_if_pairs_are_new(x)
        for chunk in batches(x, batch_size or 32):
            if window_stride is None:
                logits = self.logits(preprocessor(chunk))  # (B, C)
            else:
                features, count = preprocessor.windows(chunk, window_stride)
                per_window = self.logits(features)  # (N, C)
                logits = tf.RaggedTensor.from_row_lengths(per_window, count).to_tensor()
                logits = tf.reduce_sum(logits, axis=1) / tf.cast(count, logits.dtype)[:, None]
            if self.multi_label:
                parts.append(multi_label_logits(logits, self.label_list(), threshold))
            else:
                parts.append(classify_logits(logits, self.answer_names()))
        answers: dict[str, Any] = {
            name: np.concatenate([part[name].numpy() for part in parts])
            for name in parts[0]
            if name != "labels"  # (B, M): M differs between batches
        }
        if self.multi_label:
            answers["labels"] = [
                [name.decode("utf-8") for name in row if name]
                for part in parts
                for row in part["labels"].numpy()
            ]
        return answers

    def _threshold(self, threshold: float | None) -> float:
        if threshold is None:
            return DEFAULT_THRESHOLD
        if not self.multi_label:
            raise ValueError(
                "threshold: this classifier gives one class per text (the most "
                "probable); a threshold is for multi_label=True classifiers"
            )
        return check_threshold(threshold)

    def logits(self, features: dict[str, tf.Tensor], **arguments: Any) -> tf.Tensor:
        """The output layer's values (B, C), before any `activation`;
        `arguments`: the call's `remove_padding` / `read_positions`."""
        if self.outputs_logits:
            return self(features, training=False, **arguments)
        if not hasattr(self, "_logits_model"):
            self._logits_model = keras.Model(
                self.inputs, self.get_layer("classifier_output").output
            )
            # The call's padding arguments reach the encoder inside, as in self.
            self._logits_model._register_call_context_args(*UNPADDED_CALL_ARGUMENTS)
        return self._logits_model(features, training=False, **arguments)

    def predict_proba(
        self, x: Any, batch_size: int | None = None, window_stride: int | None = None
    ) -> np.ndarray:
        """Text -> class probabilities (N, C): the softmax of the logits, or for
        `multi_label=True` a sigmoid per label (each in [0, 1], independent)."""
        if self.regression:
            raise ValueError(
                "a regressor (num_classes=1) has no class probabilities: predict gives its scores"
            )
        return self.classify(x, batch_size, window_stride)["probabilities"]

    def predict_labels(
        self,
        x: Any,
        batch_size: int | None = None,
        window_stride: int | None = None,
        threshold: float | None = None,
    ) -> list[str] | list[list[str]]:
        """Text -> the most probable class's name per text. Multi-label: per
        text the list of names whose probability is above `threshold` (default
        0.5), most probable first (empty where none is)."""
        if self.regression:
            raise ValueError("a regressor (num_classes=1) has no labels: use predict")
        answers = self.classify(x, batch_size, window_stride, threshold)
        if self.multi_label:
            return answers["labels"]
        return [label.decode("utf-8") for label in answers["label"]]

    def score(
        self,
        x: Any,
        y: Any,
        glue_task: str | None = None,
        batch_size: int | None = None,
        threshold: float | None = None,
        window_stride: int | None = None,
    ) -> dict[str, float]:
        """The task's official figures on text `x` and labels `y` (class names,
        indices or scores): accuracy (and F1 for two classes), Pearson and
        Spearman for a regressor, or the GLUE task's own (`glue_task`, e.g.
        "mrpc", "cola", "stsb"). What `keras-bert finetune` reports on dev.

        Multi-label (`y` label names per text or multi-hot rows; a label
        predicted above `threshold`, default 0.5): `f1_micro` (over every
        text-label decision), `f1_macro` (the mean of each label's F1, 0 for a
        label never true nor predicted, as scikit-learn's `f1_score`) and
        `subset_accuracy` (texts whose labels are all right).

        `window_stride`: each text is read in windows and answered by their
        mean logits, as `classify` / `predict_labels` answer it with the
        same `window_stride` (the figures are those of their answers)."""
        from keras_bert.datasets import metrics
        from keras_bert.datasets.glue import glue_metrics

        threshold = self._threshold(threshold)
        if self.multi_label and glue_task is not None:
            raise ValueError(f"glue_task={glue_task!r}: GLUE tasks have one label per text")
        if window_stride is None:
            outputs = self.predict(x, batch_size=batch_size or 64, verbose=0)
        else:
            outputs = self.classify(x, batch_size or 64, window_stride)
            outputs = outputs["score"][:, None] if self.regression else outputs["logits"]
        labels = np.asarray(self.encode_targets(y))
        if self.multi_label:
            outputs = tf.cast(outputs, tf.float32)
            # classify's windowed answers are logits whatever the activation.
            are_logits = self.outputs_logits or window_stride is not None
            probabilities = tf.sigmoid(outputs) if are_logits else outputs
            return metrics.multi_label_scores(labels, probabilities.numpy() > threshold)
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

    # Kept from the constructor's arguments (`keep_config_fields`).
    num_classes: int
    dropout: float
    label_names: list[str] | None
    activation: str | None
    trained_on_pairs: bool | None
    multi_label: bool
    config_fields = (
        "num_classes",
        "dropout",
        "label_names",
        "activation",
        "trained_on_pairs",
        "multi_label",
        "name",
        "trainable",
    )
