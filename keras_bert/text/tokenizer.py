"""In-graph WordPiece tokenization with the original BERT's exact behaviour.

Everything here is TensorFlow and tensorflow-text ops, so the same tokenizer
runs eagerly, in `tf.data`, inside `tf.function` and inside an exported
SavedModel that TensorFlow Serving loads.

The original `FullTokenizer` (google-research/bert `tokenization.py`) is
reproduced on whole strings, which is fast, then word pieces are mapped back to
byte spans of the input:

1. normalise the whole string as the original does, in its order: delete NUL,
   U+FFFD and control / format characters (`_clean_text`), then, uncased only,
   lowercase (ICU's full lowercasing, including the final-sigma rule Python's
   `str.lower()` applies), NFD and strip combining marks (`Mn`);
2. split on whitespace, punctuation and CJK ideographs and WordPiece each word
   in one pass (`FastWordpieceTokenizer` end to end, whose word splitting is the
   original's `BasicTokenizer` rule); a word longer than `max_chars_per_word`
   characters becomes `[UNK]`, as the original counts it: in characters;
3. map each piece's byte span in the normalised string back to the input
   through per-character normalised lengths.

The character classes of step 1 come from Python's own Unicode database, the
one the original tokenizer consults. ICU decides the rest (lowercasing, NFD,
whitespace / punctuation while splitting) and its Unicode version differs from
Python's: characters unassigned in Python's database are replaced by an unused
private-use character first (tensorflow-text's newer ICU calls 36 of them
punctuation and decomposes 20), and capitals TF's older ICU cannot lowercase
are lowercased from a table built from `str.lower()`. Every code point then
gives the original's ids (tests/text/test_tokenizer_parity.py).

Legend for shape comments: B = batch, W = words, P = word pieces, C = characters,
T = sequence.
"""

from __future__ import annotations

import bisect
import functools
import json
import os
import re
import unicodedata
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert import safe_output, text_files

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# `_is_chinese_char`: the CJK Unified Ideographs blocks (not Hangul, not kana).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# Valid UTF-8 as Python decodes it: RE2 alone also accepts encoded surrogates.
_VALID_UTF8 = r"(?s)[\x{0}-\x{D7FF}\x{E000}-\x{10FFFF}]*"
# Strings made only of these keep every byte where it is through normalisation
# (ASCII lowercasing keeps lengths), so their offsets need no mapping.
_LENGTH_PRESERVING = r"[\t\n\r\x20-\x7e]*"
# `compute_unicode_classes()` for one Python Unicode version, shipped because
# computing it costs every tokenizing process about a second.
UNICODE_CLASSES_FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "unicode_classes.json"
)
_STRINGS = [tf.TensorSpec([None], tf.string)]
# Public methods have no Python control flow on tensors: when a caller's
# tf.function converts its code with autograph, converting ours only costs time.
_no_autograph = tf.autograph.experimental.do_not_convert


# === Character classes from Python's Unicode database ===


def _class(ranges):
    """[(first, last), ...] -> an RE2 character class."""
    parts = (f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
    return "[" + "".join(parts) + "]"


def _ranges(codepoints):
    """Sorted code points -> ((first, last), ...) runs."""
    runs = []
    for cp in codepoints:
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return tuple(tuple(r) for r in runs)


def _code_points(ranges):
    return [cp for first, last in ranges for cp in range(first, last + 1)]


def _ranges_without(ranges, excluded):
    """`ranges` less the code points in `excluded`."""
    excluded = sorted(excluded)
    kept = []
    for first, last in ranges:
        holes = excluded[bisect.bisect_left(excluded, first) : bisect.bisect_right(excluded, last)]
        for hole in holes:
            if first < hole:
                kept.append((first, hole - 1))
            first = hole + 1
        if first <= last:
            kept.append((first, last))
    return tuple(kept)


def compute_unicode_classes() -> dict[str, tuple[tuple[int, int], ...]]:
    """The original's character predicates, as code point ranges, from Python's Unicode
    database (a scan of every code point: slow enough that the package ships the result)."""
    chars = [chr(cp) for cp in range(0x110000)]
    categories = list(map(unicodedata.category, chars))
    every = range(0x110000)

    cjk = {cp for a, b in _CJK_RANGES for cp in range(a, b + 1)}

    # `_clean_text`: NUL, U+FFFD and `_is_control` (Cc, Cf but not \t \n \r).
    deleted = [cp for cp in every if categories[cp] in ("Cc", "Cf") and cp not in (9, 10, 13)]
    deleted = sorted(set(deleted) | {0, 0xFFFD})
    deleted_set = set(deleted)
    return {
        "deleted": _ranges(deleted),
        # `_is_whitespace`, then str.split(), of what cleaning leaves.
        "whitespace": _ranges(
            cp
            for cp in every
            if cp not in deleted_set and (categories[cp] == "Zs" or chars[cp].isspace())
        ),
        "marks": _ranges(cp for cp in every if categories[cp] == "Mn"),
        # (The original splits off the CJK blocks even where unassigned.)
        "unassigned": _ranges(cp for cp in every if categories[cp] == "Cn" and cp not in cjk),
        # `_is_punctuation`: all non-alphanumeric ASCII, plus Unicode category P*.
        "punctuation": _ranges(
            cp
            for cp in every
            if categories[cp][0] == "P"
            or 33 <= cp <= 47
            or 58 <= cp <= 64
            or 91 <= cp <= 96
            or 123 <= cp <= 126
        ),
        "lowercased": _ranges(cp for cp in every if chars[cp].lower() != chars[cp]),
    }


def write_unicode_classes(path: str = UNICODE_CLASSES_FILE) -> None:
    """Writes `compute_unicode_classes()` for this Python's Unicode version (rerun after upgrading Python)."""
    safe_output.write_json(
        path,
        {"unidata_version": unicodedata.unidata_version, "classes": compute_unicode_classes()},
        indent=None,
        separators=(",", ":"),
    )


@functools.lru_cache(maxsize=None)
def _unicode_classes():
    """The character classes: read from the shipped table when it was made with
    this Python's Unicode version (milliseconds), else computed (about a second,
    paid by every process that builds a tokenizer)."""
    try:
        with open(UNICODE_CLASSES_FILE, encoding="utf-8") as f:
            table = json.load(f)
    except (OSError, ValueError):
        table = {}
    if table.get("unidata_version") != unicodedata.unidata_version:
        return compute_unicode_classes()
    return {name: tuple(tuple(r) for r in ranges) for name, ranges in table["classes"].items()}


@functools.lru_cache(maxsize=None)
def _lowercase_fixes():
    """{code point: lowercase} where TF's ICU lowercasing differs from str.lower().

    TensorFlow's ICU can be older than Python's Unicode: with Python 3.11
    (Unicode 14) and TF 2.20, 40 capitals added in Unicode 14 stay capitals.
    Only one-to-one mappings are listed (all such differences so far).
    """
    chars = [chr(cp) for cp in _code_points(_unicode_classes()["lowercased"])]
    with tf.init_scope():  # eager even if first called while tracing
        lowered = tf.strings.lower([c.encode("utf-8") for c in chars], encoding="utf-8").numpy()
    return {
        ord(c): ord(c.lower())
        for c, low in zip(chars, lowered)
        if low.decode("utf-8") != c.lower() and len(c.lower()) == 1
    }


@functools.lru_cache(maxsize=None)
def _unassigned_class(excluded):
    """Unassigned code points but `excluded` (ones some token holds), as a class."""
    return _class(_ranges_without(_unicode_classes()["unassigned"], excluded))


@functools.lru_cache(maxsize=None)
def _patterns():
    classes = _unicode_classes()
    cjk = _class(_CJK_RANGES)
    punctuation = _class(classes["punctuation"])
    return {
        "deleted": _class(classes["deleted"]),
        "marks": _class(classes["marks"]),
        "split": f"({_class(classes['whitespace'])}|{punctuation}|{cjk})",
        "whitespace": _class(classes["whitespace"]),
        "keep": f"({punctuation}|{cjk})",
    }


class _Untracked:
    """Plain attributes that tf.Module does not walk or track."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)

    if TYPE_CHECKING:  # the attributes come from the keyword arguments

        def __getattr__(self, name: str) -> Any: ...


class _Traced:
    """Methods as tf.functions over (B,) strings, traced once per tokenizer and then
    reused by every caller (tracing takes seconds). A plain object, so that a
    SavedModel holding the tokenizer saves only what its own signatures call."""

    def __init__(self, **methods):
        for name, method in methods.items():
            # No autograph: the code has no Python control flow on tensors, and
            # converting it would take most of the tracing time.
            traced = tf.function(method, input_signature=_STRINGS, autograph=False)
            setattr(self, name, functools.partial(_call_on_rows, traced))

    if TYPE_CHECKING:  # the methods come from the keyword arguments

        def __getattr__(self, name: str) -> Any: ...


def _call_on_rows(traced, strings):
    """Strings (B,) -> traced(strings); one string () -> its row of each output."""
    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    if strings.shape.rank == 0:
        return tf.nest.map_structure(lambda rows: rows[0], traced(strings[tf.newaxis]))
    return traced(strings)


# === Python texts in ===

# U+D800-U+DFFF alone in a Python str: what `errors="surrogateescape"`
# decoding or a JSON "\\ud800" escape leaves. No UTF-8 holds them.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def text_tensor(rows: Sequence[Any]) -> tf.Tensor:
    """Python texts (str or bytes) -> a (B,) UTF-8 string tensor.

    A lone surrogate becomes U+FFFD, one character for one, so that character
    offsets in the answers still index the caller's str; the tokenizer then
    deletes it, as the original's `_clean_text` deletes the surrogate itself
    (category Cs is a control character to it): the same ids, no error. (TF's
    own conversion refuses the whole batch without naming the row. The
    SavedModel gets bytes instead: a surrogate encoded there is invalid UTF-8,
    which `clean_utf8` replaces.)"""
    encoded = [
        _LONE_SURROGATE.sub("\ufffd", row).encode("utf-8") if isinstance(row, str) else row
        for row in rows
    ]
    return tf.constant(encoded, dtype=tf.string, shape=[len(encoded)])


# === Vocabulary ===


def load_vocabulary(vocab_file: str) -> list[str]:
    """Reads a one-token-per-line vocabulary (local path or gs://)."""
    text = text_files.read_text(vocab_file, missing="vocabulary file not found")
    vocab = [line.strip() for line in text.split("\n")]
    if vocab and vocab[-1] == "":
        vocab.pop()  # the final newline
    if not vocab:
        raise ValueError(f"vocabulary file is empty: {vocab_file}")
    return check_vocabulary(vocab, vocab_file)


def check_vocabulary(vocab: Sequence[str], source: str = "vocabulary") -> list[str]:
    """The tokens as a list, after the checks WordPiece needs: not empty, each
    token once, at most 256 bytes. Errors name `source` and the 1-based line."""
    vocab = [str(token) for token in vocab]
    if not vocab:
        raise ValueError(f"vocabulary is empty: {source}")
    seen: dict[str, int] = {}  # token -> its line
    for line, token in enumerate(vocab, start=1):
        if token in seen:
            raise ValueError(
                f"{source}, line {line}: token {token!r} repeats line "
                f"{seen[token]}; each token must appear once"
            )
        seen[token] = line
        if len(token.encode("utf-8")) > 256 + (2 if token.startswith("##") else 0):
            raise ValueError(
                f"{source}, line {line}: token longer than 256 bytes, "
                "the most tensorflow-text's WordPiece supports"
            )
    return vocab


class BasicTokenizer(tf.Module):
    """The original's `BasicTokenizer` in graph: normalisation and word splitting.

    `tokenize(strings)` gives the same words as the original, except that a
    character unassigned in Python's Unicode database (outside the CJK blocks,
    where the original splits even unassigned code points) comes back as a
    placeholder: the first private-use character, from U+E000, that no
    character of `vocab_chars` is. Such characters are ordinary word characters
    to the original, but TensorFlow's newer ICU may split, lowercase or
    decompose them; the placeholder is never touched and, being in no token,
    makes its word [UNK] as the original character does.

    Args:
      lowercase: lowercase (uncased vocabularies).
      vocab_chars: the characters the vocabulary's tokens contain.
      strip_accents: NFD and delete combining marks (Mn); None follows
        `lowercase`, as in the original and HuggingFace's `strip_accents=None`.
    """

    def __init__(
        self,
        lowercase: bool = True,
        vocab_chars: str = "",
        name: str | None = None,
        strip_accents: bool | None = None,
    ) -> None:
        super().__init__(name=name)
        self.lowercase = lowercase
        self.strip_accents = bool(lowercase if strip_accents is None else strip_accents)
        patterns = _patterns()
        self._deleted = patterns["deleted"]
        self._marks = patterns["marks"]
        self._split = patterns["split"]
        self._keep = patterns["keep"]
        self._whitespace = patterns["whitespace"]
        chars = set(vocab_chars)
        self._placeholder = next(chr(cp) for cp in range(0xE000, 0xF900) if chr(cp) not in chars)
        in_vocab = {ord(c) for c in chars if unicodedata.category(c) == "Cn"}
        self._unassigned = _unassigned_class(frozenset(in_vocab))
        fixes = sorted(_lowercase_fixes().items()) if lowercase else []
        self._lower_from = tf.constant([a for a, _ in fixes], tf.int32) if fixes else None
        self._lower_to = tf.constant([b for _, b in fixes], tf.int32) if fixes else None
        self._lower_present = "(?s).*" + _class(_ranges(a for a, _ in fixes)) + ".*"

        self._traced = _Traced(
            tokenize=self._words,
            tokenize_with_offsets=self._words_with_offsets,
            whitespace_spans=self._whitespace_spans,
        )

    @_no_autograph
    def tokenize(self, strings: tf.Tensor | Sequence[str] | str) -> tf.RaggedTensor | tf.Tensor:
        """strings (B,) -> the original's words (B, W), normalised, ragged string."""
        return self._traced.tokenize(strings)

    @_no_autograph
    def tokenize_with_offsets(
        self, strings: tf.Tensor | Sequence[str] | str
    ) -> tuple[tf.RaggedTensor | tf.Tensor, ...]:
        """strings (B,) -> words (B, W) and each word's byte span in the input."""
        return self._traced.tokenize_with_offsets(strings)

    def _words(self, strings):
        normalized, _ = self.normalize(strings)
        return tf_text.regex_split(normalized, self._split, self._keep)

    def _words_with_offsets(self, strings):
        normalized, plain = self.normalize(strings)
        words, starts, ends = tf_text.regex_split_with_offsets(normalized, self._split, self._keep)
        starts, ends = self.map_offsets(strings, plain, starts, ends)
        return words, starts, ends

    @_no_autograph
    def whitespace_spans(
        self, strings: tf.Tensor | Sequence[str] | str
    ) -> tuple[tf.RaggedTensor | tf.Tensor, ...]:
        """strings (B,) -> the byte spans (starts, ends), int64 (B, W), in the
        input of the original's whitespace words: `whitespace_tokenize(
        _clean_text(text))`, before punctuation and CJK splitting.

        The one word splitting of the package: the tagger's words come from
        here, and every task's pieces from the same cleaning. So NUL, U+FFFD and
        control characters are deleted as the original deletes them, never
        taken for the end of the text (tensorflow-text's regex split stops at a
        NUL) nor for whitespace (Python's `str.split()` splits at \\x0b, \\x0c,
        \\x1c-\\x1f and \\x85, which the original deletes). A word made only of
        deleted characters is no word; a span starts at its word's first kept
        character and ends after its last, so it never begins or ends with a
        deleted one (it may hold some inside: "Em\\x00ma" is one word)."""
        return self._traced.whitespace_spans(strings)

    def _whitespace_spans(self, strings):
        # Cleaned only, as the original splits: lowercasing, NFD and mark
        # stripping come after, per word (a word's leading combining mark stays
        # in its span). Cleaned text holds no NUL, so the split sees all of it.
        cleaned = self._clean(strings)
        _, starts, ends = tf_text.regex_split_with_offsets(cleaned, self._whitespace)
        plain = tf.strings.regex_full_match(strings, _LENGTH_PRESERVING)  # nothing deleted
        return self.map_offsets(
            strings, plain, tf.cast(starts, tf.int64), tf.cast(ends, tf.int64), cleaned_only=True
        )

    def _clean(self, strings):
        """Any strings (B,) -> the original's `_clean_text` less its whitespace
        to spaces (B,): invalid UTF-8 read as the original reads it, then NUL,
        U+FFFD and control / format characters deleted."""
        valid = tf.reduce_all(tf.strings.regex_full_match(strings, _VALID_UTF8))
        strings = tf.cond(
            valid,
            lambda: strings,
            lambda: tf.strings.unicode_transcode(
                strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
            ),
        )
        return tf.strings.regex_replace(strings, self._deleted, "")

    # === Normalisation ===

    @_no_autograph
    def normalize(self, strings: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """strings (B,) -> what the original's BasicTokenizer splits (B,), and
        whether each string was plain ASCII, whose offsets carry over, bool (B,)."""
        # Most text is plain printable ASCII, which only needs ASCII lowercasing;
        # one match over the joined batch is far cheaper than one per string.
        all_plain = tf.strings.regex_full_match(
            tf.strings.reduce_join(strings, separator="\n"), _LENGTH_PRESERVING
        )

        def plain_batch():
            return self._normalize_ascii(strings), tf.fill(tf.shape(strings), True)

        def mixed_batch():
            plain = tf.strings.regex_full_match(strings, _LENGTH_PRESERVING)
            other = tf.cast(tf.where(tf.logical_not(plain))[:, 0], tf.int32)
            # dynamic_stitch: the later (fully normalised) values win.
            return tf.dynamic_stitch(
                [tf.range(tf.size(strings)), other],
                [
                    self._normalize_ascii(strings),
                    self._normalize_unicode(tf.gather(strings, other)),
                ],
            ), plain

        return tf.cond(all_plain, plain_batch, mixed_batch)

    def _normalize_ascii(self, strings):
        return tf.strings.lower(strings) if self.lowercase else strings

    def _normalize_unicode(self, strings):
        """Any strings (B,) -> normalised as the original does (B,)."""
        # The original decodes with errors="ignore". Replacing each bad sequence by
        # U+FFFD, which cleaning deletes next, gives the same string. Deleting
        # first also matters because TF's UTF-8 lowercasing stops at NUL.
        strings = self._clean(strings)
        strings = tf.strings.regex_replace(strings, self._unassigned, self._placeholder)
        if self.lowercase:
            # On the whole string, so final sigma sees the context str.lower() sees
            # (whitespace and CJK ideographs bound it in both).
            if self._lower_from is not None:
                present = tf.strings.regex_full_match(
                    tf.strings.reduce_join(strings, separator="\n"), self._lower_present
                )
                strings = tf.cond(
                    present, lambda: self._lowercase_by_table(strings), lambda: strings
                )
            strings = tf.strings.lower(strings, encoding="utf-8")
        if self.strip_accents:
            # After lowercasing, as HuggingFace's BertTokenizer and the original.
            strings = tf_text.normalize_utf8(strings, "NFD")
            strings = tf.strings.regex_replace(strings, self._marks, "")
        return strings

    def _lowercase_by_table(self, strings):
        """Lowercases the characters of `_lowercase_fixes` as str.lower() does."""
        codepoints = tf.strings.unicode_decode(strings, "UTF-8")  # (B, C)
        flat = codepoints.flat_values
        index = tf.minimum(tf.searchsorted(self._lower_from, flat), tf.size(self._lower_from) - 1)
        hit = tf.equal(tf.gather(self._lower_from, index), flat)
        lowered = tf.where(hit, tf.gather(self._lower_to, index), flat)
        return tf.strings.unicode_encode(codepoints.with_flat_values(lowered), "UTF-8")

    @_no_autograph
    def map_offsets(
        self,
        strings: tf.Tensor,
        plain: tf.Tensor,
        starts: tf.RaggedTensor,
        ends: tf.RaggedTensor,
        cleaned_only: bool = False,
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
        """Byte spans (B, P) in the normalised strings -> byte spans in `strings`;
        `plain` (B,) marks the strings whose spans carry over unchanged."""

        def mapped():
            other = tf.where(tf.logical_not(plain))[:, 0]
            mapped_starts, mapped_ends = self._map_rows(
                tf.gather(strings, other),
                tf.gather(starts, other),
                tf.gather(ends, other),
                self._clean if cleaned_only else self._normalize_unicode,
            )
            # Where those rows' pieces sit in the flat values.
            splits = starts.row_splits
            pieces = tf.ragged.range(
                tf.gather(splits[:-1], other), tf.gather(splits[1:], other)
            ).flat_values[:, tf.newaxis]
            return (
                starts.with_flat_values(
                    tf.tensor_scatter_nd_update(
                        starts.flat_values, pieces, mapped_starts.flat_values
                    )
                ),
                ends.with_flat_values(
                    tf.tensor_scatter_nd_update(ends.flat_values, pieces, mapped_ends.flat_values)
                ),
            )

        return tf.cond(tf.reduce_all(plain), lambda: (starts, ends), mapped)

    def _map_rows(self, strings, starts, ends, normalize):
        """map_offsets for any strings, through each character's normalised length."""
        codepoints, char_starts = tf.strings.unicode_decode_with_offsets(
            strings, "UTF-8", errors="replace"
        )  # (B, C)
        flat = codepoints.flat_values  # (C in total,)
        rows = codepoints.value_rowids()
        char_starts = tf.cast(char_starts.flat_values, tf.int64)
        # A character ends where the next starts, the last one where its string ends.
        last = tf.not_equal(rows, tf.concat([rows[1:], [-1]], 0))
        lengths = tf.cast(tf.strings.length(strings), tf.int64)
        char_ends = tf.where(last, tf.gather(lengths, rows), tf.concat([char_starts[1:], [0]], 0))
        # Normalised lengths add up: normalising maps characters independently
        # (final sigma only swaps two 2-byte letters).
        ascii_control = tf.logical_or(
            (flat < 32) & (flat != 9) & (flat != 10) & (flat != 13), flat == 127
        )
        ascii_length = tf.where(ascii_control, 0, 1)  # deleted, or kept as is
        non_ascii = tf.where(flat >= 128)[:, 0]
        chars = tf.strings.unicode_encode(
            tf.RaggedTensor.from_uniform_row_length(tf.gather(flat, non_ascii), 1), "UTF-8"
        )
        normalized_length = tf.tensor_scatter_nd_update(
            ascii_length, non_ascii[:, tf.newaxis], tf.strings.length(normalize(chars))
        )
        # Normalised end of each character over the whole batch, and where each row begins.
        normalized_ends = tf.cumsum(tf.cast(normalized_length, tf.int64))
        row_begins = tf.gather(tf.concat([[0], normalized_ends], 0), codepoints.row_splits[:-1])

        def lookup(positions, table):
            batch_positions = positions.flat_values + tf.gather(
                row_begins, positions.value_rowids()
            )
            index = tf.searchsorted(normalized_ends, batch_positions, side="right")
            index = tf.minimum(index, tf.maximum(tf.size(normalized_ends) - 1, 0))
            return positions.with_flat_values(tf.gather(table, index))

        # A span starts where the character holding its first byte starts and ends
        # where the character holding its last byte ends.
        return lookup(starts, char_starts), lookup(ends - 1, char_ends)


class BertTokenizer(tf.Module):
    """WordPiece tokenizer identical to the original BERT `FullTokenizer`.

    Args:
      vocab_file: one token per line, as the original `vocab.txt`; or the
        tokens themselves, a list (`vocab_file` is then None).
      lowercase: True for uncased vocabularies (lowercase + strip accents).
      max_chars_per_word: longer words become `[UNK]`. 200 as google-research/bert
        (Model Garden's copy of the tokenizer uses 400).
      strip_accents: NFD and delete combining marks; None follows `lowercase`
        (the original). HuggingFace's `strip_accents`: False with `lowercase`
        lowercases and keeps accents, True without it strips and keeps case.
      special_tokens: tokens that, written in the text, are that token's id
        rather than split into pieces (`"[CLS] a [MASK]"` -> [CLS], a, [MASK]),
        as HuggingFace's tokenizers read their special tokens. Empty (the
        original BERT's rule, which splits "[MASK]" into "[", "mask", "]") by
        default. Matched exactly (case included) anywhere in the text, before
        normalisation; the text between is tokenized on its own.
    """

    def __init__(
        self,
        vocab_file: str | os.PathLike | Sequence[str],
        lowercase: bool = True,
        max_chars_per_word: int = 200,
        name: str | None = None,
        strip_accents: bool | None = None,
        special_tokens: Sequence[str] = (),
    ) -> None:
        super().__init__(name=name)
        if isinstance(vocab_file, (str, os.PathLike)):
            self.vocab_file, vocab = os.fspath(vocab_file), load_vocabulary(os.fspath(vocab_file))
        else:
            self.vocab_file, vocab = None, check_vocabulary(vocab_file)
        # Out of tf.Module's attribute walks, which would visit every token each
        # time a SavedModel is written (seconds for 30k tokens).
        self._untracked = _Untracked(vocab=vocab)
        self.lowercase = lowercase
        self.max_chars_per_word = max_chars_per_word
        token_to_id = {token: i for i, token in enumerate(self.vocab)}
        missing = [t for t in SPECIAL_TOKENS if t not in token_to_id]
        if missing:
            raise ValueError(
                f"{self.vocab_file or 'vocabulary'}: vocabulary lacks the special "
                f"token(s) {missing}"
            )
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            token_to_id[t] for t in SPECIAL_TOKENS
        )
        self.special_tokens = _check_special_tokens(special_tokens, token_to_id, self.vocab_file)
        self.basic_tokenizer = BasicTokenizer(
            lowercase, vocab_chars="".join(self.vocab), strip_accents=strip_accents
        )
        self.strip_accents = self.basic_tokenizer.strip_accents
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocab,
            suffix_indicator="##",
            unknown_token="[UNK]",
            # Bytes, not characters: the character limit is applied afterwards.
            max_bytes_per_word=4 * max_chars_per_word + 4,
            token_out_type=tf.int32,
            no_pretokenization=False,
            support_detokenization=True,
        )
        # A word's first piece is never a "##" continuation.
        self.is_word_start = np.array(
            [not (t.startswith("##") and len(t) > 2) for t in self.vocab]
        )  # (vocab_size,)
        self._is_word_start = tf.constant(self.is_word_start)
        if self.special_tokens:
            # Longest first: RE2 takes the first alternative that matches.
            ordered = sorted(self.special_tokens, key=len, reverse=True)
            self._special_pattern = "(" + "|".join(re.escape(t) for t in ordered) + ")"
            self._special_strings = tf.constant(list(self.special_tokens))
            self._special_ids = tf.constant([token_to_id[t] for t in self.special_tokens], tf.int32)
            self._traced = _Traced(
                tokenize=lambda s: self._with_special_tokens(s, offsets=False),
                tokenize_with_offsets=lambda s: self._with_special_tokens(s, offsets=True),
            )
        else:
            self._traced = _Traced(
                tokenize=self._pieces, tokenize_with_offsets=self._pieces_and_offsets
            )

    @property
    def vocab(self) -> list[str]:
        """The tokens, a list: `vocab[id]`."""
        return self._untracked.vocab

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    # === Tokenization ===

    def _pieces_with_offsets(self, normalized):
        """normalized (B,) -> ids, starts, ends (B, P), offsets in `normalized`."""
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(normalized)
        ids = tf.cast(ids, tf.int32)
        starts = tf.cast(starts, tf.int64)
        ends = tf.cast(ends, tf.int64)
        return ids, starts, ends

    def _maybe_long_words(self, normalized):
        """Whether a string may hold a word of more than `max_chars_per_word`
        characters: that needs a run of as many characters without ASCII
        whitespace or punctuation, which real text seldom has, so the exact
        (slower) check seldom runs."""
        if self.max_chars_per_word >= 1000:  # RE2 repeats at most 1000 times
            return tf.reduce_any(tf.strings.length(normalized) > self.max_chars_per_word)
        run = "(?s).*[^\\t\\n\\r !-/:-@\\[-`{-~]{%d,}.*" % (self.max_chars_per_word + 1)
        return tf.strings.regex_full_match(tf.strings.reduce_join(normalized, separator=" "), run)

    def _word_index(self, ids):
        """Each piece's word number over the whole batch (flat, P in total)."""
        is_start = tf.gather(self._is_word_start, ids.flat_values)
        return is_start, tf.cumsum(tf.cast(is_start, tf.int64)) - 1

    def _unknown_long_words(self, normalized, ids, starts, ends):
        """The original's rule: a word of more than `max_chars_per_word` characters -> [UNK]."""
        is_start, word = self._word_index(ids)
        num_words = tf.reduce_sum(tf.cast(is_start, tf.int64))
        word_start = tf.math.unsorted_segment_min(starts.flat_values, word, num_words)
        word_end = tf.math.unsorted_segment_max(ends.flat_values, word, num_words)
        word_row = tf.math.unsorted_segment_max(ids.value_rowids(), word, num_words)
        # Only words of more bytes than that can have too many characters.
        candidates = tf.where(word_end - word_start > self.max_chars_per_word)[:, 0]
        text = tf.strings.substr(
            tf.gather(normalized, tf.gather(word_row, candidates)),
            tf.gather(word_start, candidates),
            tf.gather(word_end - word_start, candidates),
        )
        long_words = tf.boolean_mask(
            candidates, tf.strings.length(text, unit="UTF8_CHAR") > self.max_chars_per_word
        )
        is_long = (
            tf.scatter_nd(
                long_words[:, tf.newaxis], tf.ones_like(long_words), num_words[tf.newaxis]
            )
            > 0
        )
        too_long = tf.gather(is_long, word)
        keep = tf.logical_or(tf.logical_not(too_long), is_start)
        new_ids = tf.where(too_long, self.unk_id, ids.flat_values)
        new_ends = tf.where(too_long, tf.gather(word_end, word), ends.flat_values)
        # Flat masking and new row lengths: tf.ragged.boolean_mask gives the same
        # but adds hundreds of ops, which every process would pay for in tracing.
        row_lengths = tf.math.unsorted_segment_sum(
            tf.cast(keep, tf.int64), ids.value_rowids(), ids.nrows()
        )
        return tuple(
            tf.RaggedTensor.from_row_lengths(
                tf.boolean_mask(values, keep), row_lengths, validate=False
            )
            for values in (new_ids, starts.flat_values, new_ends)
        )

    @_no_autograph
    def tokenize_with_offsets(
        self, strings: tf.Tensor | Sequence[str] | str
    ) -> tuple[tf.RaggedTensor | tf.Tensor, ...]:
        """strings (B,) -> ids, starts, ends, each ragged (B, P); byte offsets in the
        input. A scalar string gives (P,) each."""
        return self._traced.tokenize_with_offsets(strings)

    def _pieces_and_offsets(self, strings):
        normalized, plain = self.basic_tokenizer.normalize(strings)
        ids, starts, ends = self._pieces_with_offsets(normalized)
        ids, starts, ends = tf.cond(
            self._maybe_long_words(normalized),
            lambda: self._unknown_long_words(normalized, ids, starts, ends),
            lambda: (ids, starts, ends),
        )
        starts, ends = self.basic_tokenizer.map_offsets(strings, plain, starts, ends)
        return ids, starts, ends

    # === Special tokens written in the text ===

    def _has_special_token(self, strings):
        """Whether any string (B,) holds a special token's bytes: a byte search,
        which invalid UTF-8 (that a regex does not match through) cannot hide."""
        joined = tf.strings.reduce_join(strings, separator="\n")
        found = [tf.size(tf.strings.split(joined, sep=token)) > 1 for token in self.special_tokens]
        return tf.reduce_any(tf.stack(found))

    def _with_special_tokens(self, strings, offsets):
        """HuggingFace's order: cut the text at its special tokens, each of
        which is its id, and tokenize the text between on its own. Most
        batches hold none. Without offsets, each string of such a batch is
        its own one segment and only the cut is conditional: a branch per
        case would build the word-piece graph twice (trace 0.62 s against
        0.45 s), for the same run time. With offsets, such a batch takes the
        plain path in a branch of its own: through the segments it would map
        its offsets twice (1.5x the run time per call, in every tagger's and
        reader's input pipeline)."""
        if offsets:
            return tf.cond(
                self._has_special_token(strings),
                lambda: self._tokenize_segments(
                    strings, self._cut_at_special_tokens(strings), offsets=True
                ),
                lambda: self._pieces_and_offsets(strings),
            )
        cut = tf.cond(
            self._has_special_token(strings),
            lambda: self._cut_at_special_tokens(strings),
            lambda: self._one_segment_per_string(strings),
        )
        return self._tokenize_segments(strings, cut, offsets=False)

    def _tokenize_segments(self, strings, cut, offsets):
        """`_cut_at_special_tokens`' outputs -> `tokenize`'s (or, with
        `offsets`, `tokenize_with_offsets`') outputs for `strings`."""
        segments, segment_splits, segment_starts, special_index, uncleaned = cut
        # (S,) each, but the splits (B + 1,) and uncleaned (B,)
        is_special = special_index >= 0
        # A special token's segment is tokenized as "" (no pieces), then gets its id.
        between = tf.where(is_special, "", segments)
        special_row = tf.RaggedTensor.from_row_lengths(
            tf.gather(self._special_ids, tf.boolean_mask(special_index, is_special)),
            tf.cast(is_special, tf.int64),
        )  # (S, 0 or 1)

        def regroup(pieces):  # (S, P) -> (B, P)
            return tf.RaggedTensor.from_row_splits(
                pieces, segment_splits, validate=False
            ).merge_dims(1, 2)

        if not offsets:
            return regroup(tf.concat([special_row, self._pieces(between)], axis=1))
        ids, starts, ends = self._pieces_and_offsets(between)
        zeros = tf.zeros_like(special_row, tf.int64)
        ids = tf.concat([special_row, ids], axis=1)
        starts = tf.concat([zeros, starts], axis=1)
        lengths = tf.cast(tf.strings.length(segments), tf.int64)[:, tf.newaxis]
        ends = tf.concat([zeros + lengths, ends], axis=1)
        # Offsets in each segment -> in the cleaned string -> in the input.
        shift = tf.gather(segment_starts, starts.value_rowids())
        starts = starts.with_flat_values(starts.flat_values + shift)
        ends = ends.with_flat_values(ends.flat_values + shift)
        starts, ends = self.basic_tokenizer.map_offsets(
            strings, uncleaned, regroup(starts), regroup(ends), cleaned_only=True
        )
        return regroup(ids), starts, ends

    def _cut_at_special_tokens(self, strings):
        """strings (B,) -> the segments of the cleaned strings between and at
        their special tokens (S,), row splits (B + 1,), each segment's byte start
        in its cleaned string (S,), its special token's index or -1 (S,), and
        whether cleaning left each string's bytes as they were (B,)."""
        # Cleaned first: tensorflow-text's regex split stops at a NUL.
        cleaned = self.basic_tokenizer._clean(strings)  # (B,)
        segments, segment_starts, _ = tf_text.regex_split_with_offsets(
            cleaned, self._special_pattern, self._special_pattern
        )  # (B, S)
        flat = segments.flat_values  # (S in total,)
        matches = tf.cast(tf.equal(flat[:, tf.newaxis], self._special_strings), tf.int32)
        special_index = tf.where(
            tf.reduce_any(matches > 0, axis=1),
            tf.argmax(matches, axis=1, output_type=tf.int32),
            -1,
        )
        uncleaned = tf.strings.regex_full_match(strings, _LENGTH_PRESERVING)
        return flat, segments.row_splits, segment_starts.flat_values, special_index, uncleaned

    def _one_segment_per_string(self, strings):
        """_cut_at_special_tokens' outputs for a batch without special tokens:
        each string whole, uncleaned (its offsets are the input's already)."""
        rows = tf.size(strings, out_type=tf.int64)
        return (
            strings,
            tf.range(rows + 1),
            tf.zeros([rows], tf.int64),
            tf.fill([rows], -1),
            tf.ones([rows], tf.bool),
        )

    @_no_autograph
    def tokenize_words_with_offsets(
        self, strings: tf.Tensor | Sequence[str] | str
    ) -> tuple[tf.RaggedTensor, ...]:
        """strings (B,) -> ids (B, W, P) and each piece's byte start / end in the input."""
        strings = tf.convert_to_tensor(strings, dtype=tf.string)
        if strings.shape.rank == 0:
            return tuple(x[0] for x in self.tokenize_words_with_offsets(strings[tf.newaxis]))
        ids, starts, ends = self.tokenize_with_offsets(strings)
        is_start, _ = self._word_index(ids)
        piece_splits = tf.concat(
            [tf.where(is_start)[:, 0], tf.size(ids.flat_values, out_type=tf.int64)[tf.newaxis]], 0
        )
        words_per_row = tf.math.unsorted_segment_sum(
            tf.cast(is_start, tf.int64), ids.value_rowids(), ids.nrows()
        )

        def group(pieces):
            words = tf.RaggedTensor.from_row_splits(
                pieces.flat_values, piece_splits, validate=False
            )
            return tf.RaggedTensor.from_row_lengths(words, words_per_row, validate=False)

        return group(ids), group(starts), group(ends)

    @_no_autograph
    def split_words_with_offsets(
        self, strings: tf.Tensor | Sequence[str] | str
    ) -> tuple[tf.RaggedTensor | tf.Tensor, ...]:
        """strings (B,) -> the original's BasicTokenizer words (B, W), with byte spans.

        Returns (words, starts, ends): normalised words, ragged string (B, W), and
        the byte span of each in the input, int64 (B, W). See BasicTokenizer.
        """
        return self.basic_tokenizer.tokenize_with_offsets(strings)

    @_no_autograph
    def whitespace_spans(
        self, strings: tf.Tensor | Sequence[str] | str
    ) -> tuple[tf.RaggedTensor | tf.Tensor, ...]:
        """strings (B,) -> byte spans (B, W) of the original's whitespace words
        in the input (`BasicTokenizer.whitespace_spans`): the tagger's words."""
        return self.basic_tokenizer.whitespace_spans(strings)

    @_no_autograph
    def tokenize(self, strings: tf.Tensor | Sequence[str] | str) -> tf.RaggedTensor | tf.Tensor:
        """strings (B,) -> ragged int32 word-piece ids (B, P). A scalar gives (P,)."""
        return self._traced.tokenize(strings)

    def tokenize_unless_long_words(
        self, strings: tf.Tensor | Sequence[str] | str
    ) -> tuple[tf.RaggedTensor | tf.Tensor, tf.Tensor]:
        """strings (B,) -> (ids, may_have_long_words): for offline batches.

        `ids` are `tokenize(strings)` as long as `may_have_long_words` is False
        (real text: nearly always); when it is True, call `tokenize`. Unlike
        `tokenize`, whose graph holds the rare over-long-word rule (most of its
        ops), this one traces in half the time: a data-making process pays it once.
        """
        if self.special_tokens:  # the whole rule: its text is cut first
            return self.tokenize(strings), tf.constant(False)
        normalized, _ = self.basic_tokenizer.normalize(strings)
        return (
            tf.cast(self._wordpiece.tokenize(normalized), tf.int32),
            self._maybe_long_words(normalized),
        )

    def _pieces(self, strings):
        normalized, _ = self.basic_tokenizer.normalize(strings)
        # Offsets are only needed to find over-long words.
        return tf.cond(
            self._maybe_long_words(normalized),
            lambda: self._unknown_long_words(normalized, *self._pieces_with_offsets(normalized))[0],
            lambda: tf.cast(self._wordpiece.tokenize(normalized), tf.int32),
        )

    @_no_autograph
    def detokenize(self, ids: tf.RaggedTensor | tf.Tensor) -> tf.Tensor:
        """ids (B, P) -> strings (B,): pieces joined, `##` continuations glued."""
        return self._wordpiece.detokenize(ids)

    @_no_autograph
    def id_to_token(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """ids (any shape, or ragged) -> their tokens. An id outside
        [0, vocab_size) is a ValueError naming it where the ids are known (eager
        or constant); in a graph, an assertion with that message fails when run
        (tf.gather's own error names neither the id's meaning nor the range)."""
        ids = ids if isinstance(ids, tf.RaggedTensor) else tf.convert_to_tensor(ids)
        values = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
        size = self.vocab_size
        message = (
            f"token ids must be in [0, {size}), this vocabulary's {size} tokens; out of range:"
        )
        known = tf.get_static_value(values)
        if known is not None:
            outside = sorted({int(i) for i in np.ravel(known) if not 0 <= i < size})
            if outside:
                shown = ", ".join(map(str, outside[:10])) + (", ..." if len(outside) > 10 else "")
                raise ValueError(f"{message} {shown}")
            return tf.gather(tf.constant(self.vocab), ids)
        valid = (values >= 0) & (values < tf.cast(size, values.dtype))
        check = tf.debugging.Assert(
            tf.reduce_all(valid), [message, tf.boolean_mask(values, ~valid)], summarize=10
        )
        with tf.control_dependencies([check]):
            return tf.gather(tf.constant(self.vocab), ids)

    # === Packing ===

    @_no_autograph
    def pack(
        self,
        segment_a: tf.RaggedTensor | tf.Tensor | Sequence[str] | str,
        segment_b: tf.RaggedTensor | tf.Tensor | Sequence[str] | str | None = None,
        seq_length: int = 128,
        padding: str = "max_length",
        length_multiple: int = 1,
    ) -> dict[str, tf.Tensor]:
        """Packs `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` into padded features.

        Segments are ragged ids (B, P) (or strings, which are tokenized first).
        Over-long pairs are trimmed as the original `_truncate_seq_pair`: one
        token at a time from the end of the longer segment (B on ties).
        Returns `input_ids`, `input_mask`, `segment_ids`, int32 (B, T):

        - `padding="max_length"`: T = seq_length for every batch;
        - `padding="longest"`: T = the batch's longest packed row rounded up to a
          multiple of `length_multiple`, at most seq_length. The same values in
          the first columns; an encoder then does the work of T, not seq_length,
          positions (reviews of ~30 pieces: a quarter of 128), and the multiple
          bounds how many shapes a served graph sees.
        """
        _check_padding(padding, length_multiple)
        ids_a = self._as_ids(segment_a)
        if segment_b is None:
            segments = [_trim_rows(ids_a, seq_length - 2)]
        else:
            ids_b = self._as_ids(segment_b)
            keep_a, keep_b = truncated_pair_lengths(
                ids_a.row_lengths(), ids_b.row_lengths(), seq_length - 3
            )
            segments = [_trim_rows(ids_a, keep_a), _trim_rows(ids_b, keep_b)]
        return self._pack_trimmed(segments, seq_length, padding, length_multiple)

    def _as_ids(self, segment):
        if isinstance(segment, tf.RaggedTensor) and segment.dtype != tf.string:
            return tf.cast(segment, tf.int32)
        return self.tokenize(segment)

    def _pack_trimmed(self, segments, seq_length, padding="max_length", length_multiple=1):
        batch = segments[0].nrows()
        cls = tf.fill([batch, 1], self.cls_id)
        sep = tf.fill([batch, 1], self.sep_id)
        pieces, types = [cls], [tf.zeros([batch, 1], tf.int32)]
        for index, segment in enumerate(segments):
            with_sep = tf.concat([segment, sep], axis=1)
            pieces.append(with_sep)
            types.append(tf.ones_like(with_sep) * index)
        input_ids = tf.concat(pieces, axis=1)
        segment_ids = tf.concat(types, axis=1)
        if padding == "max_length":
            shape = [None, seq_length]
            return {
                "input_ids": input_ids.to_tensor(self.pad_id, shape=shape),
                "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
                "segment_ids": segment_ids.to_tensor(0, shape=shape),
            }
        width = padded_width(input_ids.row_lengths(), seq_length, length_multiple)
        return {
            name: _pad_columns(ragged.to_tensor(value), width, value)
            for name, ragged, value in (
                ("input_ids", input_ids, self.pad_id),
                ("input_mask", tf.ones_like(input_ids), 0),
                ("segment_ids", segment_ids, 0),
            )
        }

    def select_packed(
        self,
        rows: tf.Tensor,
        if_true: dict[str, tf.Tensor],
        if_false: dict[str, tf.Tensor],
        seq_length: int,
        padding: str = "max_length",
        length_multiple: int = 1,
    ) -> dict[str, tf.Tensor]:
        """Row by row (`rows` (B,) bool), the features of one of two `pack`
        results of the same batch (e.g. packed as single sentences and as
        pairs), padded as `pack(..., padding, length_multiple)` would pad the
        chosen rows."""
        _check_padding(padding, length_multiple)
        if padding == "max_length":
            return {
                key: tf.where(rows[:, tf.newaxis], if_true[key], if_false[key]) for key in if_true
            }
        widest = tf.maximum(tf.shape(if_true["input_ids"])[1], tf.shape(if_false["input_ids"])[1])
        values = {"input_ids": self.pad_id, "input_mask": 0, "segment_ids": 0}
        chosen = {
            key: tf.where(
                rows[:, tf.newaxis],
                _pad_columns(if_true[key], widest, value),
                _pad_columns(if_false[key], widest, value),
            )
            for key, value in values.items()
        }  # (B, widest)
        width = padded_width(
            tf.reduce_sum(chosen["input_mask"], axis=1), seq_length, length_multiple
        )
        return {key: value[:, :width] for key, value in chosen.items()}


PADDINGS = ("max_length", "longest")


def _check_special_tokens(special_tokens, token_to_id, source):
    """The special tokens as a tuple; each must be a vocabulary token."""
    if isinstance(special_tokens, str):
        raise ValueError(
            f"special_tokens must be a list of tokens, got the string {special_tokens!r}"
        )
    tokens = tuple(dict.fromkeys(str(t) for t in special_tokens))
    missing = [t for t in tokens if t not in token_to_id]
    if missing:
        raise ValueError(
            f"special token(s) {missing} are not in the vocabulary {source or ''}".rstrip()
            + "; a special token maps to its vocabulary id"
        )
    if "" in tokens:
        raise ValueError("special_tokens holds an empty string")
    return tokens


def _check_padding(padding, length_multiple):
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    if not isinstance(length_multiple, int) or length_multiple < 1:
        raise ValueError(f"length_multiple must be a positive integer, got {length_multiple!r}")


def padded_width(row_lengths: tf.Tensor, seq_length: int, length_multiple: int) -> tf.Tensor:
    """The longest of `row_lengths` (B,) rounded up to a multiple of
    `length_multiple`, at most `seq_length`; an int32 scalar, at least 2 ([CLS]
    [SEP]) so an empty batch still has a valid shape."""
    longest = tf.reduce_max(tf.concat([tf.cast(row_lengths, tf.int32), [2]], axis=0))
    rounded = (longest + length_multiple - 1) // length_multiple * length_multiple
    return tf.minimum(rounded, seq_length)


def _pad_columns(dense, width, value):
    """(B, W) -> (B, width), W <= width, padded on the right with `value`."""
    return tf.pad(dense, [[0, 0], [0, width - tf.shape(dense)[1]]], constant_values=value)


def truncated_pair_lengths(
    length_a: tf.Tensor, length_b: tf.Tensor, budget: int | tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Closed form of the original's pop-from-the-longer loop (B loses ties)."""
    length_a = tf.cast(length_a, tf.int64)
    length_b = tf.cast(length_b, tf.int64)
    budget = tf.cast(budget, tf.int64)
    half_up = (budget + 1) // 2
    keep_a = tf.minimum(length_a, tf.maximum(budget - length_b, half_up))
    keep_b = tf.minimum(length_b, budget - keep_a)
    return keep_a, keep_b


def _trim_rows(ragged, keep):
    """Keeps the first `keep` (scalar or per row) items of each row."""
    positions = tf.ragged.range(ragged.row_lengths())
    keep = tf.cast(keep, positions.dtype)
    if keep.shape.rank == 1:
        keep = keep[:, tf.newaxis]
    return tf.ragged.boolean_mask(ragged, positions < keep)
