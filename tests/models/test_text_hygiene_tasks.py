"""Text hygiene where a user meets the task models: the tagger keeps every word
around a NUL (it used to stop at the NUL) and trains on the words it predicts;
an empty SQuAD question is refused by position and the model keeps answering."""

import pytest
from task_models import tiny_encoder

from keras_bert.assets import VOCAB_FILE
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def tagger():
    return BertTokenClassifier(
        tiny_encoder(1),
        len(TAGS),
        label_names=TAGS,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24),
    )


@pytest.fixture(scope="module")
def reader():
    return BertSpanExtractor(
        tiny_encoder(2),
        max_query_length=16,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=48),
    )


def test_tagger_keeps_the_words_after_a_nul(tagger):
    text = "Emma\x00 lives in High\x00bury \x00 \x0b"
    answer = tagger.tag([text, "a\ud800b c"])
    assert answer[0]["tokens"] == ["Emma", "lives", "in", "High\x00bury"]
    assert len(answer[0]["tags"]) == 4
    for entity in answer[0]["entities"]:
        assert text[entity["start"] : entity["end"]] == entity["text"]
    # A lone surrogate is U+FFFD in place (tests/text/test_text_hygiene.py says why).
    assert answer[1]["tokens"] == ["a\ufffdb", "c"]


def test_tagger_trains_on_the_words_it_predicts(tagger):
    # Python's str.split() would see 5 words in the first text (it splits at
    # \x0b and \x1c, which the original tokenizer deletes) and refuse 3 tags.
    texts = ["Emma\x0bWoodhouse \x1c lives\x00 here", "Knightley visits"]
    assert tagger.words_of(texts) == [
        ["Emma\x0bWoodhouse", "lives", "here"],
        ["Knightley", "visits"],
    ]
    features, labels, weights = tagger.encode_text(texts, [["B-PER", "O", "O"], ["B-PER", "O"]])
    assert weights.sum() == 5  # one first piece per word


def test_an_empty_context_is_refused_by_position(reader):
    # Was: numpy's "need at least one array to stack" (no window to look in).
    questions, contexts = ["Who?", "Where?"], ["Emma lives at Hartfield.", " \x00 "]
    with pytest.raises(ValueError, match=r"`context`\[1\] is empty .* every context needs text"):
        reader.predict_answers({"question": questions, "context": contexts})
    with pytest.raises(ValueError, match=r"`context`\[1\] is empty"):
        reader.predict((questions, contexts), verbose=0)


def test_empty_question_is_refused_by_position_and_the_model_keeps_answering(reader):
    questions = ["Who lives at Hartfield?", "  \x00\t", "Where?"]
    contexts = ["Emma Woodhouse lives at Hartfield."] * 3
    with pytest.raises(ValueError, match=r"`question`\[1\] is empty"):
        reader.predict_answers({"question": questions, "context": contexts})
    with pytest.raises(ValueError, match=r"`question`\[1\] is empty"):
        reader.predict({"question": questions, "context": contexts}, verbose=0)
    answers = reader.predict_answers({"question": questions[::2], "context": contexts[:2]})
    assert len(answers) == 2
    for answer in answers:
        assert answer["start"] == -1 or 0 <= answer["start"] < answer["end"]


def test_classifier_reads_a_lone_surrogate_as_the_original_reads_its_bytes():
    # TF's own conversion refused the whole batch ("Error converting unicode
    # string"), naming no row; now the surrogate is dropped, as from bytes.
    import numpy as np
    from task_models import classifier

    model = classifier(seq_length=16)
    with_surrogate = model.predict(["a fine\ud800 film", "ok"], verbose=0)
    without = model.predict(["a fine film", "ok"], verbose=0)
    np.testing.assert_allclose(with_surrogate, without, atol=1e-6)
