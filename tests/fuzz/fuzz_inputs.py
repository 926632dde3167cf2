"""What the fuzzer draws: texts a user might pass (control characters, NUL,
lone surrogates, invalid UTF-8 bytes, empty and whitespace-only strings),
rows that are not text, labels of every wrong kind; and how it judges the
outcome: a clear error (a ValueError naming the argument) or a correct
answer, never an error of another type and never a changed input."""

import copy

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

FAST = settings(parent=settings.get_profile("fuzz"))
LONG = settings(parent=settings.get_profile("fuzz-long"))

# Pieces a tokenizer must survive: NUL and other controls, a lone surrogate,
# combining marks, CJK, emoji, zero-width and bidirectional marks, [SEP] spelled out.
PIECES = [
    "\x00",
    "\x01",
    "\x7f",
    "\ufffd",
    "\ud800",
    "\udfff",
    "e\u0301",
    "\u4e2d\u6587",
    "\U0001f600",
    "\u200b",
    "\u202e",
    "\t",
    "\n",
    "\r\n",
    "\u3000",
    "[SEP]",
    "[CLS]",
    "the",
    "quick",
    "fox",
    "dog",
    ".",
    "##s",
    " ",
]
texts = st.one_of(
    st.text(max_size=20),
    st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
    st.lists(st.sampled_from(["the", "quick", "fox", "lazy", "dog"]), min_size=1, max_size=40).map(
        " ".join
    ),  # longer than the sequence
)
byte_texts = st.binary(max_size=12)  # often invalid UTF-8
not_text = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.just("a"), max_size=2),
)


def has_surrogate(text):
    return isinstance(text, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def frozen(value):
    """A deep copy, to check afterwards that a call left its input as it was."""
    return copy.deepcopy(value)


def same(a, b):
    """Deep equality of inputs, NaN equal to NaN, arrays compared by value."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and all(same(x, y) for x, y in zip(a.ravel(), b.ravel()))
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b


def assert_clear_error(error, *names):
    """A ValueError whose message names one of `names` (the argument, its field)."""
    assert isinstance(error, ValueError) and not isinstance(error, UnicodeError), (
        f"{type(error).__name__} instead of a clear ValueError: {error}"
    )
    message = str(error)
    assert any(name in message for name in names), f"the error names none of {names}: {message}"
