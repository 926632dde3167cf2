"""Fuzzing a token tagger's answers on drawn texts (`tag`, what `keras-bert
predict` and the exported tagger answer): one tag per word, and every
entity's character offsets pointing at its own text in the input
(`text[start:end] == entity["text"]`), whatever the text holds; for text of
letters, punctuation, ordinary spaces and NULs, the words (NULs aside) are
`text.split()` with the NULs removed, as the original tokenizer removes them:
no word after a NUL is lost.
Never an error for a string (a lone surrogate: a ValueError naming it).
"""

import keras
import pytest
from fuzz_inputs import FAST, LONG, assert_clear_error, has_surrogate, texts
from hypothesis import given
from hypothesis import strategies as st

from keras_bert import BertEncoder, BertPreprocessor, BertTokenClassifier

from conftest import TINY_VOCAB
from harness import tiny_config

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# Text whose words every whitespace convention agrees on.
plain = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "the",
                "fox",
                "Emma",
                "lives",
                "in",
                "Highbury",
                ".",
                ",",
                "\u4e2d\u6587",
                "caf\u00e9",
                "a-b",
            ]
        ),
        st.text(alphabet=st.characters(categories=["L", "N", "P"]), min_size=1, max_size=6),
        st.sampled_from(["Emma\x00", "\x00", "a\x00b"]),
    ),
    max_size=12,
).flatmap(
    lambda words: st.tuples(
        st.just(words),
        st.lists(
            st.sampled_from([" ", "  ", "\t", "\n"]), min_size=len(words), max_size=len(words)
        ),
    )
)
plain_texts = plain.map(lambda drawn: "".join(w + s for w, s in zip(*drawn)))


@pytest.fixture(scope="module")
def tagger():
    keras.utils.set_random_seed(3)
    model = BertTokenClassifier(
        BertEncoder(tiny_config(vocab_size=len(TINY_VOCAB))),
        label_names=TAGS,
        preprocessor=BertPreprocessor(TINY_VOCAB, seq_length=16),
    )
    # Tags well apart, so that entities appear often.
    for weight in model.get_layer("tagger_output").weights:
        weight.assign(weight.numpy() * 50.0)
    return model


def check_tags(tagger, batch, plain_words):
    try:
        answers = tagger.tag(batch)
    except Exception as error:
        assert any(has_surrogate(text) for text in batch), f"tag refused text: {error}"
        assert_clear_error(error, "`x`", "text")
        return
    assert len(answers) == len(batch)
    for text, answer in zip(batch, answers):
        assert len(answer["tags"]) == len(answer["tokens"])
        assert all(tag in TAGS for tag in answer["tags"])
        for entity in answer["entities"]:
            assert text[entity["start"] : entity["end"]] == entity["text"], (text, entity)
        if text in plain_words:
            words = [token.replace("\x00", "") for token in answer["tokens"]]
            assert words == text.replace("\x00", "").split(), (text, answer["tokens"])


batches = st.lists(
    st.one_of(plain_texts, texts.filter(lambda t: not has_surrogate(t))), min_size=1, max_size=4
)


@FAST
@given(batch=batches)
def test_tags_and_offsets_point_into_the_text(tagger, batch):
    check_tags(tagger, batch, {t for t in batch if _is_plain(t)})


@pytest.mark.slow
@LONG
@given(batch=batches)
def test_tags_and_offsets_point_into_the_text_long(tagger, batch):
    check_tags(tagger, batch, {t for t in batch if _is_plain(t)})


def _is_plain(text):
    import unicodedata

    return all(c in " \t\n\x00" or unicodedata.category(c)[0] in "LNP" for c in text)
