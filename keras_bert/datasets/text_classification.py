"""Sentence and sentence-pair examples from TSV, CSV or JSON-lines files, and
their conversion to encoder features.

A file holds one example per row; the caller names the text column(s) (one
for single sentences, two for pairs) and the label column. Without names,
the label is the `label` column and the texts are the other columns in order
(at most two), which fits `rotten_tomatoes` (label, sentence) and `bbc_news`
(label, title, text: a pair whose longer side, the text, is truncated first).

Multi-label tables (`label_separator` given) hold any number of label names
per row in the label column, separated by it (`sports|politics`; a JSON Lines
row may hold a list instead); an empty cell is a text with none of the labels.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from keras_bert import text_files

FLOAT32_MAX = float(np.finfo(np.float32).max)

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer


@dataclasses.dataclass
class TextExamples:
    """Column-wise examples: `texts_b` is None for single sentences; labels are
    strings (classes), lists of strings (multi-label) or floats (regression);
    `ids` name the rows."""

    texts_a: list
    texts_b: list
    labels: list
    ids: list

    def __len__(self):
        return len(self.texts_a)


def _file_format(path):
    name = path.lower()
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    return "tsv"


def read_rows(path: str, header: bool = True) -> Iterator[tuple[int, dict[str, Any] | list[str]]]:
    """Yields (line number, row) with rows as dicts (header or JSON) or lists."""
    text = text_files.read_text(path, missing="data file not found")
    file_format = _file_format(path)
    if file_format == "jsonl":
        for number, line in enumerate(text_files.text_lines(text), 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}, line {number}: not valid JSON ({e})") from None
        return
    # newline="": the csv module reads the line ends itself (quoted ones too).
    with io.StringIO(text, newline="") as f:
        if file_format == "csv":
            reader = csv.reader(f)
        else:
            # GLUE's TSVs hold bare quotes inside sentences: no CSV quoting.
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        names = next(reader, None) if header else None
        if header and names is None:
            raise ValueError(f"{path}: empty file; expected a header row and rows")
        for number, row in enumerate(reader, 2 if header else 1):
            if not row:
                continue
            if names is not None:
                if len(row) != len(names):
                    raise ValueError(
                        f"{path}, line {number}: {len(row)} fields, the header has {len(names)}"
                    )
                row = dict(zip(names, row))
            yield number, row


def label_list(label: Any, separator: str) -> list[str]:
    """A multi-label row's label cell -> its names: a list (JSON) as it is, a
    string split at `separator`, each name stripped; empty names and an empty
    cell (None, "") give none."""
    if label is None:
        return []
    names = [_as_str(v) for v in label] if isinstance(label, (list, tuple)) else None
    if names is None:
        names = _as_str(label).split(separator)
    return [name.strip() for name in names if name.strip()]


def several_labels_error(where: str, label: Any, separator: str | None) -> str | None:
    """The message for a single-label row that holds several names (a list,
    or a string with `separator` between names), else None."""
    if isinstance(label, (list, tuple)):
        what = f"a list of {len(label)} labels"
    elif separator and isinstance(label, str) and len(label_list(label, separator)) > 1:
        what = f"several labels separated by {separator!r}"
    else:
        return None
    return (
        f"{where}: label {label!r} is {what}; for several labels per text train a "
        "multi-label classifier (--multi-label; multi_label=True), or, if "
        f"{separator or '|'!r} belongs to the class names, choose another --label-separator"
    )


def read_text_examples(
    path: str,
    text_columns: Sequence[str | int] | None = None,
    label_column: str | int | None = "label",
    regression: bool = False,
    header: bool = True,
    allow_empty_text: bool = False,
    label_separator: str | None = None,
) -> TextExamples:
    """Reads a TSV / CSV / JSONL file into `TextExamples`.

    Args:
      path: the file; its extension picks the format (`.csv`, `.jsonl`, else TSV).
      text_columns: one or two column names (or indices without a header);
        defaults to every column but the label, in file order.
      label_column: the label's column name (or index); None for unlabelled data.
      regression: labels are floats.
      header: whether a TSV / CSV file starts with column names.
      allow_empty_text: read an empty text cell as "" (the original GLUE files,
        read as run_classifier.py reads them); otherwise it is an error naming
        the line, since a table with empty cells is usually a broken export.
      label_separator: multi-label: each label cell holds names separated by
        it (or a JSON list), read as a list of names; an empty cell is no label.
    """
    texts_a, texts_b, labels, ids = [], [], [], []
    columns = list(text_columns) if text_columns else None
    for number, row in read_rows(path, header):
        if columns is None:
            keys = list(row) if isinstance(row, dict) else list(range(len(row)))
            columns = [k for k in keys if k != label_column][:2]
        if not 1 <= len(columns) <= 2:
            raise ValueError(f"{path}: give one or two text columns, got {columns}")
        try:
            texts = [row[c] for c in columns]
            label = row[label_column] if label_column is not None else None
        except (KeyError, IndexError) as e:
            raise ValueError(
                f"{path}, line {number}: no column {e} "
                f"(text columns {columns}, label column {label_column!r})"
            ) from None
        for column, text in zip(columns, texts):
            if not allow_empty_text and (text is None or not str(text).strip()):
                raise ValueError(
                    f"{path}, line {number}: empty text in column {column!r}; "
                    "fill it in or remove the row"
                )
        if label_separator is not None:
            label = label_list(label, label_separator)
        elif isinstance(label, (list, tuple)):
            raise ValueError(several_labels_error(f"{path}, line {number}", label, None))
        elif label is not None and not str(label).strip():
            raise ValueError(
                f"{path}, line {number}: empty label in column {label_column!r}; "
                "fill it in or remove the row"
            )
        if label is not None and label_separator is None:
            if regression:
                raw_label = label
                try:
                    label = float(label)
                except (TypeError, ValueError):
                    raise ValueError(
                        f"{path}, line {number}: label {label!r} is not a number"
                    ) from None
                # Trained in float32: 1e39 would become inf there, and nan stays nan.
                if not abs(label) <= FLOAT32_MAX:
                    raise ValueError(
                        f"{path}, line {number}: label {raw_label!r} is not a finite float32 "
                        f"number (|label| <= {FLOAT32_MAX:.4g}); fix or remove the row"
                    )
            else:
                label = str(label)
        texts_a.append(str(texts[0]))
        texts_b.append(str(texts[1]) if len(texts) > 1 else None)
        labels.append(label)
        ids.append(row.get("idx", row.get("id", number)) if isinstance(row, dict) else number)
    if not texts_a:
        raise ValueError(f"{path}: no examples")
    return TextExamples(texts_a, None if texts_b[0] is None else texts_b, labels, ids)


def text_examples_from_columns(
    columns: Any,
    text_columns: Sequence[str] | None = None,
    label_column: str | None = "label",
    regression: bool = False,
    source: str = "data",
    label_separator: str | None = None,
) -> TextExamples:
    """In-memory columns -> `TextExamples`: a dict of equal-length lists (or
    anything indexed by column name with `keys()` or `columns`, as a DataFrame),
    or a (texts, labels) / (texts, pairs, labels) tuple. Text columns default
    to `text` and `text_pair` when present, else every column but the label.
    `label_separator`: multi-label, as `read_text_examples`."""
    if isinstance(columns, tuple):
        names = (
            ["text", "text_pair", label_column][-len(columns) :]
            if len(columns) == 3
            else ["text", label_column]
        )
        columns = dict(zip(names, columns))
    names = list(columns.columns if hasattr(columns, "columns") else columns.keys())
    if text_columns is None:
        text_columns = [n for n in ("text", "text_pair") if n in names] or [
            n for n in names if n != label_column
        ][:2]
    missing = [n for n in [*text_columns, label_column] if n is not None and n not in names]
    if missing:
        raise ValueError(f"{source}: no column(s) {missing}; it has {names}")
    texts = [[_as_str(t) for t in columns[name]] for name in text_columns]
    labels = [None] * len(texts[0]) if label_column is None else list(columns[label_column])
    if any(len(column) != len(texts[0]) for column in [*texts, labels]):
        raise ValueError(f"{source}: the columns {[*text_columns, label_column]} differ in length")
    if not texts[0]:
        raise ValueError(f"{source}: no examples")
    if label_column is not None and label_separator is not None:
        labels = [label_list(v, label_separator) for v in labels]
    elif label_column is not None:
        for i, value in enumerate(labels):
            if isinstance(value, (list, tuple)):
                raise ValueError(several_labels_error(f"{source}, row {i}", value, None))
        labels = [float(v) for v in labels] if regression else [_as_str(v) for v in labels]
    return TextExamples(
        texts[0], texts[1] if len(texts) > 1 else None, labels, list(range(len(texts[0])))
    )


def _as_str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if hasattr(value, "item"):  # NumPy scalars
        return _as_str(value.item())
    return str(value)


def label_vocabulary(labels: Iterable[str]) -> list[str]:
    """Sorted distinct class names (numbers sort numerically)."""
    distinct = set(labels)
    try:
        return sorted(distinct, key=float)
    except ValueError:
        return sorted(distinct)


def encode_texts(
    tokenizer: BertTokenizer,
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None = None,
    seq_length: int = 128,
    chunk_size: int = 1024,
) -> dict[str, np.ndarray]:
    """Strings -> {input_ids, input_mask, segment_ids} int32 NumPy (N, seq_length).

    Tokenized once, in chunks, so that training epochs only read arrays.
    """
    parts = []
    for start in range(0, len(texts_a), chunk_size):
        a = tf.constant(texts_a[start : start + chunk_size])
        b = tf.constant(texts_b[start : start + chunk_size]) if texts_b is not None else None
        parts.append({k: v.numpy() for k, v in tokenizer.pack(a, b, seq_length).items()})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def encode_labels(
    labels: Sequence[str | float], label_names: Sequence[str] | None, source: str = ""
) -> np.ndarray:
    """Class names -> int32 indices (floats for regression, when label_names is None)."""
    if label_names is None:
        return np.asarray(labels, dtype=np.float32)[:, None]
    index = {name: i for i, name in enumerate(label_names)}
    unknown = sorted(set(labels) - set(index))
    if unknown:
        raise ValueError(f"{source}: label(s) {unknown[:5]} not among {label_names}")
    return np.asarray([index[label] for label in labels], dtype=np.int32)
