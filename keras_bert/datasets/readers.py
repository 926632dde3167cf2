"""Readers: a data source named on the command line -> what a task model's `fit` takes.

Each reader turns a file, a `tfds:<name>:<split>` name or in-memory columns
into the plain Python forms that `BertClassifier.fit`,
`BertTokenClassifier.fit` and `BertSpanExtractor.fit` already take (texts and
labels, words and tags, questions and contexts with their answers); the task
model's preprocessor does the rest, for the command line and a Keras script
alike.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import tensorflow as tf

from keras_bert.datasets import glue, squad, tagging, text_classification, text_rows


def source_name(source: Any) -> str:
    """How errors name the data: its path, or "in-memory data"."""
    return source if isinstance(source, str) else "in-memory data"


def tfds_spec(source: Any) -> tuple[str, str] | None:
    """`tfds:<name>:<split>` -> (name, split), else None."""
    if not isinstance(source, str) or not source.startswith("tfds:"):
        return None
    parts = source.split(":")
    if len(parts) != 3:
        raise ValueError(f"TFDS source must read tfds:<name>:<split>, got {source!r}")
    return parts[1], parts[2]


def in_memory_columns(data: Any, tuple_names: Sequence[str] = ("text", "label")) -> Any:
    """In-memory training data as columns: a dict / DataFrame passes through,
    a tuple becomes named columns, a `tf.data.Dataset` of dicts or tuples
    (unbatched) is read into lists."""
    if isinstance(data, tf.data.Dataset):
        rows = list(data.as_numpy_iterator())
        if rows and isinstance(rows[0], dict):
            return {name: [row[name] for row in rows] for name in rows[0]}
        return {
            name: [row[i] for row in rows]
            for i, name in enumerate(
                tuple_names if not rows or len(rows[0]) == 2 else ("text", "text_pair", "label")
            )
        }
    if isinstance(data, tuple) and len(data) == 2:
        return dict(zip(tuple_names, data))
    return data


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _limit(n: int, limit: int | None) -> int:
    return n if limit is None else min(n, limit)


# === Sentence (pair) classification and regression ===


def read_texts_and_labels(
    source: Any,
    *,
    regression: bool = False,
    glue_task: str | None = None,
    text_columns: Sequence[str] | None = None,
    label_column: str = "label",
    limit: int | None = None,
    label_separator: str | None = None,
) -> tuple[Any, list]:
    """A table (TSV / CSV / JSONL), a GLUE TSV, `tfds:glue/<task>:<split>` or
    in-memory columns -> (texts, labels): texts a list, or a (texts, pairs)
    tuple; labels class names (strings) or scores (floats), or with a
    `label_separator` (multi-label tables) a list of names per text."""
    spec = tfds_spec(source)
    if not isinstance(source, str):
        examples = text_classification.text_examples_from_columns(
            in_memory_columns(source),
            text_columns,
            label_column,
            regression,
            source=source_name(source),
            label_separator=label_separator,
        )
    elif spec is not None:
        name, split = spec
        if label_separator is not None:
            raise ValueError(f"{source}: multi-label data comes from tables, not TFDS")
        if not name.startswith("glue/"):
            raise ValueError(f"{source}: classification reads TFDS glue/<task> only")
        examples = glue.read_glue_tfds(glue_task or name[5:], split)
    elif glue_task is not None:
        examples = glue.read_glue_tsv(glue_task, source)
    else:
        examples = text_classification.read_text_examples(
            source, text_columns, label_column, regression, label_separator=label_separator
        )
    n = _limit(len(examples), limit)
    texts = examples.texts_a[:n]
    x = texts if examples.texts_b is None else (texts, examples.texts_b[:n])
    return x, list(examples.labels[:n])


# === Token tagging ===


def read_words_and_tags(
    source: Any, limit: int | None = None
) -> tuple[list[list[str]], list[list[str]]]:
    """A CoNLL file (word<TAB>tag lines), `tfds:conll2003:<split>` or in-memory
    {"words": word lists or texts, "tags": tag lists} -> (words, tags)."""
    spec = tfds_spec(source)
    if not isinstance(source, str):
        columns = in_memory_columns(source, ("words", "tags"))
        sentences = tagging.TaggedSentences(
            [w.split() if isinstance(w, str) else [_text(x) for x in w] for w in columns["words"]],
            [[_text(t) for t in row] for row in columns["tags"]],
        )
    elif spec is not None:
        if spec[0] != "conll2003":
            raise ValueError(f"{source}: tagging reads TFDS conll2003 only")
        sentences = tagging.read_conll2003_tfds(spec[1])
    else:
        sentences = tagging.read_conll(source)
    n = _limit(len(sentences), limit)
    return list(sentences.words[:n]), list(sentences.tags[:n])


# === SQuAD ===


def read_squad_data(source: Any, limit: int | None = None) -> list[dict]:
    """A SQuAD JSON file, `tfds:squad/<version>:<split>` or an in-memory SQuAD
    `data` list -> that list, cut to its first `limit` questions."""
    spec = tfds_spec(source)
    if not isinstance(source, str):
        dataset = squad.check_squad_data(
            source["data"] if isinstance(source, Mapping) else list(source), "the SQuAD data"
        )
    elif spec is not None:
        if not spec[0].startswith("squad"):
            raise ValueError(f"{source}: span extraction reads TFDS squad/* only")
        dataset = squad.read_squad_tfds(spec[0], spec[1])
    else:
        dataset = squad.load_squad_json(source)
    return dataset if limit is None else first_questions(dataset, limit)


def first_questions(dataset: Sequence[Mapping[str, Any]], count: int) -> list[dict]:
    """The SQuAD `data` list cut to its first `count` questions."""
    articles, left = [], count
    for article in dataset:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = paragraph["qas"][:left]
            left -= len(qas)
            if qas:
                paragraphs.append({**paragraph, "qas": qas})
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
    return articles


def squad_questions_and_answers(
    dataset: Sequence[Mapping[str, Any]], source: str = ""
) -> tuple[dict[str, list[str]], list[dict]]:
    """A SQuAD `data` list -> ({"question": [...], "context": [...]}, answers):
    the first answer of each question ({"text", "answer_start"}; text "" for
    SQuAD v2.0's unanswerable ones), as run_squad.py trains on it."""
    questions, contexts, answers = [], [], []
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa.get("answers"):
                    if not qa.get("is_impossible"):
                        raise ValueError(
                            f"{source}: question {qa.get('id')!r} has no answer "
                            "and is not marked is_impossible"
                        )
                    answer = {"text": "", "answer_start": -1}
                else:
                    first = qa["answers"][0]
                    answer = {"text": first["text"], "answer_start": int(first["answer_start"])}
                questions.append(qa["question"])
                contexts.append(paragraph["context"])
                answers.append(answer)
    return {"question": questions, "context": contexts}, answers


# === Rows of texts (embeddings) ===


def read_text_rows(
    source: Any,
    text_columns: Sequence[str] | None = None,
    score_column: str | None = None,
    limit: int | None = None,
) -> text_rows.TextRows:
    """A TSV file of pairs, triplets or scored pairs with a header row, or
    in-memory columns ({name: values}, a DataFrame), or `TextRows` -> the
    rows (`keras_bert.datasets.text_rows`: the columns picked by name, else a
    numeric `score` / `label` column holds the scores and the others, 2 or
    3, are the texts)."""
    if isinstance(source, text_rows.TextRows):
        return source
    if isinstance(source, str):
        if tfds_spec(source) is not None:
            raise ValueError(
                f"{source}: embedding rows come from TSV files (anchor<TAB>"
                "positive[<TAB>negative], or text<TAB>text<TAB>score)"
            )
        if not tf.io.gfile.exists(source):
            raise FileNotFoundError(f"data file not found: {source}")
        return text_rows.read_text_rows(source, text_columns, score_column, limit)
    if isinstance(source, Mapping) or hasattr(source, "columns"):
        return text_rows.rows_from_columns(source, text_columns, score_column, limit=limit)
    raise ValueError(
        f"embedding rows: expected a TSV file, a dict of columns or TextRows; "
        f"got {type(source).__name__}"
    )
