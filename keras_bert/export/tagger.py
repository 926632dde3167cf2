"""Serving signatures of a `BertTokenClassifier` (named entities, tags).

The words, their first pieces and the conlleval entities are
`keras_bert.preprocessing.tagging.WordTagger`'s, as in the model's `predict`.

- `serving_default(text)` and `serve_examples(inputs)` (bytes feature `text`):
  `tokens` (B, W) the words, `tags` (B, W) their tags, `token_start` /
  `token_end` (B, W) their character offsets, `num_tokens` (B,);
  `entity_type`, `entity_text` (B, E), `entity_start` / `entity_end` (B, E)
  (character offsets, end exclusive: `text[start:end] == entity_text`),
  `num_entities` (B,). Rows are padded with "" and -1.
- `serve_ids(input_ids, input_mask, segment_ids)`: `logits` (B, T, K),
  `tag_ids` (B, T) and `tags` (B, T), one per word piece.

Legend for shape comments: B = batch, W = words, E = entities, T = sequence
length, K = tags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import tensorflow as tf

from keras_bert.export.base import TaskServing, signature
from keras_bert.preprocessing.tagging import WordTagger, tag_names

if TYPE_CHECKING:
    from keras_bert.models.token_classifier import BertTokenClassifier
    from keras_bert.text.tokenizer import BertTokenizer


class TaggerServing(TaskServing):
    task = "tagging"

    def __init__(
        self,
        model: BertTokenClassifier,
        tokenizer: BertTokenizer,
        seq_length: int,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(model, tokenizer, seq_length)
        names = label_names if label_names is not None else getattr(model, "label_names", None)
        self.tagger = WordTagger(tokenizer, seq_length, tag_names(model.num_labels, names))
        self.label_names = self.tagger.label_names

    def metadata(self) -> dict[str, Any]:
        return {
            **super().metadata(),
            "label_names": self.label_names,
            "entity_types": self.tagger.entity_types,
        }

    # === Signatures ===

    def signatures(self) -> dict[str, Callable]:
        @signature(tf.TensorSpec([None], tf.string, name="text"))
        def serve_text(text):
            return self.tagger.tag_words(text, self.run_model)

        @signature(tf.TensorSpec([None], tf.string, name="inputs"))
        def serve_examples(inputs):
            parsed = tf.io.parse_example(inputs, {"text": tf.io.FixedLenFeature([], tf.string)})
            return self.tagger.tag_words(parsed["text"], self.run_model)

        def tag_ids(features):
            logits = self.run_model(features)  # (B, T, K)
            tag_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return {
                "logits": logits,
                "tag_ids": tag_ids,
                "tags": tf.gather(tf.constant(self.label_names), tag_ids),
            }

        return {
            "serving_default": serve_text,
            "serve_examples": serve_examples,
            "serve_ids": self.ids_signature(tag_ids),
        }
