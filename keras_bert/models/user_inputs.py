"""The one boundary where what a user passes in Python is checked.

Task models' `fit`, `evaluate` and `predict` (and their constructors) hand
their arguments here before anything is tokenized, traced or compiled, so a
bad argument fails at once, as a `ValueError` that names the argument, the
position and what to do, instead of deep inside TensorFlow (a `KeyError` from
an empty batch, a graph error after a 30 s compile for a label out of range).
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Mapping, Sequence

import numpy as np

from keras_bert.features import ENCODER_INPUTS

# The keys of text inputs given as a dict (a classifier's pair, a span extractor's).
TEXT_KEYS = ("text", "text_pair", "question", "context")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


# What Keras' functional model constructor itself uses; it drops every other
# keyword without a word, so keras_bert's models check theirs here.
MODEL_BASE_KEYWORDS = ("name", "trainable")


def accepted_keywords(model_class: type) -> list[str]:
    """The keywords `model_class(...)` takes: its constructor's own and Keras' base ones."""
    parameters = inspect.signature(model_class.__init__).parameters.values()
    own = [
        p.name
        for p in parameters
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return own + [name for name in MODEL_BASE_KEYWORDS if name not in own]


def check_model_keywords(
    model_class: type,
    keywords: Mapping[str, Any],
    accepted: Sequence[str] | None = None,
    where: str = "",
) -> None:
    """Refuses keywords `model_class` does not take (a misspelt `label_name=`,
    an option of another library such as `problem_type=`), naming them and the accepted
    ones, as Keras' own layers do: Keras' functional model would drop them.
    `accepted`: what the caller takes, if not the constructor's keywords."""
    accepted = accepted_keywords(model_class) if accepted is None else list(accepted)
    unknown = sorted(set(keywords) - set(accepted))
    if not unknown:
        return
    hint = (
        "; a task model computes in its encoder's dtype: give dtype= to BertEncoder or "
        "from_pretrained"
        if "dtype" in unknown
        else ""
    )
    raise ValueError(
        f"Unrecognized keyword argument(s) passed to {where or model_class.__name__}: "
        f"{unknown}; it takes {sorted(set(accepted))}{hint}"
    )


def _is_series(value: Any) -> bool:
    """A pandas Series or Index, without importing pandas."""
    return type(value).__module__.startswith("pandas") and hasattr(value, "tolist")


def plain_texts(x: Any) -> Any:
    """`x` with pandas Series (and Index) of texts as plain lists, also inside a
    (text, text_pair) tuple or a dict of columns."""
    if _is_series(x):
        return x.tolist()
    if isinstance(x, tuple):
        return tuple(plain_texts(part) for part in x)
    if isinstance(x, Mapping):
        return {name: plain_texts(value) for name, value in x.items()}
    return x


def check_number(value: Any, argument: str, minimum: int = 1) -> int:
    """A count given to a constructor (`num_classes`, `num_labels`): an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{argument}` must be an integer of at least {minimum}, got {value!r}")
    return int(value)


def check_labels(
    number: Any, label_names: Sequence[str] | None, argument: str
) -> tuple[int, list[str] | None]:
    """A task's count of labels (`num_classes`, `num_labels`; `check_number`)
    and its optional `label_names`, as many, as a list."""
    number = check_number(number, argument)
    if label_names is not None and len(label_names) != number:
        raise ValueError(f"{len(label_names)} label_names for {argument}={number}")
    return number, None if label_names is None else list(label_names)


def check_text_rows(rows: Sequence[Any], argument: str = "x") -> None:
    """Every row of a list of texts a string: `None`, numbers and other objects
    are named by position; an empty list is refused. (A lone surrogate is not
    refused: the tokenizer reads it as U+FFFD and drops it, as the original
    tokenizer reads the bytes a server receives; `keras_bert.text.tokenizer`.)"""
    if len(rows) == 0:
        raise ValueError(f"`{argument}` is empty: pass at least one text")
    for i, row in enumerate(rows):
        if isinstance(row, (str, bytes, np.bytes_)):
            continue
        what = "None" if row is None else f"a {type(row).__name__} ({row!r:.40})"
        raise ValueError(
            f"`{argument}`[{i}] is {what}, not a string: every text must be a "
            "string (drop or fill the missing ones first)"
        )


def looks_like_texts(rows: Any) -> bool:
    """A list / tuple / object array some of whose rows are strings (so a user
    meant text, and every row must be one)."""
    if isinstance(rows, np.ndarray):
        return rows.dtype.kind in "OSU" and rows.ndim == 1
    if not isinstance(rows, (list, tuple)):
        return False
    return any(isinstance(row, (str, bytes)) for row in rows)


def _is_rows(value: Any) -> bool:
    """A list, tuple or 1-D array: rows, one per example."""
    return isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1)


def check_texts(x: Any, argument: str = "x") -> Any:
    """Text inputs in any accepted form -> the same, pandas made plain; each
    list of texts checked row by row (`check_text_rows`), pairs for equal
    lengths. Anything that is not text (features, datasets) passes through."""
    x = plain_texts(x)
    if isinstance(x, list) and len(x) == 0:
        raise ValueError(f"`{argument}` is empty: pass at least one text")
    parts = {}
    # A pair is (texts, pairs): one side of text makes the other one text too
    # (an empty or all-None side is named, not handed to Keras as features),
    # and two empty lists are an empty pair, not features.
    if (
        isinstance(x, tuple)
        and len(x) == 2
        and all(_is_rows(p) for p in x)
        and (
            any(looks_like_texts(p) for p in x)
            or all(looks_like_texts(p) or len(p) == 0 for p in x)
        )
    ):
        parts = {f"{argument}[0] (texts)": x[0], f"{argument}[1] (pairs)": x[1]}
    elif isinstance(x, Mapping):  # {"text", "text_pair"}, {"question", "context"}
        # The text keys hold text, whatever their rows are (empty, None, numbers).
        parts = {
            f"{argument}[{name!r}]": value
            for name, value in x.items()
            if looks_like_texts(value) or (name in TEXT_KEYS and _is_rows(value))
        }
    elif looks_like_texts(x):
        parts = {argument: [x] if isinstance(x, str) else x}
    for name, rows in parts.items():
        check_text_rows(list(rows), name)
    if len(parts) == 2:
        (first, a), (second, b) = parts.items()
        if len(a) != len(b):  # the preprocessor's words, for pairs however given
            raise ValueError(
                f"one `text_pair` per `text`: got {len(a)} texts and {len(b)} "
                f"pairs (`{first}`, `{second}`)"
            )
    return x


def refuse_rows_that_are_not_text(x: Any, argument: str = "x") -> None:
    """`x` for a model that takes text, which is neither text nor features: a
    list (or 1-D object array) of scalars such as `[None]` or `[0, 1]` names its
    first row that is not a string. A list of arrays or tensors (features, in
    the inputs' order) is left to Keras."""
    if isinstance(x, np.ndarray):
        if x.ndim != 1 or x.dtype.kind != "O":
            return
        x = x.tolist()
    if not isinstance(x, (list, tuple)) or not all(
        row is None or isinstance(row, (str, bytes, int, float, np.generic)) for row in x
    ):
        return  # lists of arrays, of lists (check_features names those)
    check_text_rows(list(x), argument)


def check_one_label_per_text(y: Any, count: int, argument: str = "y") -> None:
    """As many labels (rows of tags, answers) as texts."""
    if y is None or isinstance(y, Mapping) or not hasattr(y, "__len__"):
        return
    if len(y) != count:
        raise ValueError(
            f"`{argument}` has {len(y)} labels for {count} texts: pass one label "
            "per text, in the same order"
        )


def check_features(x: Any, model_name: str, text_forms: str, argument: str = "x") -> None:
    """`x` that is not this task's text must be the encoder's id features (a
    dict holding input_ids / input_mask / segment_ids, arrays or tensors);
    anything else (a tuple of three text lists, a dict of unknown keys, a
    number) is refused here, naming the forms the model takes, rather than by
    Keras' "Unrecognized data type" or a graph error."""
    if isinstance(x, Mapping):
        if set(ENCODER_INPUTS) & set(x):
            return
        got = f"a dict with keys {sorted(map(str, x))}"
    elif isinstance(x, (tuple, list)) and any(looks_like_texts(part) for part in x):
        got = f"a {type(x).__name__} of {len(x)} lists of texts"
    elif isinstance(x, (tuple, list)) and any(isinstance(part, (list, tuple)) for part in x):
        # Python lists inside a list ([[]], ([], [0])): features come as arrays.
        got = f"a {type(x).__name__} of {len(x)} Python lists"
    elif isinstance(x, (int, float)) or x is None:
        got = repr(x)
    else:
        return  # arrays, tensors, generators, PyDatasets: Keras' own checks apply
    raise ValueError(
        f"`{argument}`: a {model_name} takes {text_forms}, or a dict of the id "
        f"features {list(ENCODER_INPUTS)}, or a tf.data.Dataset of these; got {got}"
    )


def check_class_indices(
    y: np.ndarray, num_classes: int, argument: str = "y", one_per_text: bool = True
) -> np.ndarray:
    """Class indices (N,): whole numbers in [0, num_classes), each bad one named
    by position. Floats that are whole numbers are accepted (pandas reads them so).
    `one_per_text=False` (a loss of the user's own, e.g. categorical
    cross-entropy) lets one-hot rows through."""
    values = np.asarray(y)
    if values.size == 0:
        raise ValueError(f"`{argument}` is empty: pass one label per text")
    if one_per_text and values.ndim > 1 and values.shape[1:] != (1,):
        # One-hot or probability rows: the loss takes one index per text.
        hint = ""
        if values.shape[-1] == num_classes and values.ndim == 2:
            several = values.dtype.kind in "iubf" and bool(np.any(np.sum(values, axis=-1) > 1))
            hint = (
                " (rows with several 1s are multi-label: build the classifier with "
                "multi_label=True, which takes these multi-hot rows)"
                if several
                else " (one-hot rows? pass y.argmax(axis=-1); or, for several labels per "
                "text, build the classifier with multi_label=True)"
            )
        raise ValueError(
            f"`{argument}` has shape {values.shape}: pass one class index or "
            f"class name per text, shape ({values.shape[0]},){hint}"
        )
    if values.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"`{argument}`[{i}] is {values.flat[i].item()!r}, not a class index: "
                f"labels are whole numbers in [0, {num_classes}) or class names "
                "(a regressor takes scores: num_classes=1)"
            )
        values = values.astype(np.int64)
    elif values.dtype.kind not in "iub":
        return values
    bad = np.flatnonzero((values < 0) | (values >= num_classes))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"`{argument}`[{i}] is {values.flat[i]}, out of range for "
            f"num_classes={num_classes}: labels are in [0, {num_classes})"
        )
    return values.astype(np.int32)


def _is_name(value: Any) -> bool:
    return isinstance(value, (str, bytes, np.str_, np.bytes_))


def is_label_name_rows(rows: Any) -> bool:
    """Rows of label names: each a name, or a list / tuple / array of names
    (an empty one: no label)."""
    if isinstance(rows, np.ndarray) and rows.dtype.kind in "SU":
        return True
    if not isinstance(rows, (list, tuple, np.ndarray)):
        return False
    return all(
        _is_name(row)
        or (isinstance(row, (list, tuple, np.ndarray)) and all(_is_name(v) for v in row))
        for row in rows
    )


def refuse_several_labels_per_text(rows: Any, argument: str = "y") -> None:
    """For a single-label classifier: a row that is a list of labels is named,
    with the option that takes it (`multi_label=True`)."""
    if not isinstance(rows, (list, tuple)) and not (
        isinstance(rows, np.ndarray) and rows.dtype.kind == "O"
    ):
        return
    for i, row in enumerate(rows):
        if isinstance(row, (list, tuple, np.ndarray)):
            raise ValueError(
                f"`{argument}`[{i}] is a list of labels ({row!r:.60}): this classifier "
                "takes one label per text; for several labels per text build it with "
                "multi_label=True"
            )


def multi_hot_labels(y: Any, label_names: Sequence[str], argument: str = "y") -> np.ndarray:
    """A multi-label classifier's targets -> float32 multi-hot rows (N, C):
    rows of 0 / 1 (N, C), or per text a list of label names (a lone name is
    a list of one; an empty list: none of the labels)."""
    num_classes = len(label_names)
    rows = y.tolist() if _is_series(y) else y
    if isinstance(rows, (list, tuple)) and len(rows) == 0:
        raise ValueError(f"`{argument}` is empty: pass the labels of every text")
    if is_label_name_rows(rows):
        index = {name: i for i, name in enumerate(label_names)}
        multi_hot = np.zeros((len(rows), num_classes), np.float32)
        for i, row in enumerate(rows):
            for name in [row] if _is_name(row) else row:
                name = name.decode("utf-8") if isinstance(name, (bytes, np.bytes_)) else str(name)
                if name not in index:
                    raise ValueError(
                        f"`{argument}`[{i}]: label {name!r} is not among the model's "
                        f"label_names {list(label_names)}"
                    )
                multi_hot[i, index[name]] = 1.0
        return multi_hot
    try:
        values = np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError):
        values = None
    if values is None or values.ndim != 2 or values.shape[1] != num_classes:
        shape = "rows of different lengths" if values is None else f"shape {values.shape}"
        hint = (
            " (one class index per text is single-label: build the classifier "
            "without multi_label=True)"
            if values is not None and values.ndim == 1
            else ""
        )
        raise ValueError(
            f"`{argument}` has {shape}: a multi-label classifier (multi_label=True) "
            f"takes multi-hot rows of 0 and 1, shape (N, {num_classes}), or a list of "
            f"label names per text{hint}"
        )
    bad = np.argwhere((values != 0) & (values != 1))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        raise ValueError(
            f"`{argument}`[{i}][{j}] is {values[i, j].item()!r}: multi-hot rows hold 0 (label "
            "absent) or 1 (present)"
        )
    return values.astype(np.float32)


def check_threshold(threshold: Any) -> float:
    """A multi-label decision threshold: a probability in [0, 1]."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number)):
        raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(
            f"threshold must be a probability in [0, 1] (a label is predicted where its "
            f"probability is above it), got {threshold!r}"
        )
    return float(threshold)


def check_scores(y: Any, argument: str = "y") -> np.ndarray:
    """Regression targets: finite numbers, each bad one named by position."""
    values = []
    for i, value in enumerate(np.asarray(y, dtype=object).reshape(-1)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        # Trained in float32: a number past its range would become inf there.
        if not abs(number) <= _FLOAT32_MAX:
            raise ValueError(
                f"`{argument}`[{i}] is {value!r}, not a finite float32 number (|y| <= "
                f"{_FLOAT32_MAX:.4g}): a regressor (num_classes=1) takes scores"
            )
        values.append(number)
    return np.asarray(values, np.float32)


def check_vocabulary_fits(
    vocabulary_size: int, embedding_rows: int, source: str, *, pretrained: bool = True
) -> None:
    """A vocabulary against the encoder's token embedding table: ids past the
    table fail at the first lookup (always refused). For a `pretrained`
    encoder, a vocabulary far shorter than the table is the wrong file (or a
    truncated one) too; a table a few rows longer is common (padded to a
    multiple of 8 or 64) and accepted. `source` names the vocabulary's file."""
    if vocabulary_size > embedding_rows:
        raise ValueError(
            f"{source}: the vocabulary has {vocabulary_size} entries but the "
            f"encoder's token embedding only {embedding_rows} rows (the checkpoint's "
            f"vocab_size): ids {embedding_rows} and up have no embedding; use the "
            "checkpoint's own vocab.txt (vocab_file=..., --vocab-file)"
        )
    if pretrained and vocabulary_size < embedding_rows - 128:
        raise ValueError(
            f"{source}: the vocabulary has {vocabulary_size} entries but the "
            f"encoder's token embedding {embedding_rows} rows: the vocabulary is "
            "not the checkpoint's (or is cut short); use its own vocab.txt"
        )
