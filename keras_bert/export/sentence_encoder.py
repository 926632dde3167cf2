"""Serving signatures of a `BertSentenceEncoder`: texts -> embeddings, and similarities.

  serving_default(text)          -> {"embedding": (B, D)}, what `predict` returns
  similarity(text_a, text_b)     -> {"similarity": (A, B)}, cosines, as `similarity`
  serve_examples(inputs)         -> the same as serving_default, from tf.Examples
                                    with a `text` feature (TensorFlow Serving's Predict)
  serve_ids(input_ids, input_mask, segment_ids) -> {"embedding": (B, D)}

The pooling, Dense layers and normalisation are the model's own (traced with
it); do_lower_case (`lowercase_text`) lowercases in the graph first. A bare
`BertEncoder` is exported as the BertSentenceEncoder that mean-pools and
normalises it (`EncoderServing`).

Legend for shape comments: A, B = batches of texts, D = embedding size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

import tensorflow as tf

from keras_bert.export.base import TaskServing, signature

if TYPE_CHECKING:
    import keras

    from keras_bert.text.tokenizer import BertTokenizer


def cosines(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """(A, D), (B, D) -> (A, B) cosine similarities (zero vectors: 0)."""
    a = a / tf.maximum(tf.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b / tf.maximum(tf.norm(b, axis=-1, keepdims=True), 1e-12)
    return tf.matmul(a, b, transpose_b=True)


class SentenceEncoderServing(TaskServing):
    """A `BertSentenceEncoder`'s signatures (see the module docstring)."""

    task = "sentence_embeddings"
    PADDINGS = ("max_length", "longest")

    def embed(self, features: Mapping[str, tf.Tensor]) -> tf.Tensor:
        return self.run_model(features)  # (B, D) float32

    def embed_text(self, text: tf.Tensor) -> tf.Tensor:
        if self.model.lowercase_text and not self.tokenizer.lowercase:
            text = tf.strings.lower(text, encoding="utf-8")  # str.lower, as sentence-transformers
        ids, _, _ = self.tokenize_with_offsets(text)
        return self.embed(self.pack_function()(ids))

    def metadata(self) -> dict:
        return {
            **super().metadata(),
            "pooling": list(self.model.pooling),
            "normalize": self.model.normalize,
            "lowercase_text": self.model.lowercase_text,
        }

    def signatures(self) -> dict[str, Callable]:
        @signature(tf.TensorSpec([None], tf.string, name="text"))
        def serve_text(text):
            return {"embedding": self.embed_text(text)}

        @signature(
            tf.TensorSpec([None], tf.string, name="text_a"),
            tf.TensorSpec([None], tf.string, name="text_b"),
        )
        def similarity(text_a, text_b):
            return {"similarity": cosines(self.embed_text(text_a), self.embed_text(text_b))}

        @signature(tf.TensorSpec([None], tf.string, name="inputs"))
        def serve_examples(inputs):
            parsed = tf.io.parse_example(inputs, {"text": tf.io.FixedLenFeature([], tf.string)})
            return {"embedding": self.embed_text(parsed["text"])}

        return {
            "serving_default": serve_text,
            "similarity": similarity,
            "serve_examples": serve_examples,
            "serve_ids": self.ids_signature(lambda features: {"embedding": self.embed(features)}),
        }


class EncoderServing(SentenceEncoderServing):
    """A bare `BertEncoder`'s signatures: those of `BertSentenceEncoder(encoder,
    "mean", normalize=True)`, under the task name "embeddings" that clients of
    earlier encoder exports read in the metadata."""

    task = "embeddings"

    def __init__(self, encoder: keras.Model, tokenizer: BertTokenizer, seq_length: int) -> None:
        from keras_bert.models.sentence_encoder import BertSentenceEncoder

        model = BertSentenceEncoder(encoder, "mean", normalize=True)
        super().__init__(model, tokenizer, seq_length)
