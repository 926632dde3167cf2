"""Learning a WordPiece vocabulary from raw text.

Text is split into words by the same in-graph `BasicTokenizer` that
`BertTokenizer` uses, so the vocabulary fits the tokenizer exactly; the pieces
are then chosen by tensorflow-text's WordPiece learner
(`tensorflow_text.tools.wordpiece_vocab`, the algorithm behind
`bert_vocab_from_dataset`).

Layout: `[PAD]` first, then `num_unused` `[unusedN]` slots, `[UNK]`, `[CLS]`,
`[SEP]`, `[MASK]`, then the learned tokens (single characters, then pieces by
frequency). With `num_unused=0` (default) the special ids are 0-4; with
`num_unused=99` they are Google's: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102,
[MASK] 103 (the first 99 unused slots go before [UNK] and the rest after
[MASK], as in Google's vocab.txt).
"""

import collections
from typing import Any, Sequence

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from keras_bert import safe_output, text_files
from keras_bert.progress import Progress
from keras_bert.text.tokenizer import BasicTokenizer


def special_tokens(num_unused: int = 0) -> list[str]:
    """The reserved tokens, in vocabulary order."""
    unused = [f"[unused{i}]" for i in range(num_unused)]
    return ["[PAD]"] + unused[:99] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + unused[99:]


def count_words(
    files: str | Sequence[str], lowercase: bool = True, batch_size: int = 1024
) -> collections.Counter[str]:
    """Word counts of the original's basic tokenization over text files (one
    document or line per line; local paths, gs:// or glob patterns)."""
    paths = []
    for pattern in [files] if isinstance(files, str) else files:
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            raise FileNotFoundError(f"no input file matches {pattern}")
        paths.extend(sorted(matched))
    for path in paths:
        _check_text(path)
    basic = BasicTokenizer(lowercase)
    lines = tf.data.TextLineDataset(paths).batch(batch_size)
    # Each batch's words, and its bytes (newlines included) for the progress line.
    words = lines.map(
        lambda batch: (
            basic.tokenize(batch).flat_values,
            tf.reduce_sum(tf.strings.length(batch) + 1),
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    counts = collections.Counter()
    total_bytes = sum(tf.io.gfile.stat(path).length for path in paths)
    with Progress(total_bytes, "bytes", detail="counting words") as bar:
        for batch, size in words.as_numpy_iterator():
            counts.update(batch)
            bar.advance(int(size))
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})


def _check_text(path, probe=1 << 16):
    """Refuses a directory or a file whose first 64 KiB are not UTF-8 text."""
    if tf.io.gfile.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; give text files (or a glob)")
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(probe)
    # UTF-16 first: its ASCII letters come with NUL bytes, which are not binary data.
    text_files.check_encoding(head, path)
    # A stray NUL is text the original's tokenizer drops; many are binary data.
    if head.count(0) > len(head) // 100:
        raise ValueError(
            f"{path}: binary data ({head.count(0)} NUL bytes in the first {len(head)}), not text"
        )
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not just a character cut by the probe's end
            raise text_files.not_utf8(path, head, e) from None


def learn_vocabulary(files: str | Sequence[str], vocab_size: int, **options: Any) -> list[str]:
    """Learns a WordPiece vocabulary of at most `vocab_size` tokens; the
    options (`lowercase`, `output`, `num_unused`, `max_unique_chars`,
    `max_token_length`, `min_count`) are `learn_vocabulary_and_counts`'s."""
    return learn_vocabulary_and_counts(files, vocab_size, **options)[0]


def learn_vocabulary_and_counts(
    files: str | Sequence[str],
    vocab_size: int,
    lowercase: bool = True,
    output: str | None = None,
    num_unused: int = 0,
    max_unique_chars: int = 1000,
    max_token_length: int = 50,
    min_count: int = 2,
) -> tuple[list[str], collections.Counter[str]]:
    """Learns a WordPiece vocabulary of at most `vocab_size` tokens.

    Args:
      files: text file(s) or glob pattern(s).
      vocab_size: the most tokens, special ones included.
      lowercase: False for a cased vocabulary (no lowercasing, accents kept).
      output: when given, the vocabulary is written there (atomically), one
        token per line.
      num_unused: `[unusedN]` slots to reserve (99 gives Google's special ids).
      max_unique_chars: the alphabet: rarer characters are left out (they
        become [UNK]) so that they don't crowd out pieces.
      max_token_length: longer words are not counted.
      min_count: the learner's lower bound on a piece's frequency.

    Returns:
      the vocabulary, a list of tokens, and the corpus' word counts
      (`count_words`), from which its [UNK] rate follows
      (`keras_bert.text.unknown_rate.count_word_counts`).
    """
    reserved = special_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise ValueError(
            f"vocab_size {vocab_size} leaves no room after {len(reserved)} special tokens"
        )
    safe_output.check_not_input(
        output, [files] if isinstance(files, str) else files, "the vocabulary file"
    )
    counts = count_words(files, lowercase)
    if not counts:
        raise ValueError(f"no words in {files}")
    room = vocab_size - len(reserved)
    while True:
        learned = learner.learn(
            list(counts.items()),
            room,
            reserved_tokens=[],
            lower_thresh=min_count,
            max_unique_chars=max_unique_chars,
            max_token_length=max_token_length,
        )
        chars = sum(
            len(t[2:] if t.startswith("##") else t) == 1 for t in learned if t not in set(reserved)
        )
        if chars <= room or max_unique_chars <= 1:
            break
        # Characters are always kept (alone and as "##c"), so more than fit
        # would overshoot vocab_size: a smaller alphabet, the rarest left to [UNK].
        max_unique_chars = max(1, min(max_unique_chars, chars) * room // chars)
    # The learner may overshoot the size when no frequency threshold lands within
    # it; then the rarest pieces go, but never a character (alone or as "##c"),
    # without which whole words would become [UNK].
    learned = [t for t in learned if t not in set(reserved)]
    is_char = [len(t[2:] if t.startswith("##") else t) == 1 for t in learned]
    room = vocab_size - len(reserved) - sum(is_char)
    pieces = [t for t, char in zip(learned, is_char) if not char]
    dropped = set(pieces[max(room, 0) :])
    vocab = reserved + [t for t in learned if t not in dropped]
    if len(vocab) > vocab_size:
        raise ValueError(f"vocab_size {vocab_size} is too small for the characters of {files}")
    if output:
        write_vocabulary(vocab, output)
    return vocab, counts


def write_vocabulary(vocab: Sequence[str], path: str) -> str:
    """One token per line, written to a temporary name then renamed, so a reader
    never sees half a vocabulary."""
    return safe_output.write_text(path, "".join(token + "\n" for token in vocab))
