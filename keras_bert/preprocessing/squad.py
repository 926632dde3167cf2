"""Extractive question answering in the graph: run_squad.py around a span extractor.

Everything google-research/bert's `run_squad.py` does around the model runs
inside the graph, with its defaults (`SpanFinder.answer`, used by
`BertSpanExtractor.predict` on text and by the exported signatures):

1. the question is cut to `max_query_length` pieces; the context is cut into
   windows of at most `seq_length - len(question) - 3` pieces, `doc_stride`
   apart, each packed as `[CLS] question [SEP] window [SEP]`;
2. every window goes through the model in one batch;
3. candidates are the `n_best_size` best start and end positions of each
   window among its context pieces and `[CLS]` (run_squad ranks every
   position: see `keras_bert.datasets.squad` for why not); a span (i, j)
   counts if both lie in the context, j >= i, it has at most
   `max_answer_length` pieces and window holds i with the most context
   around it (the max-context rule); its score is start + end logit;
4. the best span over all windows is mapped back to the context: `start` /
   `end` are the character offsets of its first piece's first character and
   its last piece's last (`context[start:end]`, the exact characters), and
   `answer` is that span with each whitespace run as one space, as
   run_squad.py writes it and as `keras_bert.datasets.squad.postprocess`
   answers from files (`answer_text`: one rule, and why);
5. SQuAD 2.0 models (`version_2_with_negative`): the null score is the lowest
   `[CLS]` start + end logit over the windows; the question has an answer if
   null score - best span score <= `null_score_diff_threshold`.

Contexts longer than `max_windows` windows are searched in their first
`max_windows` windows only (64 windows cover about 8,300 pieces at the
defaults). Without an answer (SQuAD 2.0's null wins, or no span qualifies,
as for an empty context) `answer` is "" and `start` = `end` = -1; `score` is
the best span's score, -inf when no span qualifies. An empty question (no
word piece once cleaned) is refused: an InvalidArgumentError naming its batch
position in the graph, a ValueError from `check_questions` in Python.

Legend for shape comments: B = batch, N = windows of the whole batch, T =
sequence length, K = n_best_size, P = word pieces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import tensorflow as tf

from keras_bert.datasets import squad
from keras_bert.datasets.squad import ANSWER_WHITESPACE
from keras_bert.preprocessing.text_ops import char_offsets, clean_utf8, surface_text
from keras_bert.preprocessing.traced import traced_pack, traced_tokenizer

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer


def check_window_room(seq_length: int, max_query_length: int) -> None:
    """A window holds [CLS] question [SEP] context [SEP]: room for some context."""
    if seq_length - max_query_length - 3 < 1:
        raise ValueError(
            f"seq_length ({seq_length}) leaves no room for the context after "
            f"max_query_length ({max_query_length}) and 3 special tokens: pass a "
            f"larger seq_length= (the paper's 384) or a smaller max_query_length= "
            f"(at most {max(seq_length - 4, 1)})"
        )


class SpanFinder:
    """run_squad's windows before the model and its span search after it."""

    # What the windows and the span search are cut and run by (`options()`).
    OPTIONS = (
        "version_2_with_negative",
        "doc_stride",
        "max_query_length",
        "max_answer_length",
        "n_best_size",
        "null_score_diff_threshold",
        "max_windows",
    )

    def __init__(
        self,
        tokenizer: BertTokenizer,
        seq_length: int,
        version_2_with_negative: bool = False,
        doc_stride: int = squad.DOC_STRIDE,
        max_query_length: int = squad.MAX_QUERY_LENGTH,
        max_answer_length: int = squad.MAX_ANSWER_LENGTH,
        n_best_size: int = squad.N_BEST_SIZE,
        null_score_diff_threshold: float = squad.NULL_SCORE_DIFF_THRESHOLD,
        max_windows: int = 64,
    ) -> None:
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.tokenize_with_offsets = traced_tokenizer(tokenizer)
        check_window_room(seq_length, max_query_length)
        for name, value in (
            ("doc_stride", doc_stride),
            ("max_query_length", max_query_length),
            ("max_answer_length", max_answer_length),
            ("n_best_size", n_best_size),
            ("max_windows", max_windows),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.version_2_with_negative = bool(version_2_with_negative)
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.max_answer_length = max_answer_length
        self.n_best_size = min(n_best_size, seq_length)
        self.null_score_diff_threshold = float(null_score_diff_threshold)
        self.max_windows = max_windows

    def options(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.OPTIONS}

    # === Windows ===

    def windows(
        self, question: tf.Tensor, context: tf.Tensor
    ) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor], tf.RaggedTensor, tf.RaggedTensor]:
        """Tokenizes and cuts each (question, context) into run_squad's windows.

        Returns the packed features (N, T) and, per window, its example, the
        question length, the first context piece and the number of pieces (N,),
        plus the context pieces' byte offsets (ragged (B, P))."""
        batch = tf.size(question, out_type=tf.int64)
        ids, starts, ends = self.tokenize_with_offsets(tf.concat([question, context], 0))
        question_ids = ids[:batch][:, : self.max_query_length]  # (B, Q)
        question_ids = self._refuse_empty_questions(question_ids)
        context_ids = ids[batch:]  # (B, P)
        question_length = question_ids.row_lengths()  # (B,)
        context_length = context_ids.row_lengths()
        room = self.seq_length - question_length - 3  # context pieces per window
        step = tf.minimum(room, self.doc_stride)
        extra = tf.maximum(context_length - room, 0)
        count = tf.minimum(1 + (extra + step - 1) // step, self.max_windows)  # (B,)
        example = tf.repeat(tf.range(batch), count)  # (N,)
        window_start = tf.ragged.range(count).flat_values * tf.gather(step, example)
        window_length = tf.minimum(
            tf.gather(context_length, example) - window_start, tf.gather(room, example)
        )  # (N,), 0 for an empty context
        first = tf.gather(context_ids.row_starts(), example) + window_start
        pieces = tf.gather(
            context_ids.flat_values, tf.ragged.range(first, first + window_length)
        )  # (N, window)
        features = traced_pack(self.tokenizer, self.seq_length, pair=True)(
            tf.gather(question_ids, example), pieces
        )
        window = {
            "example": example,
            "question_length": tf.gather(question_length, example),
            "start": window_start,
            "length": window_length,
            "count": count,
        }
        return features, window, starts[batch:], ends[batch:]

    @staticmethod
    def _refuse_empty_questions(question_ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """`question_ids` (B, Q), after an InvalidArgumentError naming the
        positions of the questions without a word piece ("", whitespace, only
        control characters): run_squad would answer them from the context alone,
        a confident answer to nothing. A failed call leaves the model serving."""
        empty = tf.where(tf.equal(question_ids.row_lengths(), 0))[:, 0]  # positions
        check = tf.debugging.Assert(
            tf.equal(tf.size(empty), 0),
            [
                "empty question (no word after cleaning) at batch position(s)",
                empty,
                "- every question needs text: drop those rows or fill in their questions",
            ],
            summarize=10,
        )
        with tf.control_dependencies([check]):
            return tf.identity(question_ids)

    def check_questions(self, questions: Sequence[str], argument: str = "question") -> None:
        """A ValueError naming the first question without a word piece (see
        `_refuse_empty_questions`): the Python side's check, before any model call."""
        self.check_has_words(questions, argument, "question")

    def check_has_words(self, texts: Sequence[str], argument: str, what: str) -> None:
        """A ValueError naming the first of `texts` with no word piece once
        cleaned: an empty question has no answer to look for, an empty context
        no window to look in."""
        if len(texts) == 0:
            return
        from keras_bert.text.tokenizer import text_tensor

        ids, _, _ = self.tokenize_with_offsets(clean_utf8(text_tensor(list(texts))))
        empty = tf.where(tf.equal(ids.row_lengths(), 0))[:, 0].numpy()
        if empty.size:
            i = int(empty[0])
            raise ValueError(
                f"`{argument}`[{i}] is empty ({texts[i]!r:.40} has no word "
                f"once whitespace and control characters are dropped; "
                f"{empty.size} such {what}(s)): every {what} needs text; "
                f"drop those rows or fill in their {what}s"
            )

    def max_context(self, window: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """(N, T) bool: position p of window n holds a context piece whose
        best-centred window (run_squad's `_check_is_max_context`) is n."""
        positions = tf.range(self.seq_length, dtype=tf.int64)[tf.newaxis]  # (1, T)
        offset = positions - window["question_length"][:, tf.newaxis] - 2  # (N, T) in the window
        piece = window["start"][:, tf.newaxis] + offset  # (N, T) in the context
        total = tf.size(window["example"], out_type=tf.int64)
        index = tf.range(total)

        def score(other):  # run_squad's score in window `other`, in float64 as Python's
            start = tf.gather(window["start"], other)[:, tf.newaxis]
            length = tf.gather(window["length"], other)[:, tf.newaxis]
            inside = piece - start
            contains = (inside >= 0) & (inside < length)
            value = tf.cast(tf.minimum(inside, length - 1 - inside), tf.float64) + 0.01 * tf.cast(
                length, tf.float64
            )
            return contains, value

        contains, own = score(index)
        best = contains
        # Windows farther apart than one window length never share a piece.
        reach = -(-(self.seq_length - 3) // self.doc_stride)
        for shift in range(-reach, reach + 1):
            if shift == 0:
                continue
            other = index + shift
            exists = (other >= 0) & (other < total)
            other = tf.clip_by_value(other, 0, tf.maximum(total - 1, 0))
            same = exists & tf.equal(tf.gather(window["example"], other), window["example"])
            there, value = score(other)
            # The first window with the highest score wins, as in run_squad.
            beats = (value >= own) if shift < 0 else (value > own)
            best &= ~(same[:, tf.newaxis] & there & beats)
        return best

    # === Spans ===

    def answer(
        self,
        question: tf.Tensor,
        context: tf.Tensor,
        run_model: Callable[[dict], Mapping[str, tf.Tensor]],
        n_best: int = 1,
    ) -> dict[str, tf.Tensor]:
        """(B,) questions and contexts -> the best answer of each (see the module
        docstring); `run_model` maps the windows' features to the span
        extractor's {start_logits, end_logits} (N, T). `n_best` > 1 adds the
        `n_best` best spans of each question over all its windows, best first
        (`n_best_answer`, `n_best_start`, `n_best_end`, `n_best_score`, (B, n);
        "", -1 and -inf where fewer qualify)."""
        question, context = clean_utf8(question), clean_utf8(context)
        features, window, piece_starts, piece_ends = self.windows(question, context)
        logits = run_model(features)
        start_logits = tf.cast(logits["start_logits"], tf.float64)  # (N, T)
        end_logits = tf.cast(logits["end_logits"], tf.float64)
        positions = tf.range(self.seq_length, dtype=tf.int64)[tf.newaxis]
        offset = positions - window["question_length"][:, tf.newaxis] - 2  # (N, T)
        in_context = (offset >= 0) & (offset < window["length"][:, tf.newaxis])
        can_start = in_context & self.max_context(window)

        # n-best start and end positions of each window (ties: lower position first),
        # among the positions a prediction can take (see keras_bert.datasets.squad).
        rankable = in_context | tf.equal(positions, 0)  # context pieces and [CLS]
        top_starts = tf.math.top_k(
            tf.where(rankable, start_logits, -float("inf")), self.n_best_size
        ).indices  # (N, K)
        top_ends = tf.math.top_k(
            tf.where(rankable, end_logits, -float("inf")), self.n_best_size
        ).indices
        i = tf.cast(top_starts, tf.int64)[:, :, tf.newaxis]  # (N, K, 1)
        j = tf.cast(top_ends, tf.int64)[:, tf.newaxis, :]  # (N, 1, K)
        valid = (
            tf.gather(can_start, top_starts, batch_dims=1)[:, :, tf.newaxis]
            & tf.gather(in_context, top_ends, batch_dims=1)[:, tf.newaxis, :]
            & (j >= i)
            & (j - i + 1 <= self.max_answer_length)
        )  # (N, K, K)
        scores = (
            tf.gather(start_logits, top_starts, batch_dims=1)[:, :, tf.newaxis]
            + tf.gather(end_logits, top_ends, batch_dims=1)[:, tf.newaxis, :]
        )
        scores = tf.reshape(tf.where(valid, scores, -float("inf")), [-1, self.n_best_size**2])
        pick = tf.argmax(scores, axis=1)  # (N,) first best, in run_squad's candidate order
        window_best = tf.reduce_max(scores, axis=1)  # (N,)
        best_start = tf.gather(top_starts, pick // self.n_best_size, batch_dims=1)
        best_end = tf.gather(top_ends, pick % self.n_best_size, batch_dims=1)

        # The best window of each example (the first on ties).
        per_example = tf.RaggedTensor.from_row_lengths(window_best, window["count"])
        dense = per_example.to_tensor(-float("inf"))  # (B, W)
        # One more -inf column keeps argmax defined for an empty batch (B, 0).
        dense = tf.concat(
            [dense, tf.fill([tf.shape(dense)[0], 1], tf.constant(-float("inf"), dense.dtype))],
            axis=1,
        )
        chosen = per_example.row_starts() + tf.argmax(dense, axis=1)  # (B,)
        score = tf.gather(window_best, chosen)  # (B,)
        found = score > -float("inf")
        chosen_offset = tf.gather(window["start"] - window["question_length"] - 2, chosen)
        first_piece = tf.cast(tf.gather(best_start, chosen), tf.int64) + chosen_offset
        last_piece = tf.cast(tf.gather(best_end, chosen), tf.int64) + chosen_offset
        # Byte spans of those pieces; a trailing 0 serves examples without a span.
        flat_starts = tf.concat([piece_starts.flat_values, [0]], 0)
        flat_ends = tf.concat([piece_ends.flat_values, [0]], 0)
        last = tf.size(piece_starts.flat_values, out_type=tf.int64)
        row_starts = piece_starts.row_starts()
        byte_start = tf.gather(flat_starts, tf.clip_by_value(row_starts + first_piece, 0, last))
        byte_end = tf.gather(flat_ends, tf.clip_by_value(row_starts + last_piece, 0, last))

        has_answer = found
        outputs = {}
        if n_best > 1:
            outputs = self._n_best(
                n_best, scores, top_starts, top_ends, window, piece_starts, piece_ends, context
            )
        if self.version_2_with_negative:
            null = tf.RaggedTensor.from_row_lengths(
                start_logits[:, 0] + end_logits[:, 0], window["count"]
            )
            null_score_diff = tf.reduce_min(null, axis=1) - score  # (B,)
            has_answer = found & (null_score_diff <= self.null_score_diff_threshold)
            outputs.update(
                {"has_answer": has_answer, "null_score_diff": tf.cast(null_score_diff, tf.float32)}
            )
        byte_start = tf.where(has_answer, byte_start, 0)
        byte_end = tf.where(has_answer, byte_end, 0)
        outputs.update(
            {
                "answer": answer_text(context, byte_start, byte_end),
                "start": tf.where(has_answer, char_offsets(context, byte_start), -1),
                "end": tf.where(has_answer, char_offsets(context, byte_end), -1),
                "score": tf.cast(score, tf.float32),
            }
        )
        return outputs

    def _n_best(self, n, scores, top_starts, top_ends, window, piece_starts, piece_ends, context):
        """The n best of every question's candidates (N, K * K) over its windows.
        A piece span has one candidate only (its start counts in one window,
        the max-context rule), so the list holds n distinct spans."""
        k = self.n_best_size
        per_example = tf.RaggedTensor.from_row_lengths(scores, window["count"]).merge_dims(1, 2)
        dense = per_example.to_tensor(-float("inf"))  # (B, W * K * K)
        dense = tf.concat(
            [dense, tf.fill([tf.shape(dense)[0], n], tf.constant(-float("inf"), dense.dtype))],
            axis=1,
        )
        best = tf.math.top_k(dense, n)  # ties: the lower index, run_squad's order
        valid = best.values > -float("inf")  # (B, n)
        last_window = tf.maximum(tf.size(window["start"], out_type=tf.int64) - 1, 0)
        first_window = tf.math.cumsum(window["count"], exclusive=True)[:, tf.newaxis]  # (B, 1)
        chosen = tf.minimum(
            first_window + tf.cast(best.indices, tf.int64) // (k * k), last_window
        )  # (B, n)
        candidate = tf.cast(best.indices, tf.int64) % (k * k)
        offset = tf.gather(window["start"] - window["question_length"] - 2, chosen)
        start = (
            tf.cast(tf.gather_nd(top_starts, tf.stack([chosen, candidate // k], -1)), tf.int64)
            + offset
        )
        end = (
            tf.cast(tf.gather_nd(top_ends, tf.stack([chosen, candidate % k], -1)), tf.int64)
            + offset
        )
        flat_starts = tf.concat([piece_starts.flat_values, [0]], 0)
        flat_ends = tf.concat([piece_ends.flat_values, [0]], 0)
        last = tf.size(piece_starts.flat_values, out_type=tf.int64)
        rows = piece_starts.row_starts()[:, tf.newaxis]
        byte_start = tf.where(
            valid, tf.gather(flat_starts, tf.clip_by_value(rows + start, 0, last)), 0
        )
        byte_end = tf.where(valid, tf.gather(flat_ends, tf.clip_by_value(rows + end, 0, last)), 0)
        return {
            "n_best_answer": answer_text(context, byte_start, byte_end),
            "n_best_start": tf.where(valid, char_offsets(context, byte_start), -1),
            "n_best_end": tf.where(valid, char_offsets(context, byte_end), -1),
            "n_best_score": tf.cast(best.values, tf.float32),
        }


def answer_text(context: tf.Tensor, byte_starts: tf.Tensor, byte_ends: tf.Tensor) -> tf.Tensor:
    """The answers' text from their byte spans of the contexts, in the graph:
    `keras_bert.datasets.squad.answer_text`'s rule (each whitespace run one
    space, as run_squad.py), so text and files give one answer."""
    return tf.strings.regex_replace(
        surface_text(context, byte_starts, byte_ends), ANSWER_WHITESPACE, " "
    )
