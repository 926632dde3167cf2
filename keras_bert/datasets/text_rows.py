"""Rows of texts for embedding training and evaluation, from TSV files.

A TSV file with a header row holds one training row per line:

  anchor<TAB>positive                  pairs (in-batch negatives)
  anchor<TAB>positive<TAB>negative     triplets (hard negatives)
  sentence1<TAB>sentence2<TAB>score    scored pairs (CoSENT, Spearman)

Columns are picked by name (`text_columns=`, `score_column=`), else: a
column named `score` (or `label`, when all its values are numbers) holds the
scores and the other columns, in order, are the texts (2 or 3). So
`data/bbc_news/dev.tsv` (label, title, text) read with
`text_columns=("title", "text")` gives headline -> article pairs.

`TextRows.fit_inputs()` is what `BertSentenceEncoder.fit` takes;
`TextRows.retrieval()` is what `keras_bert.datasets.retrieval.evaluate_retrieval`
takes (first column: the queries; second: the corpus, each text once).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from keras_bert import text_files

SCORE_NAMES = ("score", "label")


@dataclasses.dataclass
class TextRows:
    """Column-wise rows: 2 or 3 text columns, scores (N,) or None."""

    names: list[str]
    columns: list[list[str]]
    scores: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.columns[0])

    def fit_inputs(self) -> tuple[tuple[list[str], ...], np.ndarray | None]:
        """(x, y) for `BertSentenceEncoder.fit`: the text columns, the scores."""
        return tuple(self.columns), self.scores

    def retrieval(self) -> tuple[list[str], list[str], list[tuple[int, int]]]:
        """(queries, corpus, relevant (query, document) position pairs): the first
        column's texts query the second column's, each distinct text once in the
        corpus; triplets' negatives join the corpus as documents no query wants."""
        corpus: dict[str, int] = {}
        for column in self.columns[1:]:
            for text in column:
                corpus.setdefault(text, len(corpus))
        relevant = [(q, corpus[text]) for q, text in enumerate(self.columns[1])]
        return list(self.columns[0]), list(corpus), relevant


def read_text_rows(
    path: str,
    text_columns: Sequence[str] | None = None,
    score_column: str | None = None,
    limit: int | None = None,
) -> TextRows:
    """The rows of the TSV file `path` (header row first); see the module docstring."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long articles in one field
    text = text_files.read_text(path, missing="data file not found")
    # newline="": the csv module reads the line ends itself.
    with io.StringIO(text, newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file; expected a header row and rows of texts")
        rows, lines = [], []
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(
                    f"{path}:{line}: {len(row)} fields, the header has {len(header)} ({header})"
                )
            rows.append(row)
            lines.append(line)
            if limit is not None and len(rows) >= limit:
                break
    if not rows:
        raise ValueError(f"{path}: no rows after the header row {header}")
    return _pick_columns(
        path, header, rows, text_columns, score_column, where=lambda i: f"line {lines[i]}"
    )


def _pick_columns(
    path: str,
    header: list[str],
    rows: list[list[str]],
    text_columns: Sequence[str] | None,
    score_column: str | None,
    where: Callable[[int], str],
) -> TextRows:
    """`where(i)`: how errors name row i (its line in a file)."""
    score_column = _score_column(path, header, rows, score_column, text_columns)
    if text_columns is None:
        text_columns = [name for name in header if name != score_column]
    missing = [
        name
        for name in [*text_columns, *([score_column] if score_column else [])]
        if name not in header
    ]
    if missing:
        raise ValueError(f"{path}: no column(s) {missing}; the header has {header}")
    if not 2 <= len(text_columns) <= 3:
        raise ValueError(
            f"{path}: {len(text_columns)} text columns {list(text_columns)}; "
            "embedding rows have 2 (pairs) or 3 (triplets): pick them with "
            "text_columns="
        )
    if score_column is not None and len(text_columns) != 2:
        raise ValueError(f"{path}: scored rows are pairs; got text columns {list(text_columns)}")
    index = {name: i for i, name in enumerate(header)}
    columns = [[row[index[name]] for row in rows] for name in text_columns]
    for name, column in zip(text_columns, columns):
        empty = next((i for i, text in enumerate(column) if not text.strip()), None)
        if empty is not None:
            # A table with empty cells is usually a broken export (as read_text_examples says).
            raise ValueError(
                f"{path}: {where(empty)}: empty text in column {name!r}; fill it "
                "in or remove the row"
            )
    scores = None
    if score_column is not None:
        scores = np.asarray(
            [_number(path, row[index[score_column]], score_column) for row in rows], np.float32
        )
    return TextRows(names=list(text_columns), columns=columns, scores=scores)


def rows_from_columns(
    columns: Mapping[str, Sequence[Any]],
    text_columns: Sequence[str] | None = None,
    score_column: str | None = None,
    source: str = "in-memory data",
    limit: int | None = None,
) -> TextRows:
    """In-memory columns ({name: values}, or a DataFrame) -> `TextRows`, the
    columns picked as `read_text_rows` picks a file's."""
    names = list(columns.columns if hasattr(columns, "columns") else columns.keys())
    lengths = {name: len(columns[name]) for name in names}
    if len(set(lengths.values())) != 1 or not names or not max(lengths.values()):
        raise ValueError(f"{source}: expected columns of equal, non-zero lengths; got {lengths}")
    rows = [
        [_as_text(value) for value in values] for values in zip(*(columns[name] for name in names))
    ]
    if limit is not None:
        rows = rows[:limit]
    return _pick_columns(
        source, names, rows, text_columns, score_column, where=lambda i: f"row {i}"
    )


def _as_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value.item() if hasattr(value, "item") else value)


def _score_column(
    path: str,
    header: list[str],
    rows: list[list[str]],
    given: str | None,
    text_columns: Sequence[str] | None,
) -> str | None:
    if given is not None:
        return given
    for name in SCORE_NAMES:
        if name in header and (text_columns is None or name not in text_columns):
            values = [row[header.index(name)] for row in rows]
            if all(_is_number(value) for value in values):
                return name
            if name == "score":
                raise ValueError(f"{path}: column `score` holds values that are not numbers")
    return None


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _number(path: str, value: Any, column: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{path}: column {column!r} holds {value!r}, not a number") from None
