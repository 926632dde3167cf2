"""Serving signatures of a `BertClassifier`: sentence (pair) classification
and regression.

- `serving_default(text, text_pair)`: `text_pair` may be left out of a
  TensorFlow Serving request (its default, stored in the SignatureDef, is an
  empty batch: single sentences); else it holds one string per `text`.
  Outputs `probabilities` (B, C), `logits` (B, C) and `label` (B,) (the name of
  the most probable class); a regressor (`num_classes=1`) outputs `score` (B,).
  A multi-label classifier (`multi_label=True`) outputs `probabilities` (B, C)
  (a sigmoid per label), `logits` (B, C) and `labels` (B, M): per text the
  names whose probability is above the export's `threshold` (0.5 unless
  `export_saved_model(..., threshold=)` says otherwise; in the metadata),
  most probable first, padded with "" to the request's longest row.
- `serve_examples(inputs)`: serialized `tf.Example`s with a bytes feature
  `text` and, per example, an optional `text_pair`. Outputs `classes` (B, C)
  and `scores` (B, C) (the Classify API's names; a multi-label classifier's
  scores are its per-label probabilities), or `outputs` (B,) for a
  regressor (the Regress API's name); the Predict API reads the same.
- `serve_ids(input_ids, input_mask, segment_ids)`: the `serving_default` outputs.

Pairs to a model trained on single texts (its `trained_on_pairs` is False):
the signatures accept them, as the model's `predict` does, and answer; the
first request that holds a pair prints one warning line on the server's
stderr (a variable in the SavedModel remembers it, so once per loaded model,
not once per request: a server's log is no place for a line per call). The
metadata (`assets/keras_bert_export.json`) carries `trained_on_pairs`, so a
client can check before sending pairs. Refusing them instead would break
clients whose model was trained on ids, where nobody knows.

Legend for shape comments: B = batch, C = classes, T = sequence length,
M = most labels above the threshold in a request's row.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import tensorflow as tf

from keras_bert.export.base import TaskServing, signature
from keras_bert.models.user_inputs import check_threshold
from keras_bert.preprocessing.classification import (
    class_names,
    classify_logits,
    multi_label_logits,
)
from keras_bert.preprocessing.text_ops import check_same_batch

if TYPE_CHECKING:
    from keras_bert.models.classifier import BertClassifier
    from keras_bert.text.tokenizer import BertTokenizer


class ClassifierServing(TaskServing):
    PADDINGS = ("max_length", "longest")

    def __init__(
        self,
        model: BertClassifier,
        tokenizer: BertTokenizer,
        seq_length: int,
        label_names: Sequence[str] | None = None,
        threshold: float | None = None,
    ) -> None:
        super().__init__(model, tokenizer, seq_length)
        self.regression = model.num_classes == 1
        self.multi_label = bool(getattr(model, "multi_label", False))
        if threshold is not None and not self.multi_label:
            raise ValueError(
                "threshold: this classifier answers one class per text (the most "
                "probable); a threshold is for multi_label=True classifiers"
            )
        # Labels above it are a multi-label classifier's answers.
        self.threshold = None
        if self.multi_label:
            self.threshold = 0.5 if threshold is None else check_threshold(threshold)
        names = label_names if label_names is not None else getattr(model, "label_names", None)
        self.label_names = class_names(model.num_classes, names)
        self.trained_on_pairs = getattr(model, "trained_on_pairs", None)
        # Set by the first pair a model trained on single texts is given.
        self.warned_about_pairs = (
            tf.Variable(False, trainable=False, name="warned_about_pairs")
            if self.trained_on_pairs is False
            else None
        )

    @property
    def state_variables(self) -> list[tf.Variable]:
        return [self.warned_about_pairs] if self.warned_about_pairs is not None else []

    def warn_once_about_pairs(self, any_pair: tf.Tensor) -> list[tf.Operation]:
        """Control dependencies that print the pairs warning the first time
        `any_pair` (a bool scalar) is True, for a model trained on single texts."""
        if self.warned_about_pairs is None:
            return []
        flag = self.warned_about_pairs

        def warn():
            printed = tf.print(
                "keras_bert export: this classifier was trained on single texts and is "
                "given text pairs: its answers to pairs are untrained (warned once)",
                output_stream=sys.stderr,
            )
            with tf.control_dependencies([printed]):
                return flag.assign(True, read_value=True)

        return [tf.cond(any_pair & tf.logical_not(flag), warn, flag.read_value)]

    @property
    def task(self) -> str:
        if self.multi_label:
            return "multi_label_classification"  # HuggingFace's problem_type
        return "regression" if self.regression else "classification"

    def metadata(self) -> dict[str, Any]:
        extra = {"threshold": self.threshold} if self.multi_label else {}
        return {
            **super().metadata(),
            "label_names": self.label_names,
            "trained_on_pairs": self.trained_on_pairs,
            "multi_label": self.multi_label,
            **extra,
        }

    def model_outputs(self, features: Mapping[str, tf.Tensor], **arguments: Any) -> tf.Tensor:
        # The logits, before a softmax / sigmoid `activation`: the answers start there.
        return self.model.logits(features, **arguments)

    # === Features ===

    def pack(
        self, text: tf.Tensor, text_pair: tf.Tensor, has_pair: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """Tokenizes both sides in one call, then packs each row as a single
        sentence or as a pair (`has_pair` (B,) bool), exactly as `tokenizer.pack`."""
        batch = tf.size(text)
        ids, _, _ = self.tokenize_with_offsets(tf.concat([text, text_pair], 0))
        first, second = ids[:batch], ids[batch:]
        single = self.pack_function()(first)
        paired = self.pack_function(pair=True)(first, second)
        return self.tokenizer.select_packed(
            has_pair, paired, single, self.seq_length, self.padding, self.length_multiple
        )  # (B, T)

    def pack_batch(self, text: tf.Tensor, text_pair: tf.Tensor) -> dict[str, tf.Tensor]:
        """`serving_default`'s features: every row a single sentence when
        `text_pair` is empty, else every row a pair. A cond runs only that
        packing (`pack` runs both and picks per row, work a batch of one
        notices)."""

        def single():
            ids, _, _ = self.tokenize_with_offsets(text)
            return self.pack_function()(ids)

        def pairs():
            batch = tf.size(text)
            ids, _, _ = self.tokenize_with_offsets(tf.concat([text, text_pair], 0))
            return self.pack_function(pair=True)(ids[:batch], ids[batch:])

        return tf.cond(tf.size(text_pair) > 0, pairs, single)  # (B, T)

    def classify(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        logits = self.run_model(features)  # (B, C)
        if self.multi_label:
            return multi_label_logits(logits, self.label_names, self.threshold)
        return classify_logits(logits, self.label_names)

    # === Signatures ===

    def signatures(self) -> dict[str, Callable]:
        @signature(
            tf.TensorSpec([None], tf.string, name="text"),
            tf.TensorSpec([None], tf.string, name="text_pair"),
        )
        def serve_text(text, text_pair=tf.constant([], tf.string)):
            check = check_same_batch("text", text, "text_pair", text_pair, allow_empty_b=True)
            with tf.control_dependencies(
                [check] + self.warn_once_about_pairs(tf.size(text_pair) > 0)
            ):
                features = self.pack_batch(text, text_pair)
            return self.classify(features)

        @signature(tf.TensorSpec([None], tf.string, name="inputs"))
        def serve_examples(inputs):
            parsed = tf.io.parse_example(
                inputs,
                {
                    "text": tf.io.FixedLenFeature([], tf.string),
                    "text_pair": tf.io.VarLenFeature(tf.string),
                },
            )
            pair = parsed["text_pair"]  # sparse (B, 0 or 1)
            batch = tf.size(inputs)
            has_pair = (
                tf.math.unsorted_segment_sum(
                    tf.ones_like(pair.indices[:, 0]), pair.indices[:, 0], batch
                )
                > 0
            )  # (B,)
            # The first `text_pair` of each example ("" where it has none).
            text_pair = tf.concat([tf.sparse.to_dense(pair, ""), tf.fill([batch, 1], "")], 1)[:, 0]
            with tf.control_dependencies(self.warn_once_about_pairs(tf.reduce_any(has_pair))):
                features = self.pack(parsed["text"], text_pair, has_pair)
            outputs = self.classify(features)
            if self.regression:
                return {"outputs": outputs["score"]}
            classes = tf.tile(tf.constant(self.label_names)[tf.newaxis], [batch, 1])
            return {"classes": classes, "scores": outputs["probabilities"]}  # (B, C) each

        return {
            "serving_default": serve_text,
            "serve_examples": serve_examples,
            "serve_ids": self.ids_signature(self.classify),
        }
