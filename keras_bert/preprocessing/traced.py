"""The tokenizer's calls as shared `tf.function`s: one trace per tokenizer
(and length), reused by every graph that tokenizes, the preprocessors' and every
exported signature's. Tracing the tokenizer is most of an export's time.

Legend for shape comments: B = batch, P = word pieces.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Callable

import tensorflow as tf

from keras_bert.preprocessing.text_ops import clean_utf8

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer

TEXT_SPEC = tf.TensorSpec([None], tf.string)

_TRACED_TOKENIZERS = weakref.WeakKeyDictionary()
_TRACED_PACKS = weakref.WeakKeyDictionary()
_TRACED_WHITESPACE = weakref.WeakKeyDictionary()


def traced_tokenizer(tokenizer: BertTokenizer) -> Callable:
    """`tokenizer.tokenize_with_offsets` after `clean_utf8`, as one `tf.function`
    per tokenizer: every signature (and every export with this tokenizer) calls
    the same trace, and tracing the tokenizer is most of the export time.
    (B,) strings -> ragged (B, P) ids, byte starts and ends in the cleaned text."""
    return _traced_on_clean_text(_TRACED_TOKENIZERS, tokenizer, "tokenize_with_offsets")


def traced_whitespace_spans(tokenizer: BertTokenizer) -> Callable:
    """`tokenizer.whitespace_spans` after `clean_utf8`, one `tf.function` per
    tokenizer as `traced_tokenizer`: (B,) strings -> ragged (B, W) byte starts
    and ends of the original's whitespace words in the cleaned text."""
    return _traced_on_clean_text(_TRACED_WHITESPACE, tokenizer, "whitespace_spans")


def _traced_on_clean_text(
    cache: weakref.WeakKeyDictionary, tokenizer: BertTokenizer, method: str
) -> Callable:
    """`tokenizer.<method>` after `clean_utf8`, traced once per tokenizer into `cache`."""
    if tokenizer not in cache:
        owner = weakref.ref(tokenizer)  # the cache must not keep its key alive
        cache[tokenizer] = tf.function(
            lambda text: getattr(owner(), method)(
                clean_utf8(tf.ensure_shape(text, [None], name="check_text"))
            ),
            input_signature=[TEXT_SPEC],
            autograph=False,
        )
    return cache[tokenizer]


def traced_pack(
    tokenizer: BertTokenizer,
    seq_length: int,
    pair: bool = False,
    padding: str = "max_length",
    length_multiple: int = 1,
) -> Callable[..., dict[str, tf.Tensor]]:
    """`tokenizer.pack` of ragged ids, one `tf.function` per tokenizer, length,
    arity and padding, shared like `traced_tokenizer`. Returns f(ids_a[, ids_b])
    -> {input_ids, input_mask, segment_ids} int32 (B, T) (see `pack` for T)."""
    owner = weakref.ref(tokenizer)
    cache = _TRACED_PACKS.setdefault(tokenizer, {})
    key = (seq_length, pair, padding, length_multiple)
    if key not in cache:
        options = {"seq_length": seq_length, "padding": padding, "length_multiple": length_multiple}
        if pair:

            def pack(ids_a, ids_b):
                return owner().pack(ids_a, ids_b, **options)
        else:

            def pack(ids_a):
                return owner().pack(ids_a, **options)

        cache[key] = tf.function(pack, autograph=False, reduce_retracing=True)
    return cache[key]
