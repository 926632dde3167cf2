"""`.keras` files as a user meets them: the vocabulary an asset, readable
errors, every registered class known, old files still loading. (Every task
model reloading in a fresh process: tests/models/test_tasks.py, through
tests/harness.py's `fresh_process_results`.)
"""

import json
import zipfile

import keras
import numpy as np
import pytest
from task_models import tiny_encoder

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
from keras_bert.assets import VOCAB_FILE

TEXTS = ["a gorgeous, witty movie", "dull and far too long", "Emma lives in Highbury"]


def preprocessor(seq_length=32):
    return BertPreprocessor(VOCAB_FILE, seq_length=seq_length)


@pytest.fixture(scope="module")
def classifier_file(tmp_path_factory):
    """A saved classifier with its preprocessor (its vocabulary an asset)."""
    path = str(tmp_path_factory.mktemp("fresh_process") / "classifier.keras")
    BertClassifier(tiny_encoder(0), 3, preprocessor=preprocessor()).save(path)
    return path


def test_the_file_keeps_the_vocabulary_as_an_asset_not_in_its_config(classifier_file):
    with zipfile.ZipFile(classifier_file) as archive:
        config = archive.read("config.json").decode("utf-8")
        names = archive.namelist()
    assert "assets/preprocessor/vocabulary.txt" in names
    assert len(config) < 10_000 and "##ing" not in config


def test_errors_about_a_saved_config_do_not_print_the_vocabulary(tmp_path, classifier_file):
    """Keras quotes the whole config when it cannot rebuild a class: with the
    vocabulary an asset, that message stays readable."""
    broken = tmp_path / "unknown_class.keras"
    with zipfile.ZipFile(classifier_file) as source, zipfile.ZipFile(broken, "w") as out:
        for item in source.namelist():
            data = source.read(item)
            if item == "config.json":
                config = json.loads(data)
                config["registered_name"] = "keras_bert>NoSuchModel"
                config["class_name"] = "NoSuchModel"
                data = json.dumps(config).encode("utf-8")
            out.writestr(item, data)
    with pytest.raises(TypeError) as error:
        keras.models.load_model(broken)
    assert "NoSuchModel" in str(error.value) and len(str(error.value)) < 10_000


def test_every_registered_class_is_known_before_its_module_is_imported():
    """`keras_bert._registration.SERIALIZABLE` lists what the package registers
    (every module imported here), each under the module that defines it."""
    import importlib
    import pkgutil

    import keras_bert
    from keras_bert._registration import SERIALIZABLE

    for info in pkgutil.walk_packages(keras_bert.__path__, "keras_bert."):
        if ".cli" not in info.name:
            importlib.import_module(info.name)
    registered = {
        name.split(">", 1)[1]: obj
        for name, obj in keras.saving.get_custom_objects().items()
        if name.startswith("keras_bert>")
    }
    assert set(registered) == set(SERIALIZABLE)
    for name, obj in registered.items():
        assert obj.__module__ == SERIALIZABLE[name], name


def test_old_files_with_the_vocabulary_in_their_config_still_load(tmp_path):
    """Files written before the vocabulary became an asset carry it in the
    preprocessor's config, and no asset."""
    model = BertClassifier(tiny_encoder(0), 2, preprocessor=preprocessor(16))
    path = tmp_path / "new.keras"
    model.save(path)
    old = tmp_path / "old.keras"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as out:
        for item in source.namelist():
            if item.startswith("assets/"):
                continue
            data = source.read(item)
            if item == "config.json":
                config = json.loads(data)
                config["config"]["preprocessor"]["config"]["vocabulary"] = (
                    model.preprocessor.vocabulary
                )
                data = json.dumps(config).encode("utf-8")
            out.writestr(item, data)
    restored = keras.models.load_model(old)
    np.testing.assert_allclose(
        restored.predict(TEXTS, verbose=0), model.predict(TEXTS, verbose=0), atol=1e-6
    )


def test_encoder_alone_round_trips_in_this_process(tmp_path):
    encoder = tiny_encoder(6)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    assert isinstance(keras.models.load_model(path), BertEncoder)
