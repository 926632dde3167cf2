"""A BertClassifier on a ModernBertEncoder exports as BERT's does: with the
padding packed out of the encoder (`export_saved_model`'s default,
`remove_padding=True`), the SavedModel answers from strings and from ids
as the Keras model does, padded."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, BertPreprocessor, ModernBertEncoder
from keras_bert.export import export_saved_model

from conftest import TINY_VOCAB
from repo_paths import TESTS_DIR

FOLDER = os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_model")
TEXTS = ["the quick brown fox", "a lazy dog .", "the dog jumps over the quick brown fox ."]
# Same products over the packed rows: float32 rounding only.
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    keras.utils.set_random_seed(0)
    encoder = ModernBertEncoder.from_pretrained(FOLDER)
    unused = [f"[unused{i}]" for i in range(encoder.config.vocab_size - len(TINY_VOCAB))]
    vocabulary = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocabulary.write_text("\n".join(TINY_VOCAB + unused) + "\n")
    return BertClassifier(encoder, 3, preprocessor=BertPreprocessor(str(vocabulary), seq_length=16))


def test_the_unpadded_export_answers_as_the_keras_model(classifier, tmp_path):
    path = str(tmp_path / "classifier" / "1")
    export_saved_model(classifier, path, remove_padding=True)
    with open(os.path.join(path, "assets", "keras_bert_export.json")) as f:
        assert json.load(f)["remove_padding"] is True
    served = tf.saved_model.load(path)

    outputs = served.signatures["serving_default"](
        text=tf.constant(TEXTS),
        text_pair=tf.constant([], tf.string),  # no pairs
    )
    expected = classifier.predict(TEXTS, verbose=0)  # the logits, padded
    np.testing.assert_allclose(outputs["logits"], expected, atol=TOLERANCE)

    features = classifier.preprocessor(TEXTS)
    ids = {name: tf.cast(features[name], tf.int32) for name in ("input_ids", "input_mask")}
    from_ids = served.signatures["serve_ids"](**ids, segment_ids=tf.zeros_like(ids["input_ids"]))
    np.testing.assert_allclose(from_ids["logits"], classifier(ids, training=False), atol=TOLERANCE)
