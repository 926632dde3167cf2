"""SQuAD v1.1 / v2.0: examples, windowed features and answer post-processing.

The logic is google-research/bert's `run_squad.py`, step by step: the context
is split on whitespace into doc tokens (`char_to_word_offset` maps each
character to its token), each doc token is WordPiece-tokenized, the answer
span is moved to the word pieces that best match the tokenized answer
(`_improve_answer_span`), long contexts become windows of `max_seq_length`
taken every `doc_stride` pieces, and each piece is predicted only from the
window where it has the most context (`_check_is_max_context`). Predictions
take the n-best (start, end) pairs with end >= start and at most
`max_answer_length` pieces; for v2.0 the null answer scores
start_logits[0] + end_logits[0] at `[CLS]` and wins when null score minus the
best span's exceeds `null_score_diff_threshold` (tuned on dev).

Two deliberate differences. The n-best start and end positions are ranked
among `[CLS]` and the context pieces of a window, where run_squad.py ranks
all `max_seq_length` positions, question, `[SEP]` and padding included: none
of those can start or end an answer, yet with a lightly trained model
(padding logits not yet pushed down) they took the n-best slots, and every
context of about 30 words or fewer in a 64-position window came back with no
answer at all. Both agree whenever the best `n_best_size`
positions are context pieces or `[CLS]`, as for a fine-tuned model.

And the answer text is cut from the original context
at the character offsets of its first and last word pieces (the tokenizer
reports them; n-best entries carry them as `char_start` / `char_end`), where
run_squad.py reconstructs it heuristically (`get_final_text`); both give the
same text (whitespace runs become one space, as there: `answer_text`, the
rule the in-graph `SpanFinder` follows too) except where that heuristic fails.

Legend for shapes: N = features (windows), T = max_seq_length.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import tensorflow as tf

from keras_bert import text_files
from keras_bert.progress import Progress

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question_text: str
    context: str
    doc_tokens: list  # the context split on whitespace
    token_char_starts: list  # each doc token's first character in `context`
    orig_answer_text: str = None
    start_position: int = None  # doc-token index of the answer (training)
    end_position: int = None
    is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
    example_index: int
    doc_span_index: int
    input_ids: np.ndarray  # (T,)
    input_mask: np.ndarray
    segment_ids: np.ndarray
    token_to_orig_map: dict  # window position -> doc-token index
    token_is_max_context: dict  # window position -> bool
    token_char_spans: dict  # window position -> (first char, end char) in the context
    num_tokens: int
    start_position: int = 0
    end_position: int = 0


def _is_whitespace(c):
    return c in (" ", "\t", "\r", "\n") or ord(c) == 0x202F


# run_squad.py's defaults (its flags), which every SQuAD entry point takes:
# the windows (`convert_examples_to_features`) and the answer search (`postprocess`).
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64
MAX_ANSWER_LENGTH = 30
N_BEST_SIZE = 20
NULL_SCORE_DIFF_THRESHOLD = 0.0

# A run of run_squad.py's whitespace (`_is_whitespace`), as a regular
# expression both Python's `re` and TensorFlow's RE2 read.
ANSWER_WHITESPACE = "[ \t\r\n\u202f]+"
_WHITESPACE_RUN = re.compile(ANSWER_WHITESPACE)


def answer_text(span: str) -> str:
    """The answer's text from its span of the context (`context[start:end]`):
    each run of whitespace as one space. The one rule of both entry points:
    `postprocess` (predictions from SQuAD files) and `SpanFinder.answer` in the
    graph (`BertSpanExtractor.predict_answers`, the exports), which applies
    `ANSWER_WHITESPACE` with TensorFlow's regex.

    Why this one: run_squad.py's text is the reference for file predictions
    (its answers are a `" ".join` of whitespace-split doc tokens, so a
    predictions.json compares line for line with the original's), and a
    user gets the same answer from a file and from text. The official SQuAD
    evaluation normalises whitespace, so the scores do not depend on it; the
    exact characters stay one slice away, `context[start:end]` (the in-graph
    path returns `start` / `end`, n-best entries `char_start` / `char_end`)."""
    return _WHITESPACE_RUN.sub(" ", span)


def split_doc_tokens(context: str) -> tuple[list[str], list[int], list[int]]:
    """run_squad.py's whitespace split: (doc tokens, char_to_word_offset, token starts)."""
    doc_tokens, char_to_word_offset, starts = [], [], []
    previous_whitespace = True
    for index, c in enumerate(context):
        if _is_whitespace(c):
            previous_whitespace = True
        else:
            if previous_whitespace:
                doc_tokens.append(c)
                starts.append(index)
            else:
                doc_tokens[-1] += c
            previous_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset, starts


# === Reading ===


def load_squad_json(path: str) -> list[dict[str, Any]]:
    """The `data` list of a SQuAD JSON file."""
    text = text_files.read_text(path, missing="SQuAD file not found")
    try:
        content = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(content, dict) or "data" not in content:
        raise ValueError(f"{path}: no top-level `data` field; not a SQuAD file")
    return check_squad_data(content["data"], path)


def check_squad_data(data: Any, source: str) -> list[dict[str, Any]]:
    """`data` if it has SQuAD's shape (articles of paragraphs, each a `context`
    and its `qas`, each a `question` and its `answers`), else a ValueError
    naming `source` and the first bad field's place, e.g.
    `data[0].paragraphs[2].qas`: checked once here, for every reader, rather
    than as a KeyError wherever the field is first used."""

    def require(value, kind, place, what):
        if not isinstance(value, kind):
            raise ValueError(
                f"{source}: {place} must be {what}, got "
                f"{type(value).__name__ if value is not None else 'nothing'}"
                " (SQuAD JSON: data[].paragraphs[].{context, qas[].{id, "
                "question, answers[].{text, answer_start}}})"
            )

    require(data, list, "data", "a list of articles")
    for i, article in enumerate(data):
        require(article, dict, f"data[{i}]", "an article (a JSON object)")
        require(article.get("paragraphs"), list, f"data[{i}].paragraphs", "a list")
        for j, paragraph in enumerate(article["paragraphs"]):
            place = f"data[{i}].paragraphs[{j}]"
            require(paragraph, dict, place, "a JSON object")
            require(paragraph.get("context"), str, f"{place}.context", "text")
            require(paragraph.get("qas"), list, f"{place}.qas", "a list of questions")
            for k, qa in enumerate(paragraph["qas"]):
                require(qa, dict, f"{place}.qas[{k}]", "a JSON object")
                require(qa.get("question"), str, f"{place}.qas[{k}].question", "text")
                for n, answer in enumerate(qa.get("answers") or []):
                    where = f"{place}.qas[{k}].answers[{n}]"
                    require(answer, dict, where, "a JSON object")
                    require(answer.get("text"), str, f"{where}.text", "text")
                    require(
                        answer.get("answer_start"),
                        int,
                        f"{where}.answer_start",
                        "a character offset",
                    )
    return data


def read_squad_tfds(name: str, split: str, data_dir: str | None = None) -> list[dict[str, Any]]:
    """TFDS `squad/v1.1` or `squad/v2.0` regrouped into SQuAD JSON's `data` list."""
    import tensorflow_datasets as tfds

    articles = collections.OrderedDict()
    for row in tfds.as_numpy(tfds.load(name, split=split, data_dir=data_dir)):
        title, context = row["title"].decode("utf-8"), row["context"].decode("utf-8")
        paragraphs = articles.setdefault(title, collections.OrderedDict())
        qas = paragraphs.setdefault(context, [])
        answers = [
            {"text": t.decode("utf-8"), "answer_start": int(s)}
            for t, s in zip(row["answers"]["text"], row["answers"]["answer_start"])
        ]
        qa = {
            "id": row["id"].decode("utf-8"),
            "question": row["question"].decode("utf-8"),
            "answers": answers,
        }
        if "is_impossible" in row:
            qa["is_impossible"] = bool(row["is_impossible"])
        qas.append(qa)
    return [
        {"title": title, "paragraphs": [{"context": c, "qas": q} for c, q in paras.items()]}
        for title, paras in articles.items()
    ]


def read_squad_examples(
    dataset: Sequence[Mapping[str, Any]],
    is_training: bool,
    version_2_with_negative: bool = False,
    source: str = "SQuAD",
) -> list[SquadExample]:
    """SQuAD `data` list -> `SquadExample`s (run_squad.py's `read_squad_examples`).

    For training, the first answer is the target and questions whose answer
    text is not found at its offset are skipped (as the original).
    """
    examples = []
    for article in dataset:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            doc_tokens, char_to_word_offset, starts = split_doc_tokens(context)
            for qa in paragraph["qas"]:
                example = SquadExample(qa["id"], qa["question"], context, doc_tokens, starts)
                if is_training:
                    example.is_impossible = bool(
                        version_2_with_negative and qa.get("is_impossible", False)
                    )
                    if example.is_impossible:
                        example.start_position = example.end_position = -1
                        example.orig_answer_text = ""
                    else:
                        if not qa["answers"]:
                            raise ValueError(
                                f"{source}: question {qa['id']} has no answer; "
                                "SQuAD v2.0 data needs --version-2-with-negative"
                            )
                        answer = qa["answers"][0]
                        text, offset = answer["text"], answer["answer_start"]
                        if not 0 <= offset < len(context) or offset + len(text) > len(context):
                            raise ValueError(
                                f"{source}: question {qa['id']}: answer_start "
                                f"{offset} is outside its context"
                            )
                        example.orig_answer_text = text
                        example.start_position = char_to_word_offset[offset]
                        example.end_position = char_to_word_offset[offset + len(text) - 1]
                        actual = " ".join(
                            doc_tokens[example.start_position : example.end_position + 1]
                        )
                        if actual.find(" ".join(text.split())) == -1:
                            tf.get_logger().warning(
                                "%s: could not find answer %r of %s", source, text, qa["id"]
                            )
                            continue
                examples.append(example)
    return examples


# === Features ===


def _byte_to_char(text):
    """Array mapping each UTF-8 byte offset of `text` (and its end) to a char offset."""
    lengths = [len(c.encode("utf-8")) for c in text]
    mapping = np.repeat(np.arange(len(text)), lengths)
    return np.append(mapping, len(text))


def _tokenize_doc_tokens(tokenizer, tokens, chunk_size=50000):
    """Each string -> (piece ids, [(char start, char end) within the string])."""
    results = []
    for start in range(0, len(tokens), chunk_size):
        chunk = tokens[start : start + chunk_size]
        ids, begins, ends = tokenizer.tokenize_with_offsets(tf.constant(chunk))
        for token, i, b, e in zip(chunk, ids.to_list(), begins.to_list(), ends.to_list()):
            to_char = _byte_to_char(token)
            results.append((i, [(int(to_char[x]), int(to_char[y])) for x, y in zip(b, e)]))
    return results


def _improve_answer_span(doc_pieces, start, end, answer_pieces):
    """The sub-span of pieces that equals the tokenized answer, if there is one."""
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if doc_pieces[new_start : new_end + 1] == answer_pieces:
                return new_start, new_end
    return start, end


def _check_is_max_context(doc_spans, current, position):
    """Whether window `current` gives `position` its most balanced context."""
    best_score, best_index = None, None
    for index, (span_start, span_length) in enumerate(doc_spans):
        span_end = span_start + span_length - 1
        if position < span_start or position > span_end:
            continue
        score = min(position - span_start, span_end - position) + 0.01 * span_length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return current == best_index


def convert_examples_to_features(
    examples: Sequence[SquadExample],
    tokenizer: BertTokenizer,
    max_seq_length: int = 384,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
    is_training: bool = False,
) -> list[SquadFeature]:
    """`SquadExample`s -> windowed `SquadFeature`s (run_squad.py's conversion)."""
    questions = tokenizer.tokenize(
        tf.constant([e.question_text for e in examples] or [""])
    ).to_list()
    # Contexts are shared by many questions: tokenize each paragraph once.
    paragraph_index, paragraphs = {}, []
    for example in examples:
        if example.context not in paragraph_index:
            paragraph_index[example.context] = len(paragraphs)
            paragraphs.append(example)
    flat = [t for p in paragraphs for t in p.doc_tokens]
    tokenized = _tokenize_doc_tokens(tokenizer, flat) if flat else []
    per_paragraph, cursor = [], 0
    for paragraph in paragraphs:
        per_paragraph.append(tokenized[cursor : cursor + len(paragraph.doc_tokens)])
        cursor += len(paragraph.doc_tokens)
    answers = {}
    if is_training:
        texts = [e.orig_answer_text for e in examples if not e.is_impossible]
        pieces = tokenizer.tokenize(tf.constant(texts)).to_list() if texts else []
        answers = dict(zip([i for i, e in enumerate(examples) if not e.is_impossible], pieces))

    features = []
    bar = Progress(len(examples), "questions", detail="SQuAD features")
    for example_index, example in enumerate(examples):
        bar.advance()
        query = questions[example_index][:max_query_length]
        doc_pieces, tok_to_orig, orig_to_tok, piece_chars = [], [], [], []
        for i, (ids, spans) in enumerate(per_paragraph[paragraph_index[example.context]]):
            orig_to_tok.append(len(doc_pieces))
            token_start = example.token_char_starts[i]
            for piece, (b, e) in zip(ids, spans):
                tok_to_orig.append(i)
                doc_pieces.append(piece)
                piece_chars.append((token_start + b, token_start + e))

        tok_start = tok_end = None
        if is_training and example.is_impossible:
            tok_start = tok_end = -1
        if is_training and not example.is_impossible:
            tok_start = orig_to_tok[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end = orig_to_tok[example.end_position + 1] - 1
            else:
                tok_end = len(doc_pieces) - 1
            tok_start, tok_end = _improve_answer_span(
                doc_pieces, tok_start, tok_end, answers[example_index]
            )

        max_tokens_for_doc = max_seq_length - len(query) - 3
        if max_tokens_for_doc < 1:
            raise ValueError(
                f"max_seq_length {max_seq_length} leaves no room for the context "
                f"after a {len(query)}-piece question"
            )
        doc_spans, start_offset = [], 0
        while start_offset < len(doc_pieces):
            length = min(len(doc_pieces) - start_offset, max_tokens_for_doc)
            doc_spans.append((start_offset, length))
            if start_offset + length == len(doc_pieces):
                break
            start_offset += min(length, doc_stride)

        for span_index, (span_start, span_length) in enumerate(doc_spans):
            ids = [tokenizer.cls_id] + query + [tokenizer.sep_id]
            segments = [0] * len(ids)
            to_orig, max_context, char_spans = {}, {}, {}
            for i in range(span_length):
                split_index = span_start + i
                to_orig[len(ids)] = tok_to_orig[split_index]
                max_context[len(ids)] = _check_is_max_context(doc_spans, span_index, split_index)
                char_spans[len(ids)] = piece_chars[split_index]
                ids.append(doc_pieces[split_index])
                segments.append(1)
            ids.append(tokenizer.sep_id)
            segments.append(1)
            num_tokens = len(ids)
            padding = max_seq_length - num_tokens
            start_position = end_position = 0
            if is_training and not example.is_impossible:
                span_end = span_start + span_length - 1
                if tok_start >= span_start and tok_end <= span_end:
                    offset = len(query) + 2
                    start_position = tok_start - span_start + offset
                    end_position = tok_end - span_start + offset
            features.append(
                SquadFeature(
                    example_index,
                    span_index,
                    np.asarray(ids + [tokenizer.pad_id] * padding, np.int32),
                    np.asarray([1] * num_tokens + [0] * padding, np.int32),
                    np.asarray(segments + [0] * padding, np.int32),
                    to_orig,
                    max_context,
                    char_spans,
                    num_tokens,
                    start_position,
                    end_position,
                )
            )
    bar.close()
    return features


def feature_arrays(features: Sequence[SquadFeature]) -> dict[str, np.ndarray]:
    """Features -> the model's inputs plus `start_positions` / `end_positions` (N,)."""
    return {
        "input_ids": np.stack([f.input_ids for f in features]),
        "input_mask": np.stack([f.input_mask for f in features]),
        "segment_ids": np.stack([f.segment_ids for f in features]),
        "start_positions": np.asarray([f.start_position for f in features], np.int32),
        "end_positions": np.asarray([f.end_position for f in features], np.int32),
    }


# === Post-processing ===


def _best_indexes(logits, n_best_size, positions):
    """Of `positions`, the n with the largest logits, ties in index order (as the original)."""
    return sorted(positions, key=lambda i: logits[i], reverse=True)[:n_best_size]


def _softmax(scores):
    if not scores:
        return []
    scores = np.asarray(scores, np.float64)
    exp = np.exp(scores - scores.max())
    return (exp / exp.sum()).tolist()


def postprocess(
    examples: Sequence[SquadExample],
    features: Sequence[SquadFeature],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = N_BEST_SIZE,
    max_answer_length: int = MAX_ANSWER_LENGTH,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = NULL_SCORE_DIFF_THRESHOLD,
) -> tuple[dict[str, str], dict[str, float], dict[str, list[dict[str, Any]]]]:
    """Logits (N, T) of every window -> answers (run_squad.py's `write_predictions`).

    Returns (predictions {qas_id: text}, score_diffs {qas_id: null score minus
    the best span's} (empty for v1.1), nbest {qas_id: list of dicts with
    text, probability, start_logit, end_logit, char_start, char_end}).
    """
    by_example = collections.defaultdict(list)
    for feature_index, feature in enumerate(features):
        by_example[feature.example_index].append(feature_index)
    predictions, score_diffs, all_nbest = {}, {}, {}
    for example_index, example in enumerate(examples):
        prelim = []
        score_null, null_feature, null_start, null_end = 1e6, 0, 0.0, 0.0
        for feature_index in by_example[example_index]:
            feature = features[feature_index]
            starts, ends = start_logits[feature_index], end_logits[feature_index]
            if version_2_with_negative:
                null_score = starts[0] + ends[0]
                if null_score < score_null:
                    score_null, null_feature = null_score, feature_index
                    null_start, null_end = starts[0], ends[0]
            # The n-best among [CLS] and the context pieces only (see the module doc).
            rankable = [0] + sorted(i for i in feature.token_to_orig_map if i < len(starts))
            for s in _best_indexes(starts, n_best_size, rankable):
                for e in _best_indexes(ends, n_best_size, rankable):
                    if s >= feature.num_tokens or e >= feature.num_tokens:
                        continue
                    if s not in feature.token_to_orig_map or e not in feature.token_to_orig_map:
                        continue
                    if not feature.token_is_max_context.get(s, False):
                        continue
                    if e < s or e - s + 1 > max_answer_length:
                        continue
                    prelim.append(
                        (
                            float(starts[s] + ends[e]),
                            feature_index,
                            s,
                            e,
                            float(starts[s]),
                            float(ends[e]),
                        )
                    )
        if version_2_with_negative:
            prelim.append(
                (
                    float(null_start + null_end),
                    null_feature,
                    0,
                    0,
                    float(null_start),
                    float(null_end),
                )
            )
        prelim.sort(key=lambda p: p[0], reverse=True)

        seen, nbest = set(), []
        for _, feature_index, s, e, start_logit, end_logit in prelim:
            if len(nbest) >= n_best_size:
                break
            if s > 0:
                feature = features[feature_index]
                char_start = feature.token_char_spans[s][0]
                char_end = feature.token_char_spans[e][1]
                # Whitespace inside the answer as run_squad.py's " ".join(doc tokens).
                text = answer_text(example.context[char_start:char_end])
                if text in seen:
                    continue
            else:
                text, char_start, char_end = "", -1, -1
            seen.add(text)
            nbest.append(
                {
                    "text": text,
                    "start_logit": start_logit,
                    "end_logit": end_logit,
                    "char_start": char_start,
                    "char_end": char_end,
                }
            )
        if version_2_with_negative and "" not in seen:
            nbest.append(
                {
                    "text": "",
                    "start_logit": float(null_start),
                    "end_logit": float(null_end),
                    "char_start": -1,
                    "char_end": -1,
                }
            )
        if not nbest:
            nbest.append(
                {
                    "text": "empty",
                    "start_logit": 0.0,
                    "end_logit": 0.0,
                    "char_start": -1,
                    "char_end": -1,
                }
            )
        for entry, probability in zip(
            nbest, _softmax([n["start_logit"] + n["end_logit"] for n in nbest])
        ):
            entry["probability"] = probability
        all_nbest[example.qas_id] = nbest

        best_non_null = next((n for n in nbest if n["text"]), None)
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0]["text"]
            continue
        if best_non_null is None:
            score_diffs[example.qas_id] = float(score_null)  # as Model Garden's squad_lib
            predictions[example.qas_id] = ""
            continue
        diff = float(score_null - best_non_null["start_logit"] - best_non_null["end_logit"])
        score_diffs[example.qas_id] = diff
        predictions[example.qas_id] = (
            "" if diff > null_score_diff_threshold else best_non_null["text"]
        )
    return predictions, score_diffs, all_nbest
