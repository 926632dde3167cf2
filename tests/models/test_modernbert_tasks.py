"""The tagger, the span extractor and the sentence encoder take a
ModernBertEncoder on text as they take BERT's: its two inputs (no segment
ids), training that lowers the loss, answers from text, and a saved model that
reloads to the same answers."""

import os

import keras
import numpy as np
import pytest

from keras_bert import BertPreprocessor, BertSentenceEncoder, ModernBertEncoder
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier

from conftest import TINY_VOCAB
from repo_paths import TESTS_DIR

FOLDER = os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_model")
WORDS = [
    ["the", "quick", "brown", "fox"],
    ["the", "lazy", "dog"],
    ["a", "dog", "jumps", "over", "the", "fox"],
    ["the", "quick", "dog", "."],
]
ANIMALS = {"fox", "dog"}
QUESTIONS = ["the fox ?", "the dog ?", "the fox ?", "the dog ?"]
CONTEXTS = [
    "the quick brown fox jumps over the lazy dog .",
    "the quick brown fox jumps over the lazy dog .",
    "a lazy dog , the brown fox .",
    "a lazy dog , the brown fox .",
]


@pytest.fixture
def preprocessor(tmp_path):
    """The tiny WordPiece vocabulary, filled to the fixture's 256 ids."""
    encoder_vocabulary = ModernBertEncoder.from_pretrained(FOLDER).config.vocab_size
    unused = [f"[unused{i}]" for i in range(encoder_vocabulary - len(TINY_VOCAB))]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(TINY_VOCAB + unused) + "\n")
    return BertPreprocessor(str(path), seq_length=24)


def reloaded(model, tmp_path):
    path = str(tmp_path / "model.keras")
    model.save(path)
    return keras.models.load_model(path)


def test_the_tagger_learns_a_modernbert_tag_from_words_and_reloads(preprocessor, tmp_path):
    keras.utils.set_random_seed(0)
    model = BertTokenClassifier(
        ModernBertEncoder.from_pretrained(FOLDER),
        label_names=["O", "B-ANIMAL"],
        preprocessor=preprocessor,
        dropout=0.0,
    )
    assert sorted(model.input) == ["input_ids", "input_mask"]
    tags = [["B-ANIMAL" if word in ANIMALS else "O" for word in row] for row in WORDS]
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    before = model.evaluate(WORDS, tags, verbose=0, return_dict=True)["loss"]
    model.fit(WORDS, tags, epochs=15, batch_size=4, verbose=0)
    assert model.evaluate(WORDS, tags, verbose=0, return_dict=True)["loss"] < 0.5 * before
    tagged = model.tag([" ".join(row) for row in WORDS])
    assert [row["tags"] for row in tagged] == tags

    again = reloaded(model, tmp_path)
    assert isinstance(again.encoder, ModernBertEncoder)
    np.testing.assert_array_equal(again.predict(WORDS, verbose=0), model.predict(WORDS, verbose=0))


def test_the_span_extractor_answers_from_a_modernbert_and_reloads(preprocessor, tmp_path):
    keras.utils.set_random_seed(0)
    reader = BertSpanExtractor(
        ModernBertEncoder.from_pretrained(FOLDER), preprocessor=preprocessor, max_query_length=8
    )
    assert sorted(reader.input) == ["input_ids", "input_mask"]
    x = {"question": QUESTIONS, "context": CONTEXTS}
    answers = [question.split()[1] for question in QUESTIONS]
    y = {
        "text": answers,
        "answer_start": [context.index(a) for context, a in zip(CONTEXTS, answers)],
    }
    reader.compile(optimizer=keras.optimizers.Adam(3e-3))
    before = reader.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    reader.fit(x, y, epochs=40, batch_size=4, verbose=0)
    assert reader.evaluate(x, y, verbose=0, return_dict=True)["loss"] < 0.5 * before
    assert [row["answer"] for row in reader.predict_answers(x)] == answers

    again = reloaded(reader, tmp_path)
    assert isinstance(again.encoder, ModernBertEncoder)
    assert again.predict_answers(x) == reader.predict_answers(x)


def test_the_sentence_encoder_means_a_modernberts_real_tokens(preprocessor):
    encoder = ModernBertEncoder.from_pretrained(FOLDER)
    model = BertSentenceEncoder(encoder, preprocessor=preprocessor, normalize=False)
    assert sorted(model.input) == ["input_ids", "input_mask"]
    texts = ["the quick brown fox", "a lazy dog ."]
    features = preprocessor(texts)
    sequence = encoder(
        {name: features[name] for name in ("input_ids", "input_mask")}, training=False
    )["sequence_output"].numpy()
    real = features["input_mask"].numpy()[..., None].astype("float32")
    expected = (sequence * real).sum(1) / real.sum(1)
    np.testing.assert_allclose(model.predict(texts, verbose=0), expected, rtol=1e-5, atol=1e-6)
