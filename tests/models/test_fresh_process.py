"""`.keras` files load where a user loads them: in a fresh process that imports
only `keras_bert` and `keras` (tests/fresh_process_check.py), one subprocess
for every task model, with and without LoRA. Each reloaded model must answer
as the model that wrote the file did.
"""

import json
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest
from task_models import tiny_encoder

from keras_bert import (
    BertClassifier,
    BertEncoder,
    BertFeatureExtractor,
    BertPreprocessor,
    BertSentenceEncoder,
    BertSpanExtractor,
    BertTokenClassifier,
)
from keras_bert.assets import VOCAB_FILE

from fresh_process_check import inputs_of, jsonable

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(os.path.dirname(HERE), "fresh_process_check.py")
TEXTS = ["a gorgeous, witty movie", "dull and far too long", "Emma lives in Highbury"]
PAIRS = ["what a film", "not again", "where does Emma live?"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def preprocessor(seq_length=32):
    return BertPreprocessor(VOCAB_FILE, seq_length=seq_length)


def build_models():
    """name -> (model, what predict gets: JSON-able, as the check script reads it)."""
    lora = BertClassifier(
        tiny_encoder(1), 2, label_names=["rotten", "fresh"], preprocessor=preprocessor()
    )
    lora.enable_lora(4)
    return {
        "classifier": (BertClassifier(tiny_encoder(0), 3, preprocessor=preprocessor()), TEXTS),
        "classifier_softmax": (
            BertClassifier(tiny_encoder(0), 2, activation="softmax", preprocessor=preprocessor()),
            TEXTS,
        ),
        "classifier_lora_pairs": (lora, {"pair": [TEXTS, PAIRS]}),
        "regressor": (
            BertClassifier(tiny_encoder(2), 1, preprocessor=preprocessor()),
            {"pair": [TEXTS, PAIRS]},
        ),
        "tagger": (
            BertTokenClassifier(tiny_encoder(3), label_names=TAGS, preprocessor=preprocessor(16)),
            TEXTS,
        ),
        "span_extractor": (
            BertSpanExtractor(tiny_encoder(4), preprocessor=preprocessor(48), max_query_length=16),
            {"question": PAIRS, "context": TEXTS},
        ),
        "feature_extractor": (
            BertFeatureExtractor(tiny_encoder(5), num_top_layers=2, preprocessor=preprocessor(16)),
            TEXTS,
        ),
        "sentence_encoder": (
            BertSentenceEncoder(
                tiny_encoder(7),
                pooling=["max", "mean"],
                normalize=True,
                lowercase_text=True,
                dense=[{"units": 8, "activation": "tanh"}],
                preprocessor=preprocessor(16),
            ),
            TEXTS,
        ),
    }


MODELS = (
    "classifier",
    "classifier_softmax",
    "classifier_lora_pairs",
    "regressor",
    "tagger",
    "span_extractor",
    "feature_extractor",
    "sentence_encoder",
)


@pytest.fixture(scope="module")
def fresh_results(tmp_path_factory):
    """Saves every model, loads them all in one fresh process; returns
    (expected outputs here, results there, the saved files)."""
    folder = tmp_path_factory.mktemp("fresh_process")
    manifest, expected, files = {}, {}, {}
    for name, (model, inputs) in build_models().items():
        path = str(folder / f"{name}.keras")
        model.save(path)
        files[name] = path
        expected[name] = {
            "class": type(model).__name__,
            "outputs": jsonable(model.predict(inputs_of(inputs), verbose=0)),
        }
        manifest[name] = {"file": path, "inputs": inputs}
    with open(folder / "manifest.json", "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    results_path = folder / "results.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, CHECK, str(folder / "manifest.json"), str(results_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(folder),
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with open(results_path, encoding="utf-8") as f:
        return expected, json.load(f), files


@pytest.mark.parametrize("name", MODELS)
def test_a_saved_task_model_loads_in_a_fresh_process(fresh_results, name):
    expected, results, _ = fresh_results
    assert set(results) == set(MODELS)
    result = results[name]
    assert result["error"] is None, result["error"][:2000]
    assert result["class"] == expected[name]["class"]
    assert_same_outputs(result["outputs"], expected[name]["outputs"])


def assert_same_outputs(got, want):
    if isinstance(want, dict):
        assert set(got) == set(want)
        for key in want:
            assert_same_outputs(got[key], want[key])
    else:
        np.testing.assert_allclose(
            np.asarray(got, np.float64), np.asarray(want, np.float64), atol=1e-5
        )


def test_the_file_keeps_the_vocabulary_as_an_asset_not_in_its_config(fresh_results):
    _, _, files = fresh_results
    with zipfile.ZipFile(files["classifier"]) as archive:
        config = archive.read("config.json").decode("utf-8")
        names = archive.namelist()
    assert "assets/preprocessor/vocabulary.txt" in names
    assert len(config) < 10_000 and "##ing" not in config


def test_errors_about_a_saved_config_do_not_print_the_vocabulary(tmp_path, fresh_results):
    """Keras quotes the whole config when it cannot rebuild a class: with the
    vocabulary an asset, that message stays readable."""
    _, _, files = fresh_results
    broken = tmp_path / "unknown_class.keras"
    with zipfile.ZipFile(files["classifier"]) as source, zipfile.ZipFile(broken, "w") as out:
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
