"""A classifier trained on single texts warns once when it is given text pairs
(it used to answer them without a word); one trained on pairs, or on ids
(nobody knows), stays quiet. Its export warns once per loaded model."""

import json
import os
import subprocess
import sys
import warnings

import keras
import pytest
import tensorflow as tf
from task_models import classifier

from keras_bert.export import export_saved_model
from keras_bert.preprocessing.preprocessor import text_pairs_given

TEXTS = ["a fine film", "a dull film", "the best film", "the worst film"]
LABELS = ["fresh", "rotten", "fresh", "rotten"]
PAIRS = ["really", "truly", "so", "very"]


def pair_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [w for w in caught if "trained on single texts" in str(w.message)]


@pytest.fixture(scope="module")
def single_text_model():
    model = classifier(seq_length=16)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.fit(TEXTS, LABELS, epochs=1, batch_size=4, verbose=0)
    return model


def test_trained_on_single_texts_warns_once_about_pairs(single_text_model):
    model = single_text_model
    assert model.trained_on_pairs is False
    assert pair_warnings(lambda: model.predict(TEXTS, verbose=0)) == []
    first = pair_warnings(lambda: model.predict((TEXTS, PAIRS), verbose=0))
    assert len(first) == 1
    message = str(first[0].message)
    assert "Fine-tune it on pairs" in message
    # Once per model: not again, by any entry point.
    assert pair_warnings(lambda: model.predict_labels({"text": TEXTS, "text_pair": PAIRS})) == []
    assert pair_warnings(lambda: model.predict(list(zip(TEXTS, PAIRS)), verbose=0)) == []


def test_the_flag_survives_saving(single_text_model, tmp_path):
    path = str(tmp_path / "single.keras")
    single_text_model.save(path)
    reloaded = keras.models.load_model(path)
    assert reloaded.trained_on_pairs is False
    assert len(pair_warnings(lambda: reloaded.predict_proba((TEXTS, PAIRS)))) == 1


@pytest.mark.slow
def test_models_trained_on_pairs_or_ids_stay_quiet():
    paired = classifier(seq_length=16)
    paired.compile(optimizer=keras.optimizers.Adam(1e-3))
    paired.fit((TEXTS, PAIRS), LABELS, epochs=1, batch_size=4, verbose=0)
    assert paired.trained_on_pairs is True
    assert pair_warnings(lambda: paired.predict((TEXTS, PAIRS), verbose=0)) == []
    untrained = classifier(seq_length=16)  # trained on ids, or not at all: unknown
    assert untrained.trained_on_pairs is None
    assert pair_warnings(lambda: untrained.predict((TEXTS, PAIRS), verbose=0)) == []


def test_which_inputs_are_pairs():
    def dataset(x):
        return tf.data.Dataset.from_tensor_slices((x, [1, 0, 1, 0])).batch(2)

    assert text_pairs_given(dataset({"text": TEXTS, "text_pair": PAIRS})) is True
    assert text_pairs_given(dataset({"text": TEXTS})) is False
    assert text_pairs_given(dataset(TEXTS)) is False
    assert text_pairs_given((TEXTS, PAIRS)) is True
    assert text_pairs_given(list(zip(TEXTS, PAIRS))) is True
    assert text_pairs_given(TEXTS) is False
    assert text_pairs_given({"input_ids": [[2, 3]]}) is None  # ids: unknown


@pytest.mark.slow
def test_export_warns_once_per_loaded_model(single_text_model, tmp_path):
    path = export_saved_model(single_text_model, str(tmp_path / "export" / "1"))
    with open(os.path.join(path, "assets", "keras_bert_export.json")) as f:
        assert json.load(f)["trained_on_pairs"] is False
    # In a fresh process, as a server runs it: one line on stderr for three calls.
    script = (
        "import sys, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1]); f = m.signatures['serving_default']\n"
        "f(text=tf.constant(['a film']), text_pair=tf.constant([], tf.string))\n"
        "for _ in range(3): f(text=tf.constant(['a film']), text_pair=tf.constant(['so']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, path],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("trained on single texts") == 1, result.stderr[-2000:]
