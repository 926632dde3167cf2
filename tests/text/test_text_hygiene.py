"""NUL, control characters and lone surrogates as the original BERT tokenizer
handles them, in the one place words are split (the tokenizer's
`whitespace_spans`), for the tagger's words and offsets and every task's pieces.

The reference is tf-models-official's copy of the original tokenizer: its
`_clean_text` deletes NUL, U+FFFD and control / format characters (Cc, Cf)
and turns whitespace into spaces; `whitespace_tokenize` then splits.

Lone surrogates (decided here): the original keeps one in a str as a word
character (category Cs is not Cc / Cf), so its word becomes [UNK], but drops
it from bytes (`convert_to_unicode` decodes with errors="ignore"). A
SavedModel only ever receives bytes, so both our surfaces follow the bytes
rule: `text_tensor` turns each lone surrogate of a Python str into U+FFFD
(one character for one, so offsets still index the caller's str), which
cleaning deletes, as the SavedModel's `clean_utf8` does with an encoded one. Before, tensorflow-text's regex split
stopped at a NUL, so "Emma\\x00 lives in Highbury" was the one word "Emma",
and Python's `str.split()` rule split at \\x0b, \\x0c, \\x1c-\\x1f and \\x85,
which the original deletes.
"""

import random

import numpy as np
import pytest
import tensorflow as tf
from official.nlp.tools import tokenization

from keras_bert import BertTokenizer
from keras_bert.assets import VOCAB_FILE
from keras_bert.preprocessing.tagging import WordTagger, whitespace_words
from keras_bert.text.tokenizer import text_tensor

CASES = [
    "Emma\x00 lives in Highbury",
    "\x00",
    "\x00 \x00",
    "a\x00b c",
    "\x00Emma\x00 Wood\x01house\x02 \x03 Knightley\x00",
    "a\x0bb\x0cc\x1cd\x1fe\x85f",  # whitespace to str.split(), deleted by the original
    "tab\there\nnew\rline",
    "zero\u200bwidth soft\u00adhyphen \u200e mark",  # format characters (Cf)
    "caf\ufffd au \ufffd lait",
    "lone \ud800 surrogate\udc00s and \ud83d half",
    "line\u2028sep\u2029para nbsp\u00a0ideo\u3000space",
    "\x7fdel \x1b[31mred\x1b[0m",
    "Émile Zola, café!",
    "\u0301ΣΑ e\u0301 \u0301 \u0378x",  # marks at a word's edge, alone; unassigned
    "",
    "   ",
]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB_FILE)


@pytest.fixture(scope="module")
def original():
    return tokenization.FullTokenizer(VOCAB_FILE, do_lower_case=True)


def received(text):
    """`text` as the graph receives it from `text_tensor`: lone surrogates as U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def original_words(original, text):
    """The original's whitespace words: `whitespace_tokenize(_clean_text(text))`."""
    return tokenization.whitespace_tokenize(original.basic_tokenizer._clean_text(received(text)))


def cleaned(original, text):
    return original.basic_tokenizer._clean_text(received(text))


def original_ids(original, text):
    return original.convert_tokens_to_ids(original.tokenize(received(text)))


def test_whitespace_words_are_the_originals(tokenizer, original):
    words = whitespace_words(tokenizer, CASES)
    for text, ours in zip(CASES, words):
        assert [cleaned(original, word) for word in ours] == original_words(original, text), repr(
            text
        )


def test_the_words_after_a_nul_are_kept(tokenizer):
    assert whitespace_words(tokenizer, ["Emma\x00 lives in Highbury"]) == [
        ["Emma", "lives", "in", "Highbury"]
    ]


def test_tagger_offsets_point_into_the_original_string(tokenizer, original):
    tagger = WordTagger(tokenizer, 64, ["O", "B-PER", "I-PER"])
    out = tagger.tag_words(
        text_tensor(CASES), lambda features: tf.zeros([tf.shape(features["input_ids"])[0], 64, 3])
    )
    out = {name: value.numpy() for name, value in out.items()}
    for row, text in enumerate(CASES):
        count = int(out["num_tokens"][row])
        starts = out["token_start"][row, :count].tolist()
        ends = out["token_end"][row, :count].tolist()
        spans = [text[start:end] for start, end in zip(starts, ends)]
        # The spans, cleaned as the original cleans, are the original's words...
        assert [cleaned(original, span) for span in spans] == original_words(original, text), repr(
            text
        )
        # ... and begin and end with a character it keeps.
        for span in spans:
            assert cleaned(original, span[0]) and cleaned(original, span[-1]), (repr(text), span)


def test_every_tasks_pieces_are_the_originals_on_dirty_text(tokenizer, original):
    # The classifier's, pairs' and SQuAD's pieces come from `tokenize`, the
    # tagger's from its words: both equal the original's ids.
    ids = tokenizer.tokenize(text_tensor(CASES))
    for text, row in zip(CASES, ids.to_list()):
        assert row == original_ids(original, text), repr(text)
    for text, words in zip(CASES, whitespace_words(tokenizer, CASES)):
        pieces = [
            i for word in words for i in tokenizer.tokenize(text_tensor([word]))[0].numpy().tolist()
        ]
        assert pieces == original_ids(original, text), repr(text)


def test_lone_surrogates_follow_the_originals_bytes_rule(original):
    text = "Emma \ud800Wood\udc00house"
    as_bytes = text.encode("utf-8", "surrogatepass")
    deleted = original.convert_tokens_to_ids(original.tokenize(as_bytes))
    assert deleted == original.convert_tokens_to_ids(original.tokenize("Emma Woodhouse"))
    assert original_ids(original, text) == deleted
    # (On the str itself the original makes the word [UNK]: the rule we do not follow.)
    assert original.tokenize(text) == ["emma", "[UNK]"]


def test_lone_surrogates_become_replacement_characters_in_place():
    # One character for one: offsets in the answers still index the caller's str.
    encoded = text_tensor(["a\ud800b", b"raw \xed\xa0\x80 bytes"]).numpy()
    assert encoded[0].decode("utf-8") == "a\ufffdb"
    assert encoded[1] == b"raw \xed\xa0\x80 bytes"  # bytes pass as given; clean_utf8 reads them
    # TensorFlow's own conversion refuses the batch without naming the row.
    with pytest.raises(ValueError):
        tf.constant(["a\ud800b"])


def test_savedmodel_bytes_with_an_encoded_surrogate_read_as_python_replace(tokenizer, original):
    # What a SavedModel receives: bytes. An encoded surrogate is invalid UTF-8,
    # replaced (three U+FFFD, as Python's errors="replace") and then deleted.
    raw = "Emma \ud800Wood\udc00house".encode("utf-8", "surrogatepass")
    assert whitespace_words(tokenizer, [raw.decode("utf-8", "replace")]) == [
        ["Emma", "Wood\ufffd\ufffd\ufffdhouse"]
    ]
    ids = tokenizer.tokenize(tf.constant([raw]))[0].numpy().tolist()
    assert ids == original.convert_tokens_to_ids(original.tokenize(raw))


def test_split_is_traced_once_and_takes_batches_of_zero(tokenizer):
    assert whitespace_words(tokenizer, []) == []
    starts, ends = tokenizer.whitespace_spans(tf.constant([], tf.string))
    assert starts.shape[0] == ends.shape[0] == 0
    np.testing.assert_array_equal(
        tokenizer.whitespace_spans(tf.constant("a\x00 b"))[0].numpy(), [0, 3]
    )


def test_random_dirty_strings_split_as_the_original(tokenizer, original):
    # Characters the two rules could disagree on, in random order: whitespace
    # of every kind, deleted ones, marks, unassigned, surrogates, CJK, emoji.
    pool = list("ab Éé\t\n\r\x00\x01\x0b\x0c\x1c\x1f\x7f\x85\xa0\xad,'") + [
        "\u200b",
        "\u2028",
        "\u3000",
        "\ufffd",
        "\u0301",
        "\U000e0001",
        "\u0378",
        "中",
        "\ud800",
        "ΣΑ",
        "ß",
        "İ",
        "\U0001f600",
    ]
    rng = random.Random(0)
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 12))) for _ in range(400)]
    for text, ours in zip(texts, whitespace_words(tokenizer, texts)):
        assert [cleaned(original, word) for word in ours] == original_words(original, text), repr(
            text
        )
