"""BertSpanExtractor: extractive question answering (SQuAD v1.1 / v2.0).

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import keras
import numpy as np
import tensorflow as tf

from keras_bert.config_fields import keep_config_fields
from keras_bert.datasets import squad
from keras_bert.layers.task_heads import HEADS, BiLSTMHead, SpanHead
from keras_bert.models.classifier import deserialize_encoder, encoder_inputs
from keras_bert.models.text_task import TextTask, batches, deserialize_preprocessor
from keras_bert.preprocessing.preprocessor import is_text
from keras_bert.preprocessing.squad import SpanFinder, check_window_room
from keras_bert.text.tokenizer import text_tensor

if TYPE_CHECKING:
    from keras_bert.models.encoder import BertEncoder
    from keras_bert.preprocessing.preprocessor import BertPreprocessor

QUESTION, CONTEXT = "question", "context"


@keras.saving.register_keras_serializable(package="keras_bert")
class BertSpanExtractor(TextTask, keras.Model):
    """A start vector S and an end vector E scored against every token T_i.

    The answer span (i, j) scores S·T_i + E·T_j with j >= i and at most
    `max_answer_length` pieces; SQuAD v2.0's no-answer score is the span at
    `[CLS]` (position 0). The span search and the no-answer threshold live in
    `keras_bert.datasets.squad`, on the logits this model returns. As run_squad.py,
    one dense layer of width 2 (S and E as its two columns) and no dropout.

    Args:
      encoder: a `BertEncoder`.
      max_answer_length: longest answer in word pieces (30, as the paper);
        kept in the config for post-processing and export.
      preprocessor: optional `BertPreprocessor` (its `seq_length` is the
        window length, 384 in the paper); with it `fit` takes
        {"question": [...], "context": [...]} and answers
        {"text": [...], "answer_start": [...]} (character offsets, SQuAD's
        fields; an empty text is SQuAD 2.0's "no answer"), and `predict` on
        questions and contexts gives the answers.
      head: "linear" (the paper's) or "bilstm": a randomly initialised BiLSTM
        (H / 2 units per direction) before the span layer, the paper's
        "LTR & No NSP + BiLSTM" ablation.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Outputs: `start_logits` and `end_logits`, each (B, T).
    """

    def __init__(
        self,
        encoder: BertEncoder | dict,
        max_answer_length: int = squad.MAX_ANSWER_LENGTH,
        preprocessor: BertPreprocessor | dict | None = None,
        head: str = "linear",
        max_query_length: int = squad.MAX_QUERY_LENGTH,
        doc_stride: int = squad.DOC_STRIDE,
        **kwargs: Any,
    ) -> None:
        encoder = deserialize_encoder(encoder)
        preprocessor = deserialize_preprocessor(preprocessor)
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if preprocessor is not None:
            # Here, not at the first predict after a whole training run.
            check_window_room(preprocessor.seq_length, max_query_length)

        # === Layers ===
        bilstm = None
        if head == "bilstm":
            bilstm = BiLSTMHead(encoder.config.hidden_size // 2, name="span_bilstm")
        span_head = SpanHead(encoder.config.initializer_range, name="span_head")

        # === Functional Model ===
        inputs = encoder_inputs(encoder)
        sequence = encoder(inputs)["sequence_output"]  # (B, T, H)
        if bilstm is not None:
            sequence = bilstm(sequence, inputs["input_mask"])  # (B, T, H)
        start_logits, end_logits = span_head(sequence)  # (B, T) each
        outputs = {"start_logits": start_logits, "end_logits": end_logits}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        keep_config_fields(self, locals())

    # === Questions in, answers out ===

    def default_loss(self) -> dict[str, keras.losses.Loss]:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return {"start_logits": loss, "end_logits": loss}

    default_seq_length = 384  # the paper's SQuAD windows

    # run_squad.py's total loss is the mean of the start and end losses.
    default_loss_weights = {"start_logits": 0.5, "end_logits": 0.5}

    # The start / end softmax spans every position of the window, padding
    # included (as run_squad's): packing would change the padding's logits.
    removes_padding = False

    def encode_text(self, x: Any, y: Any = None) -> tuple[dict[str, np.ndarray], Any, Any]:
        """Questions, contexts (+ answers) -> run_squad's training windows and
        their start / end positions (`keras_bert.datasets.squad`)."""
        questions, contexts = _questions_and_contexts(x)
        answers = _answers(y, len(questions))
        if y is None:  # predict: an empty question has no answer to give
            self.span_finder().check_questions(questions)
            self.span_finder().check_has_words(contexts, "context", "context")
        preprocessor = self.require_preprocessor()
        qas = [
            {
                "id": str(i),
                "question": q,
                "answers": [] if answer is None or not answer["text"] else [answer],
                "is_impossible": answer is not None and not answer["text"],
            }
            for i, (q, answer) in enumerate(zip(questions, answers))
        ]
        dataset = [{"paragraphs": [{"context": c, "qas": [qa]}]} for c, qa in zip(contexts, qas)]
        examples = squad.read_squad_examples(
            dataset,
            is_training=y is not None,
            version_2_with_negative=any(qa["is_impossible"] for qa in qas),
            source="fit",
        )
        features = squad.feature_arrays(
            squad.convert_examples_to_features(
                examples,
                preprocessor.tokenizer,
                preprocessor.seq_length,
                doc_stride=self.doc_stride,
                max_query_length=self.max_query_length,
                is_training=y is not None,
            )
        )
        targets = {
            "start_logits": features.pop("start_positions"),
            "end_logits": features.pop("end_positions"),
        }
        return features, (targets if y is not None else None), None

    text_forms = "(questions, contexts) or {'question': [...], 'context': [...]}"

    def is_text(self, x: Any) -> bool:
        if isinstance(x, Mapping):
            return QUESTION in x and CONTEXT in x
        return isinstance(x, tuple) and len(x) == 2 and is_text(x[0]) and is_text(x[1])

    def is_text_spec(self, spec: Any) -> bool:
        return isinstance(spec, Mapping) and QUESTION in spec and CONTEXT in spec

    maps_text_in_graph = False  # run_squad's windows come from Python

    def map_text_batch(self, x: Any, y: Any = None) -> tuple[dict[str, tf.Tensor], Any, Any]:
        raise ValueError(
            "a BertSpanExtractor trains on SQuAD text held in memory (dicts of "
            "lists, see the class docstring), not on a tf.data.Dataset of text: "
            "its windows and answer positions come from run_squad's Python "
            "conversion"
        )

    def span_finder(self, **options: Any) -> SpanFinder:
        preprocessor = self.require_preprocessor()
        options.setdefault("max_answer_length", self.max_answer_length)
        options.setdefault("max_query_length", self.max_query_length)
        options.setdefault("doc_stride", self.doc_stride)
        return SpanFinder(preprocessor.tokenizer, preprocessor.seq_length, **options)

    def unused_weights(self) -> list:
        return self.encoder.pooler.weights  # spans read the sequence output only

    def predict_answers(
        self, x: Any, batch_size: int | None = None, n_best: int = 1, **options: Any
    ) -> list[dict]:
        """{"question": [...], "context": [...]} (or a (questions, contexts)
        tuple) -> per question {"answer", "start", "end", "score"} (character
        offsets into the context; "" and -1 without an answer), plus
        "has_answer" and "null_score_diff" with `version_2_with_negative=True`
        (the null threshold: `null_score_diff_threshold`), and with `n_best` > 1
        "n_best": the best spans, best first, each {"answer", "start", "end",
        "score"}. `options`: `SpanFinder`'s (doc_stride, max_query_length,
        n_best_size, null_score_diff_threshold, max_windows), as the exported
        model takes them."""
        finder = self.span_finder(**options)
        questions, contexts = _questions_and_contexts(x)
        finder.check_questions(questions)
        finder.check_has_words(contexts, "context", "context")
        results = []
        for chunk in batches((questions, contexts), batch_size or 8):
            out = finder.answer(
                text_tensor(chunk[0]),
                text_tensor(chunk[1]),
                lambda f: self(f, training=False),
                n_best=n_best,
            )
            out = {name: value.numpy() for name, value in out.items()}
            for row in range(len(chunk[0])):
                result = {
                    name: _python(value[row])
                    for name, value in out.items()
                    if not name.startswith("n_best_")
                }
                if n_best > 1:
                    result["n_best"] = [
                        {
                            field: _python(out[f"n_best_{field}"][row, i])
                            for field in ("answer", "start", "end", "score")
                        }
                        for i in range(n_best)
                        if out["n_best_start"][row, i] >= 0
                    ]
                results.append(result)
        return results

    def squad_predictions(
        self,
        dataset: Any,
        version_2_with_negative: bool = False,
        n_best_size: int = squad.N_BEST_SIZE,
        null_score_diff_threshold: float = squad.NULL_SCORE_DIFF_THRESHOLD,
        batch_size: int | None = None,
        source: str = "",
    ) -> tuple:
        """A SQuAD `data` list -> run_squad.py's (predictions {id: answer},
        no-answer scores {id: null score diff}, n-best lists), from its windows
        and its post-processing (`keras_bert.datasets.squad`)."""
        preprocessor = self.require_preprocessor()
        examples = squad.read_squad_examples(
            dataset,
            is_training=False,
            version_2_with_negative=version_2_with_negative,
            source=source,
        )
        windows = squad.convert_examples_to_features(
            examples,
            preprocessor.tokenizer,
            preprocessor.seq_length,
            self.doc_stride,
            self.max_query_length,
            is_training=False,
        )
        arrays = squad.feature_arrays(windows)
        arrays = {name: arrays[name] for name in ("input_ids", "input_mask", "segment_ids")}
        outputs = self.predict(arrays, batch_size=batch_size or 64, verbose=0)
        return squad.postprocess(
            examples,
            windows,
            outputs["start_logits"],
            outputs["end_logits"],
            n_best_size=n_best_size,
            max_answer_length=self.max_answer_length,
            version_2_with_negative=version_2_with_negative,
            null_score_diff_threshold=null_score_diff_threshold,
        )

    def score(
        self,
        dataset: Any,
        version_2_with_negative: bool = False,
        n_best_size: int = squad.N_BEST_SIZE,
        null_score_diff_threshold: float = squad.NULL_SCORE_DIFF_THRESHOLD,
        batch_size: int | None = None,
        source: str = "",
    ) -> dict[str, float]:
        """The official SQuAD v1.1 (exact match, F1) or v2.0 (also HasAns /
        NoAns, best F1 and its threshold) figures on a SQuAD `data` list,
        answered as run_squad.py answers. What `keras-bert finetune` reports
        on dev."""
        from keras_bert.datasets import metrics

        predictions, na_scores, _ = self.squad_predictions(
            dataset,
            version_2_with_negative,
            n_best_size,
            null_score_diff_threshold,
            batch_size,
            source,
        )
        if version_2_with_negative:
            return metrics.squad_v2_scores(
                dataset, predictions, na_scores, na_prob_threshold=null_score_diff_threshold
            )
        return metrics.squad_v1_scores(dataset, predictions)

    # === Config ===

    # Kept from the constructor's arguments (`keep_config_fields`).
    max_answer_length: int
    head: str
    max_query_length: int
    doc_stride: int
    config_fields = (
        "max_answer_length",
        "head",
        "max_query_length",
        "doc_stride",
        "name",
        "trainable",
    )


def _questions_and_contexts(x: Any) -> tuple[list[str], list[str]]:
    if isinstance(x, Mapping) and QUESTION in x and CONTEXT in x:
        questions, contexts = x[QUESTION], x[CONTEXT]
    elif isinstance(x, tuple) and len(x) == 2:
        questions, contexts = x
    else:
        raise ValueError(
            'a BertSpanExtractor takes {"question": [...], "context": [...]} '
            "or a (questions, contexts) tuple"
        )
    questions, contexts = [_text(q) for q in questions], [_text(c) for c in contexts]
    if len(questions) != len(contexts):
        raise ValueError(
            f"one context per question: got {len(questions)} questions and {len(contexts)} contexts"
        )
    return questions, contexts


def _answers(y: Any, count: int) -> list[dict[str, Any] | None]:
    """{"text": [...], "answer_start": [...]} or a list of such dicts -> a list."""
    if y is None:
        return [None] * count
    if isinstance(y, Mapping):
        y = [{"text": t, "answer_start": int(s)} for t, s in zip(y["text"], y["answer_start"])]
    answers: list[dict[str, Any] | None] = [
        {"text": _text(a["text"]), "answer_start": int(a["answer_start"])} for a in y
    ]
    if len(answers) != count:
        raise ValueError(
            f"one answer per question: got {count} questions and {len(answers)} answers"
        )
    return answers


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _python(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value.item() if isinstance(value, np.generic) else value
