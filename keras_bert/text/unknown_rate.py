"""[UNK] rates: how much of a text a vocabulary cannot spell.

One count for the three places a wrong vocabulary would otherwise go
unnoticed: `keras-bert create-pretraining-data` (the records' word pieces),
`keras-bert vocab` (the learned vocabulary on its own corpus) and `keras-bert
finetune` (the training texts with the model's vocabulary). Each prints one
line, and a warning that says what to do when the [UNK] rate is above
`UNKNOWN_RATE_WARNING` or words take more than `PIECES_PER_WORD_WARNING` pieces.

Greek text with an English vocabulary is the case that went unnoticed (a
bad-input sweep found 4,637 of 6,404 pieces [UNK]). Read without lowercasing,
much of it is [UNK]; with the uncased vocabulary, which holds every Greek
letter, none is, but each word is spelled letter by letter: so the line
reports pieces per word too, with its own threshold.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TextIO

import numpy as np

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer

# Above this share of [UNK] word pieces the vocabulary does not fit the text.
# Why 5 %: a vocabulary of the text's language and casing leaves next to none
# (Google's uncased vocabulary: 0 [UNK] in 1.3 million word pieces of
# data/rotten_tomatoes, data/bbc_news, data/wnut16's tweets and the six Austen
# novels), while one of another script or casing leaves a large share (Greek
# with that vocabulary but without lowercasing, a casing mismatch: 32 %; the
# sweep's Greek corpus: 72 %). 5 % is one word in about every twenty lost: never normal, well
# clear of both.
UNKNOWN_RATE_WARNING = 0.05
# Above this many word pieces per word the vocabulary spells the text letter by
# letter: Google's uncased vocabulary holds every Greek letter, so Greek text
# has no [UNK] with it but about 5.4 pieces per word, where the English sets
# above have 1.04-1.18, and even the quickstart's 600-token vocabulary, learned
# on 60,000 characters of Emma, spells Emma in 1.59. 3 leaves room for code,
# names and numbers.
PIECES_PER_WORD_WARNING = 3.0
# Texts counted for `finetune`: enough for a rate to two decimals, and a cost
# that stays small before training (about a second on one core).
MAX_TEXTS = 10_000


@dataclasses.dataclass
class UnknownCount:
    """[UNK] word pieces among all word pieces, and the words they spell (the
    original's words: whitespace and punctuation split)."""

    unknown: int = 0
    pieces: int = 0
    words: int = 0

    def add(self, other: UnknownCount) -> None:
        self.unknown += other.unknown
        self.pieces += other.pieces
        self.words += other.words

    @property
    def rate(self) -> float:
        return self.unknown / self.pieces if self.pieces else 0.0

    @property
    def pieces_per_word(self) -> float:
        return self.pieces / self.words if self.words else 0.0

    def line(self, what: str) -> str:
        """The one-line report, e.g. "[UNK]: 12 of 6,404 word pieces (0.19 %),
        1.21 pieces per word, in the training texts"."""
        return (
            f"[UNK]: {self.unknown:,} of {self.pieces:,} word pieces "
            f"({100 * self.rate:.2f} %), {self.pieces_per_word:.2f} pieces per word, "
            f"in {what}"
        )

    def warning(self, vocabulary: str) -> str | None:
        """What to do when the vocabulary does not fit (`UNKNOWN_RATE_WARNING`,
        `PIECES_PER_WORD_WARNING`); else None."""
        if self.rate > UNKNOWN_RATE_WARNING:
            found = (
                f"{100 * self.rate:.1f} % of the word pieces are [UNK] (more than "
                f"{100 * UNKNOWN_RATE_WARNING:.0f} %)"
            )
        elif self.pieces_per_word > PIECES_PER_WORD_WARNING:
            found = (
                f"words are spelled in {self.pieces_per_word:.1f} word pieces on average "
                f"(more than {PIECES_PER_WORD_WARNING}: letter by letter)"
            )
        else:
            return None
        return (
            f"warning: {found}: the vocabulary {vocabulary} does not fit this text. Check "
            "its language (an English vocabulary cannot spell Greek or Chinese: use a "
            "multilingual one or one of your language, or learn one with `keras-bert "
            "vocab`) and its casing (a cased vocabulary wants --no-do-lower-case / "
            "lowercase=false, an uncased one the default lowercasing)"
        )


def count_ids(ids: Any, tokenizer: BertTokenizer) -> UnknownCount:
    """Word-piece ids of `tokenizer` (an array, or a ragged tensor) -> the count."""
    values = getattr(ids, "flat_values", ids)
    values = np.asarray(values.numpy() if hasattr(values, "numpy") else values)
    return UnknownCount(
        unknown=int(np.count_nonzero(values == tokenizer.unk_id)),
        pieces=int(values.size),
        words=int(np.count_nonzero(tokenizer.is_word_start[values])),
    )


def count_texts(
    tokenizer: BertTokenizer, texts: Sequence[str | bytes], batch_size: int = 1024
) -> UnknownCount:
    """Tokenizes `texts` (in batches) and counts their [UNK] pieces."""
    from keras_bert.text.tokenizer import text_tensor

    count = UnknownCount()
    for start in range(0, len(texts), batch_size):
        # (The tokenizer reads invalid UTF-8 as the original does.)
        ids = tokenizer.tokenize(text_tensor(list(texts[start : start + batch_size])))
        count.add(count_ids(ids, tokenizer))
    return count


def count_word_counts(
    tokenizer: BertTokenizer, word_counts: Mapping[str, int], batch_size: int = 4096
) -> UnknownCount:
    """{word: occurrences} (a corpus' words, as `keras_bert.text.vocab.count_words`
    gives them) -> the count over the whole corpus, each word tokenized once."""
    from keras_bert.text.tokenizer import text_tensor

    words = list(word_counts)
    count = UnknownCount()
    for start in range(0, len(words), batch_size):
        chunk = words[start : start + batch_size]
        ids = tokenizer.tokenize(text_tensor(chunk))  # (words, P)
        times = np.asarray([word_counts[w] for w in chunk], np.int64)  # (words,)
        row_times = np.repeat(times, ids.row_lengths().numpy())  # (all pieces,)
        values = ids.flat_values.numpy()
        count.add(
            UnknownCount(
                unknown=int(row_times[values == tokenizer.unk_id].sum()),
                pieces=int(row_times.sum()),
                words=int(row_times[tokenizer.is_word_start[values]].sum()),
            )
        )
    return count


def texts_in(x: Any, limit: int = MAX_TEXTS) -> list[str]:
    """The first `limit` texts of `fit`'s x in any of the task models' forms:
    a list (or array) of texts, a (texts, pairs) tuple, a dict of such lists
    ({"question", "context"}, {"text", "text_pair"}), a list of word lists
    (tagging: each joined by spaces, which tokenizes to the same pieces)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if len(found) >= limit:
            return
        if isinstance(value, (str, bytes)):
            found.append(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
        elif isinstance(value, Mapping):
            for part in value.values():
                walk(part)
        elif isinstance(value, list) and value and isinstance(value[0], (list, tuple)):
            for row in value[: limit - len(found)]:  # word lists, or (text, pair) rows
                found.append(" ".join(str(word) for word in row))
        elif isinstance(value, (list, tuple, np.ndarray)):
            for row in value:
                if len(found) >= limit:
                    return
                walk(row)

    walk(x)
    return found


def report_texts(
    tokenizer: BertTokenizer, x: Any, what: str, vocabulary: str, limit: int = MAX_TEXTS
) -> UnknownCount:
    """Counts and reports the first `limit` texts of `x` (`texts_in`): what
    `keras-bert finetune` prints about its training data."""
    texts = texts_in(x, limit)
    count = count_texts(tokenizer, texts)
    if len(texts) == limit:
        what = f"{what} (the first {limit:,} texts)"
    report(count, what, vocabulary)
    return count


def report(
    count: UnknownCount,
    what: str,
    vocabulary: str,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """Prints `count.line(what)` (stdout) and, above the threshold, its warning (stderr)."""
    print(count.line(what), file=out or sys.stdout, flush=True)
    warning = count.warning(vocabulary)
    if warning:
        print(warning, file=err or sys.stderr, flush=True)
