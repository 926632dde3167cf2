"""Serving signatures of a bare encoder: text -> normalised sentence embedding.

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

from __future__ import annotations

from typing import Callable, Mapping

import tensorflow as tf

from keras_bert.export.base import IDS_SPECS, TaskServing, signature
from keras_bert.layers.pooling import mean_pool


class EmbeddingsServing(TaskServing):
    """`serving_default(text)` -> `embedding`: the L2-normalised mean of
    `sequence_output` over the real tokens (as `keras_bert.layers.pooling.mean_pool`)."""

    task = "embeddings"
    PADDINGS = ("max_length", "longest")

    def embed(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        sequence = self.run_model(features)["sequence_output"]  # (B, T, H)
        return {"embedding": mean_pool(sequence, features["input_mask"])}  # (B, H)

    def pack_text(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        ids, _, _ = self.tokenize_with_offsets(text)
        return self.pack_function()(ids)

    def signatures(self) -> dict[str, Callable]:
        @signature(tf.TensorSpec([None], tf.string, name="text"))
        def serve_text(text):
            return self.embed(self.pack_text(text))

        @signature(tf.TensorSpec([None], tf.string, name="inputs"))
        def serve_examples(inputs):
            parsed = tf.io.parse_example(inputs, {"text": tf.io.FixedLenFeature([], tf.string)})
            return self.embed(self.pack_text(parsed["text"]))

        @signature(*IDS_SPECS.values())
        def serve_ids(input_ids, input_mask, segment_ids):
            return self.embed(self.checked_ids(input_ids, input_mask, segment_ids))

        return {
            "serving_default": serve_text,
            "serve_examples": serve_examples,
            "serve_ids": serve_ids,
        }
