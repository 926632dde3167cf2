"""[UNK] rates (keras_bert.text.unknown_rate): counted as the original
tokenizer counts them, with a warning where the vocabulary does not fit.

The numbers come from tf-models-official's copy of the original tokenizer, run
on the same text; the Greek lines are Article 1 of the Universal Declaration
of Human Rights in Greek: Greek text with an English vocabulary, which went
through in silence before.
"""

import csv
import os

import pytest
from official.nlp.tools import tokenization

from keras_bert import BertTokenizer
from keras_bert.assets import VOCAB_FILE
from keras_bert.text import unknown_rate
from keras_bert.text.unknown_rate import UnknownCount

GREEK = [
    "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα.",
    "Είναι προικισμένοι με λογική και συνείδηση, και οφείλουν να συμπεριφέρονται "
    "μεταξύ τους με πνεύμα αδελφοσύνης.",
]


def original_count(texts, lowercase):
    original = tokenization.FullTokenizer(VOCAB_FILE, do_lower_case=lowercase)
    pieces = [p for text in texts for p in original.tokenize(text)]
    words = [w for text in texts for w in original.basic_tokenizer.tokenize(text)]
    return UnknownCount(unknown=pieces.count("[UNK]"), pieces=len(pieces), words=len(words))


def english_reviews(datasets_dir, count=300):
    with open(os.path.join(datasets_dir, "rotten_tomatoes", "dev.tsv"), encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1 : count + 1]
    return [row[1] for row in rows]


@pytest.mark.parametrize("lowercase", [True, False])
def test_counts_are_the_originals(lowercase, datasets_dir):
    texts = GREEK + english_reviews(datasets_dir, 50) + ["Emma\x00 \u00e9t\u00e9 \U0001f600 !"]
    tokenizer = BertTokenizer(VOCAB_FILE, lowercase=lowercase)
    assert unknown_rate.count_texts(tokenizer, texts, batch_size=16) == original_count(
        texts, lowercase
    )


def test_greek_with_the_english_vocabulary_warns_and_says_what_to_do():
    # Cased reading of an uncased vocabulary: capitals and accents are [UNK].
    cased = unknown_rate.count_texts(BertTokenizer(VOCAB_FILE, lowercase=False), GREEK)
    assert cased.rate > unknown_rate.UNKNOWN_RATE_WARNING
    warning = cased.warning("vocab.txt")
    assert warning.startswith("warning: ") and "[UNK]" in warning
    assert all(word in warning for word in ("vocab.txt", "language", "casing", "keras-bert vocab"))
    # Uncased: every Greek letter is in the vocabulary, so no [UNK], but words
    # are spelled letter by letter.
    uncased = unknown_rate.count_texts(BertTokenizer(VOCAB_FILE), GREEK)
    assert uncased.unknown == 0 and uncased.pieces_per_word > unknown_rate.PIECES_PER_WORD_WARNING
    assert "letter by letter" in uncased.warning("vocab.txt")


def test_english_with_the_english_vocabulary_is_quiet(datasets_dir):
    count = unknown_rate.count_texts(BertTokenizer(VOCAB_FILE), english_reviews(datasets_dir))
    assert count.warning("vocab.txt") is None
    assert count.line("the reviews").startswith("[UNK]: 0 of ")


def test_word_counts_give_the_count_of_the_corpus(datasets_dir):
    tokenizer = BertTokenizer(VOCAB_FILE, lowercase=False)
    texts = GREEK * 3 + english_reviews(datasets_dir, 20)
    words = {}
    for text in texts:
        for word in tokenizer.basic_tokenizer.tokenize(text).numpy():
            words[word.decode("utf-8")] = words.get(word.decode("utf-8"), 0) + 1
    assert unknown_rate.count_word_counts(
        tokenizer, words, batch_size=7
    ) == unknown_rate.count_texts(tokenizer, texts)


def test_texts_in_every_form_fit_takes():
    assert unknown_rate.texts_in(["a", "b"]) == ["a", "b"]
    assert unknown_rate.texts_in((["a", "b"], ["c", "d"])) == ["a", "b", "c", "d"]
    assert unknown_rate.texts_in({"question": ["q"], "context": ["c"]}) == ["q", "c"]
    assert unknown_rate.texts_in([["Emma", "Woodhouse"], ["Highbury"]]) == [
        "Emma Woodhouse",
        "Highbury",
    ]
    assert unknown_rate.texts_in(["a"] * 50, limit=3) == ["a"] * 3


def test_report_prints_one_line_and_the_warning_on_stderr(capsys):
    unknown_rate.report(
        UnknownCount(unknown=4637, pieces=6404, words=3000), "the input text", "vocab.txt"
    )
    out, err = capsys.readouterr()
    assert out == (
        "[UNK]: 4,637 of 6,404 word pieces (72.41 %), 2.13 pieces per word, in the input text\n"
    )
    assert err.startswith("warning: 72.4 % of the word pieces are [UNK] (more than 5 %)")
