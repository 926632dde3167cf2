"""BertClassifier fine-tunes a ModernBertEncoder: its pooled output (ModernBERT's
head on [CLS] or the mean) under the classifier's dropout and output layer."""

import os

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier, ModernBertEncoder

from repo_paths import TESTS_DIR

FOLDER = os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_model")


def rows():
    """Eight right-padded rows whose label is whether id 7 occurs: learnable."""
    rng = np.random.default_rng(0)
    ids = rng.integers(8, 256, (8, 20)).astype("int32")
    mask = np.ones_like(ids)
    mask[::2, 14:] = 0
    ids[mask == 0] = 0
    labels = np.arange(8) % 2
    ids[labels == 1, 3] = 7
    return {"input_ids": ids, "input_mask": mask}, labels


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_a_few_steps_on_a_pretrained_modernbert_lower_the_loss(pooling):
    keras.utils.set_random_seed(0)
    pretrained = ModernBertEncoder.from_pretrained(FOLDER)
    encoder = ModernBertEncoder(dict(pretrained.config.to_dict(), classifier_pooling=pooling))
    encoder.set_weights(pretrained.get_weights())
    model = BertClassifier(encoder, 2, dropout=0.0)
    assert sorted(model.input) == ["input_ids", "input_mask"]  # no segment ids
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    x, y = rows()
    before = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    model.fit(x, y, epochs=8, batch_size=4, verbose=0)
    after = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    assert after < 0.8 * before


def test_the_classifier_saves_and_reloads_with_its_modernbert(tmp_path):
    model = BertClassifier(ModernBertEncoder.from_pretrained(FOLDER), 3)
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    again = keras.models.load_model(path)
    assert isinstance(again.encoder, ModernBertEncoder)
    x, _ = rows()
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
