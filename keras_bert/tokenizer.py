"""In-graph WordPiece tokenization with the original BERT's exact behaviour.

Everything here is TensorFlow and tensorflow-text ops, so the same tokenizer
runs eagerly, in `tf.data`, inside `tf.function` and inside an exported
SavedModel that TensorFlow Serving loads.

The original `BasicTokenizer` (google-research/bert `tokenization.py`) is
reproduced in three in-graph steps:

1. split the *original* string into words: on whitespace (space, tab, newline,
   carriage return, Unicode Zs, line and paragraph separators), with every
   punctuation character and every CJK ideograph a word of its own. Splitting
   before normalising keeps each word's byte span in the original string, which
   QA and NER need;
2. normalise each word as the original does: delete control / format
   characters, lowercase, NFD and strip combining marks (uncased only);
3. WordPiece each word with `FastWordpieceTokenizer`; a word longer than
   `max_chars_per_word` characters becomes `[UNK]` (the original's rule, in
   characters, not bytes).

Legend for shape comments: B = batch, W = words, P = word pieces, T = sequence.
"""

import tensorflow as tf
import tensorflow_text as tf_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Characters the original treats as whitespace after `_clean_text`: " \t\n\r" and
# category Zs; Python's str.split() also splits on the line / paragraph separators.
_WHITESPACE = r"[ \t\n\r\p{Zs}\x{2028}\x{2029}]"
# `_is_punctuation`: the ASCII non-alphanumeric ranges plus Unicode category P*.
_PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
# `_is_chinese_char`: the CJK Unified Ideographs blocks (not Hangul, not kana).
_CJK = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
        r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")
_SPLIT = f"({_WHITESPACE}|{_PUNCTUATION}|{_CJK})"
_KEEP = f"({_PUNCTUATION}|{_CJK})"
# `_clean_text` deletes NUL, U+FFFD and control / format / private-use characters.
_DELETED = r"[\p{Cc}\p{Cf}\p{Co}\p{Cs}\x{FFFD}]"


def load_vocabulary(vocab_file):
    """Reads a one-token-per-line vocabulary (local path or gs://)."""
    if not tf.io.gfile.exists(vocab_file):
        raise FileNotFoundError(f"vocabulary file not found: {vocab_file}")
    with tf.io.gfile.GFile(vocab_file, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ValueError(f"{vocab_file}, line {line}: not valid UTF-8") from None
    vocab = [line.strip() for line in text.split("\n")]
    if vocab and vocab[-1] == "":
        vocab.pop()  # the final newline
    if not vocab:
        raise ValueError(f"vocabulary file is empty: {vocab_file}")
    return vocab


class BertTokenizer(tf.Module):
    """WordPiece tokenizer identical to the original BERT `FullTokenizer`.

    Args:
      vocab_file: one token per line, as the original `vocab.txt`.
      lowercase: True for uncased vocabularies (lowercase + strip accents).
      max_chars_per_word: longer words become `[UNK]`; 200 as google-research/bert.
    """

    def __init__(self, vocab_file, lowercase=True, max_chars_per_word=200, name=None):
        super().__init__(name=name)
        self.vocab_file = vocab_file
        self.vocab = load_vocabulary(vocab_file)
        self.lowercase = lowercase
        self.max_chars_per_word = max_chars_per_word
        token_to_id = {token: i for i, token in enumerate(self.vocab)}
        missing = [t for t in SPECIAL_TOKENS if t not in token_to_id]
        if missing:
            raise ValueError(f"{vocab_file}: vocabulary lacks the special token(s) {missing}")
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            token_to_id[t] for t in SPECIAL_TOKENS)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocab, suffix_indicator="##", unknown_token="[UNK]",
            # Bytes, not characters: the character limit is applied before this.
            max_bytes_per_word=4 * max_chars_per_word + 4,
            token_out_type=tf.int32, no_pretokenization=True,
            support_detokenization=True)

    @property
    def vocab_size(self):
        return len(self.vocab)

    # === Tokenization ===

    def split_words_with_offsets(self, strings):
        """strings (B,) -> normalised words (B, W) with byte spans in the originals."""
        strings = tf.convert_to_tensor(strings, dtype=tf.string)
        words, starts, ends = tf_text.regex_split_with_offsets(strings, _SPLIT, _KEEP)
        normalized = words
        if self.lowercase:
            normalized = tf.strings.lower(normalized, encoding="utf-8")
            normalized = tf_text.normalize_utf8(normalized, "NFD")
            normalized = tf.strings.regex_replace(normalized, r"\p{Mn}", "")
        normalized = tf.strings.regex_replace(normalized, _DELETED, "")
        # A word made only of deleted characters disappears, as in the original.
        keep = tf.strings.length(normalized) > 0
        return (tf.ragged.boolean_mask(normalized, keep),
                tf.ragged.boolean_mask(starts, keep),
                tf.ragged.boolean_mask(ends, keep),
                tf.ragged.boolean_mask(tf.strings.length(words), keep))

    def tokenize_words_with_offsets(self, strings):
        """strings (B,) -> ids (B, W, P) and each piece's byte start / end in the input."""
        words, word_starts, word_ends, original_lengths = self.split_words_with_offsets(strings)
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > self.max_chars_per_word
        words = tf.where(too_long, "[UNK]", words)
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(words)  # (B, W, P)
        ids = tf.cast(ids, tf.int32)
        # Pieces map exactly into the original where normalising kept the word's
        # length (almost always); otherwise each piece gets the whole word's span.
        same_length = tf.equal(tf.strings.length(words), original_lengths)  # (B, W)
        same_length = tf.logical_and(same_length, tf.logical_not(too_long))
        starts = tf.cast(starts, tf.int64)
        ends = tf.cast(ends, tf.int64)
        exact_starts = word_starts[..., tf.newaxis] + starts
        exact_ends = word_starts[..., tf.newaxis] + ends
        word_start_each = tf.ones_like(starts) * word_starts[..., tf.newaxis]
        word_end_each = tf.ones_like(ends) * word_ends[..., tf.newaxis]
        same = tf.ones_like(starts, dtype=tf.bool) & same_length[..., tf.newaxis]
        starts = tf.ragged.map_flat_values(tf.where, same, exact_starts, word_start_each)
        ends = tf.ragged.map_flat_values(tf.where, same, exact_ends, word_end_each)
        return ids, starts, ends

    def tokenize_with_offsets(self, strings):
        """strings (B,) -> ids, starts, ends, each ragged (B, P); byte offsets."""
        ids, starts, ends = self.tokenize_words_with_offsets(strings)
        return ids.merge_dims(1, 2), starts.merge_dims(1, 2), ends.merge_dims(1, 2)

    def tokenize(self, strings):
        """strings (B,) -> ragged int32 word-piece ids (B, P). A scalar gives (P,)."""
        strings = tf.convert_to_tensor(strings, dtype=tf.string)
        if strings.shape.rank == 0:
            return self.tokenize(strings[tf.newaxis])[0]
        ids, _, _ = self.tokenize_words_with_offsets(strings)
        return ids.merge_dims(1, 2)

    def detokenize(self, ids):
        """ids (B, P) -> strings (B,): pieces joined, `##` continuations glued."""
        return self._wordpiece.detokenize(ids)

    def id_to_token(self, ids):
        return tf.gather(tf.constant(self.vocab), ids)

    # === Packing ===

    def pack(self, segment_a, segment_b=None, seq_length=128):
        """Packs `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` into fixed-length features.

        Segments are ragged ids (B, P) (or strings, which are tokenized first).
        Over-long pairs are trimmed as the original `_truncate_seq_pair`: one
        token at a time from the end of the longer segment (B on ties).
        Returns `input_ids`, `input_mask`, `segment_ids`, int32 (B, seq_length).
        """
        segment_a = self._as_ids(segment_a)
        if segment_b is None:
            segment_a = _trim_rows(segment_a, seq_length - 2)
            segments = [segment_a]
        else:
            segment_b = self._as_ids(segment_b)
            keep_a, keep_b = truncated_pair_lengths(
                segment_a.row_lengths(), segment_b.row_lengths(), seq_length - 3)
            segments = [_trim_rows(segment_a, keep_a), _trim_rows(segment_b, keep_b)]
        return self._pack_trimmed(segments, seq_length)

    def _as_ids(self, segment):
        if isinstance(segment, tf.RaggedTensor) and segment.dtype != tf.string:
            return tf.cast(segment, tf.int32)
        return self.tokenize(segment)

    def _pack_trimmed(self, segments, seq_length):
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
        shape = [None, seq_length]
        return {
            "input_ids": input_ids.to_tensor(self.pad_id, shape=shape),
            "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
            "segment_ids": segment_ids.to_tensor(0, shape=shape),
        }


def truncated_pair_lengths(length_a, length_b, budget):
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
