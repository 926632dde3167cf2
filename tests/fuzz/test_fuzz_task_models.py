"""Fuzzing the Python API: a text classifier's `fit`, `evaluate` and
`predict` on drawn texts, pairs, labels and batch sizes.

The property: a clear error (a ValueError naming `x`, `y`, the text or the
labels) or a correct answer (one row of finite logits per text, each the
same as the text's logits alone in a batch; a finite loss), never an error
of another type, and the caller's lists and arrays unchanged. Valid and
invalid are decided here from the drawn values, independently of the code
under test (`expected`, `expected_labels`), so a silent accept fails too.
"""

import numpy as np
import pytest
from fuzz_inputs import (
    FAST,
    LONG,
    assert_clear_error,
    byte_texts,
    frozen,
    has_surrogate,
    not_text,
    same,
    texts,
)
from hypothesis import given
from hypothesis import strategies as st

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor

from conftest import TINY_VOCAB
from harness import tiny_config

NAMES = ["neg", "pos"]
VALID, INVALID, EITHER = "valid", "invalid", "either"


@pytest.fixture(scope="module")
def classifier():
    model = BertClassifier(
        BertEncoder(tiny_config(vocab_size=len(TINY_VOCAB))),
        2,
        dropout=0.0,
        label_names=NAMES,
        preprocessor=BertPreprocessor(TINY_VOCAB, seq_length=16),
    )
    # As `keras-bert finetune` on a CPU: no XLA (it would compile once per width).
    model.compile(jit_compile=False)
    return model


# === What is drawn ===

rows = st.one_of(texts, texts, texts, byte_texts, not_text)
text_lists = st.one_of(st.lists(texts, max_size=5), st.lists(rows, max_size=5))
inputs = st.one_of(
    text_lists,
    texts,  # one string: a batch of one
    text_lists.map(lambda rows: np.array(rows + [None], dtype=object)[:-1]),
    st.tuples(text_lists, text_lists),  # (texts, pairs), of equal lengths or not
    st.fixed_dictionaries({"text": text_lists, "text_pair": text_lists}),
)
label_values = st.one_of(
    st.integers(-1, 2),
    st.integers(-1, 2),
    st.floats(-1, 3),
    st.sampled_from([*NAMES, *NAMES, "maybe", ""]),
    st.booleans(),
    st.none(),
    st.just(float("nan")),
)
labels = st.one_of(
    st.lists(label_values, max_size=6), st.lists(st.integers(0, 1), max_size=6).map(np.array)
)


# === The oracle ===


def _rows_verdict(rows):
    if isinstance(rows, np.ndarray):
        rows = rows.tolist()
    if not isinstance(rows, list) or not rows:
        return INVALID, 0
    if not all(isinstance(row, (str, bytes)) for row in rows):
        return INVALID, 0
    return (EITHER if any(has_surrogate(row) for row in rows) else VALID), len(rows)


def expected(x):
    """(VALID / INVALID / EITHER, number of texts) for text input `x`."""
    if isinstance(x, (str, bytes)):
        return (EITHER if has_surrogate(x) else VALID), 1
    if isinstance(x, dict):
        x = (x["text"], x["text_pair"])
    if isinstance(x, tuple):
        (first, n), (second, m) = _rows_verdict(x[0]), _rows_verdict(x[1])
        if INVALID in (first, second) or n != m:
            return INVALID, 0
        return (EITHER if EITHER in (first, second) else VALID), n
    return _rows_verdict(x)


def expected_labels(y, count):
    values = y.tolist() if isinstance(y, np.ndarray) else list(y)
    if len(values) != count or count == 0:
        return INVALID
    if all(isinstance(v, str) for v in values):
        return VALID if all(v in NAMES for v in values) else INVALID
    if any(v is None or isinstance(v, str) for v in values):
        return INVALID
    if any(isinstance(v, bool) for v in values):
        return EITHER  # True / False as classes 1 / 0: NumPy's reading, not refused
    if all(v == v and float(v).is_integer() and 0 <= v < 2 for v in values):
        return VALID
    return INVALID


# === The property ===


def _single(x, i):
    """Row i of `x` alone, in the same form."""
    if isinstance(x, (str, bytes)):
        return x
    if isinstance(x, dict):
        return {name: [value[i]] for name, value in x.items()}
    if isinstance(x, tuple):
        return ([x[0][i]], [x[1][i]])
    return x[i : i + 1] if isinstance(x, np.ndarray) else [x[i]]


def run_call(model, call, x, y, batch_size):
    verdict, count = expected(x)
    if call != "predict":
        label_verdict = expected_labels(y, count)
        verdict = (
            INVALID
            if INVALID in (verdict, label_verdict)
            else (EITHER if EITHER in (verdict, label_verdict) else verdict)
        )
    before_x, before_y = frozen(x), frozen(y)
    try:
        if call == "predict":
            result = model.predict(x, batch_size=batch_size, verbose=0)
        elif call == "fit":
            result = model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0)
        else:
            result = model.evaluate(x, y, batch_size=batch_size, verbose=0, return_dict=True)
    except Exception as error:
        assert verdict != VALID, f"{call} refused valid input: {type(error).__name__}: {error}"
        assert_clear_error(error, "`x`", "`y`", "text", "label", "pair")
        return
    finally:
        assert same(x, before_x) and same(y, before_y), f"{call} changed its input"
    assert verdict != INVALID, f"{call} accepted invalid input and returned {result!r:.200}"
    if call == "predict":
        assert result.shape == (count, 2) and np.isfinite(result).all()
        for i in range(min(count, 3)):  # each row as it is alone (padding, trimming)
            alone = model.predict(_single(x, i), verbose=0)
            np.testing.assert_allclose(result[i], alone[0], rtol=1e-4, atol=1e-4)
    elif call == "fit":
        assert np.isfinite(result.history["loss"]).all()
    else:
        assert np.isfinite(result["loss"])


calls = st.sampled_from(["predict", "fit", "evaluate"])
batch_sizes = st.integers(1, 4)


@FAST
@given(call=calls, x=inputs, y=labels, batch_size=batch_sizes)
def test_fit_evaluate_predict_answer_or_refuse_clearly(classifier, call, x, y, batch_size):
    run_call(classifier, call, x, y, batch_size)


@pytest.mark.slow
@LONG
@given(call=calls, x=inputs, y=labels, batch_size=batch_sizes)
def test_fit_evaluate_predict_answer_or_refuse_clearly_long(classifier, call, x, y, batch_size):
    run_call(classifier, call, x, y, batch_size)
