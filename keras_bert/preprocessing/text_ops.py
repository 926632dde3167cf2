"""String ops shared by the preprocessors and the exported serving graphs:
input cleaning, character offsets, the surface text of spans, batch checks.

TensorFlow ops only, so that a SavedModel using them loads without keras_bert.
"""

from __future__ import annotations

import tensorflow as tf


def clean_utf8(text: tf.Tensor) -> tf.Tensor:
    """(B,) bytes -> valid UTF-8: each invalid sequence becomes one U+FFFD, as
    Python's `bytes.decode("utf-8", errors="replace")` does. The tokenizer then
    drops U+FFFD like any deleted character; offsets index the cleaned text,
    which equals the input whenever the input was valid UTF-8."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def char_offsets(
    text: tf.Tensor, byte_offsets: tf.Tensor | tf.RaggedTensor
) -> tf.Tensor | tf.RaggedTensor:
    """(B,) valid UTF-8 text, byte offsets into it, (B,) or (B, N), dense or
    ragged -> the same offsets in Unicode characters (what Python's `str` indexes).

    One sorted list of every character's global byte position and a binary
    search: no per-offset copy of the text (a 100,000-character text with
    20,000 words stays cheap)."""
    if isinstance(byte_offsets, tf.RaggedTensor):
        return byte_offsets.with_flat_values(
            char_offsets_by_row(byte_offsets.value_rowids(), byte_offsets.flat_values, text)
        )
    return char_offsets_by_row(tf.range(tf.size(text, out_type=tf.int64)), byte_offsets, text)


def char_offsets_by_row(rows: tf.Tensor, byte_offsets: tf.Tensor, text: tf.Tensor) -> tf.Tensor:
    """byte offsets (N, ...) into `text[rows]` -> character offsets (N, ...)."""
    shape = tf.shape(byte_offsets)
    flat = tf.reshape(tf.cast(byte_offsets, tf.int64), [-1])
    rows = tf.reshape(
        tf.broadcast_to(
            tf.reshape(rows, tf.concat([tf.shape(rows), tf.ones_like(shape[1:])], 0)), shape
        ),
        [-1],
    )
    _, char_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8", errors="replace")
    byte_base = tf.math.cumsum(tf.cast(tf.strings.length(text), tf.int64), exclusive=True)  # (B,)
    global_starts = char_starts.flat_values + tf.gather(byte_base, char_starts.value_rowids())
    before = tf.searchsorted(
        global_starts, tf.gather(byte_base, rows) + flat, side="left", out_type=tf.int64
    )
    return tf.reshape(before - tf.gather(char_starts.row_starts(), rows), shape)


def surface_text(text: tf.Tensor, byte_starts: tf.Tensor, byte_ends: tf.Tensor) -> tf.Tensor:
    """(B,) text, (B,) or (B, N) dense byte spans -> the exact bytes of each span.
    Broadcasting `text` (rather than gathering it) copies only the spans."""
    if byte_starts.shape.rank == 2:
        text = text[:, tf.newaxis]
    return tf.strings.substr(text, byte_starts, byte_ends - byte_starts, unit="BYTE")


def check_same_batch(
    name_a: str, a: tf.Tensor, name_b: str, b: tf.Tensor, allow_empty_b: bool = False
) -> tf.Operation | None:
    """Raises InvalidArgumentError (a clear message, not a shape error deep
    inside the graph) when two string inputs have different batch sizes."""
    size_a, size_b = tf.size(a), tf.size(b)
    ok = tf.equal(size_a, size_b)
    if allow_empty_b:
        ok = tf.logical_or(ok, tf.equal(size_b, 0))
    expected = f"one `{name_b}` per `{name_a}`" + (" (or none)" if allow_empty_b else "")
    return tf.debugging.Assert(
        ok, [f"{expected}; got {name_a} batch", size_a, f"and {name_b} batch", size_b]
    )
