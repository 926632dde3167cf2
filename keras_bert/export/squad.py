"""Serving signatures of a `BertSpanExtractor`: extractive question answering.

The windows and the span search are `keras_bert.preprocessing.squad.SpanFinder`'s
(run_squad.py's, in the graph; read its docstring), as in the model's `predict`.

- `serving_default(question, context)` and `serve_examples(inputs)` (bytes
  features `question`, `context`): `answer`, `start`, `end`, `score`
  (+ `has_answer`, `null_score_diff` for SQuAD 2.0), each (B,).
- `serve_ids(input_ids, input_mask, segment_ids)`: `start_logits`, `end_logits`.

Legend for shape comments: B = batch, T = sequence length.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import tensorflow as tf

from keras_bert.export.base import TaskServing, signature
from keras_bert.preprocessing.squad import SpanFinder
from keras_bert.preprocessing.text_ops import check_same_batch

if TYPE_CHECKING:
    from keras_bert.models.span_extractor import BertSpanExtractor
    from keras_bert.text.tokenizer import BertTokenizer


class SquadServing(TaskServing):
    task = "question_answering"

    def __init__(
        self,
        model: BertSpanExtractor,
        tokenizer: BertTokenizer,
        seq_length: int,
        max_answer_length: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(model, tokenizer, seq_length)
        if max_answer_length is None:
            max_answer_length = getattr(model, "max_answer_length", 30)
        self.finder = SpanFinder(
            tokenizer, seq_length, max_answer_length=max_answer_length, **options
        )
        self.version_2_with_negative = self.finder.version_2_with_negative

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), **self.finder.options()}

    def answer(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        return self.finder.answer(question, context, self.run_model)

    # === Signatures ===

    def signatures(self) -> dict[str, Callable]:
        @signature(
            tf.TensorSpec([None], tf.string, name="question"),
            tf.TensorSpec([None], tf.string, name="context"),
        )
        def serve_text(question, context):
            check = check_same_batch("question", question, "context", context)
            with tf.control_dependencies([check]):
                return self.answer(tf.identity(question), tf.identity(context))

        @signature(tf.TensorSpec([None], tf.string, name="inputs"))
        def serve_examples(inputs):
            parsed = tf.io.parse_example(
                inputs,
                {
                    "question": tf.io.FixedLenFeature([], tf.string),
                    "context": tf.io.FixedLenFeature([], tf.string),
                },
            )
            return self.answer(parsed["question"], parsed["context"])

        return {
            "serving_default": serve_text,
            "serve_examples": serve_examples,
            "serve_ids": self.ids_signature(self.run_model),
        }
