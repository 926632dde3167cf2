"""Every way keras_bert gives a sentence embedding of an encoder gives the same
vector: `BertSentenceEncoder(encoder, "mean", normalize=True)`, the feature
extractor's `sentence_embedding`, `keras-bert encode` (`encode_sentences`) and
a bare encoder's export, each against the first and against the mean of the
real tokens' outputs, normalised, in NumPy."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.assets import VOCAB_FILE
from keras_bert.cli.encode import encode_sentences
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.feature_extractor import BertFeatureExtractor
from keras_bert.models.sentence_encoder import BertSentenceEncoder
from keras_bert.preprocessing.preprocessor import BertPreprocessor

from harness import tiny_config

TEXTS = ["Emma Woodhouse, handsome, clever, and rich.", "naïve café — 東京", "", "short"]
SEQ_LENGTH = 24


@pytest.fixture(scope="module")
def encoder():
    import keras

    keras.utils.set_random_seed(3)
    return BertEncoder(tiny_config(vocab_size=30522, initializer_range=0.2))


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor(VOCAB_FILE, seq_length=SEQ_LENGTH)


@pytest.fixture(scope="module")
def sentence_encoder_embeddings(encoder, preprocessor):
    model = BertSentenceEncoder(encoder, "mean", normalize=True, preprocessor=preprocessor)
    embeddings = model.predict(TEXTS, verbose=0)
    features = preprocessor(tf.constant(TEXTS))
    sequence = encoder(features)["sequence_output"].numpy()  # (B, T, H)
    mask = features["input_mask"].numpy()[..., None].astype(np.float64)
    mean = (sequence * mask).sum(axis=1) / mask.sum(axis=1)
    np.testing.assert_allclose(
        embeddings, mean / np.linalg.norm(mean, axis=-1, keepdims=True), atol=1e-5
    )
    return embeddings


def test_feature_extractor(encoder, preprocessor, sentence_encoder_embeddings):
    extractor = BertFeatureExtractor(encoder, num_top_layers=1, preprocessor=preprocessor)
    embeddings = extractor.predict(TEXTS, output="sentence_embedding", verbose=0)
    assert embeddings.dtype == np.float32
    np.testing.assert_allclose(embeddings, sentence_encoder_embeddings, atol=1e-5)


def test_encode_command(encoder, sentence_encoder_embeddings, tmp_path):
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    encoded = list(encode_sentences(TEXTS, init_checkpoint=path, seq_length=SEQ_LENGTH))
    assert [sentence for sentence, _, _ in encoded] == TEXTS
    assert encoded[3][1] == ["short"]
    np.testing.assert_allclose(
        np.stack([embedding for _, _, embedding in encoded]), sentence_encoder_embeddings, atol=1e-5
    )


def test_bare_encoder_export(encoder, preprocessor, sentence_encoder_embeddings, tmp_path):
    from keras_bert.export import export_saved_model

    path = export_saved_model(
        encoder, preprocessor.tokenizer, str(tmp_path / "embed" / "1"), seq_length=SEQ_LENGTH
    )
    served = tf.saved_model.load(path)
    embeddings = served.signatures["serving_default"](text=tf.constant(TEXTS))["embedding"]
    np.testing.assert_allclose(embeddings.numpy(), sentence_encoder_embeddings, atol=1e-5)
    # Clients of earlier encoder exports read this task name.
    with open(os.path.join(path, "assets", "keras_bert_export.json"), encoding="utf-8") as f:
        assert json.load(f)["task"] == "embeddings"
