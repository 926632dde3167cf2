"""Files users already have keep working: a `.keras` classifier, its exported
SavedModel, an interrupted `keras-bert finetune` run and a pretraining run with
its records, all written by keras_bert as it was on 2026-12-03 (commit 2f21df6,
before the fine-tuning step moved into the models; tests/fixtures/
written_2026_12_03/make_fixtures.py says how), load, serve and resume today."""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from harness import finetune_fields

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "written_2026_12_03")


def make_fixtures():
    """The fixtures' generator as a module (the configs it wrote with)."""
    import importlib.util

    path = os.path.join(FIXTURES, "make_fixtures.py")
    spec = importlib.util.spec_from_file_location("written_2026_12_03_make_fixtures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _expected():
    with open(os.path.join(FIXTURES, "classifier_outputs.json")) as f:
        return json.load(f)


def test_an_old_keras_file_loads_in_a_fresh_process_and_predicts_the_same():
    expected = _expected()
    script = (
        "import json, sys, keras_bert, keras\n"
        "model = keras.models.load_model(sys.argv[1])\n"
        "print(json.dumps(model.predict(json.loads(sys.argv[2]), verbose=0).tolist()))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            os.path.join(FIXTURES, "classifier.keras"),
            json.dumps(expected["texts"]),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    logits = json.loads(done.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(logits, expected["logits"], atol=1e-5)


def test_an_old_export_serves_the_same():
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)

    expected = _expected()
    loaded = tf.saved_model.load(os.path.join(FIXTURES, "classifier_export"))
    texts = expected["texts"]
    outputs = loaded.signatures["serving_default"](
        text=tf.constant(texts), text_pair=tf.constant([""] * len(texts))
    )
    np.testing.assert_allclose(outputs["logits"].numpy(), expected["export"]["logits"], atol=1e-5)
    assert [v.decode() for v in outputs["label"].numpy()] == expected["export"]["label"]


@pytest.fixture
def fixture_copy(tmp_path, monkeypatch):
    """The fixtures in a folder of their own, the working directory (their
    configs name their files relative to it)."""
    folder = tmp_path / "written"
    shutil.copytree(FIXTURES, folder)
    monkeypatch.chdir(folder)
    return folder


def _finetune_config(output_dir):
    from keras_bert.training.finetuning import FinetuneConfig

    return FinetuneConfig(
        **finetune_fields(
            train="train.tsv",
            vocab_file="vocab.txt",
            init_checkpoint="encoder.keras",
            epochs=2,
            output_dir=output_dir,
            tensorboard=False,
            dropout=0.0,
            learning_rate=1e-3,
        )
    )


def _weights(path):
    return keras.models.load_model(path, compile=False).get_weights()


@pytest.mark.precision
def test_an_interrupted_finetune_run_resumes_to_the_uninterrupted_weights(fixture_copy, capsys):
    from keras_bert.training import finetuning

    resumed = finetuning.finetune(_finetune_config("finetune_run"))
    assert "resuming from finetune_run/checkpoints/ckpt-3 at step 3" in capsys.readouterr().out
    assert resumed["steps"] == 6
    finetuning.finetune(_finetune_config("uninterrupted"))
    first = _weights("encoder.keras")[0]
    trained = _weights("uninterrupted/model.keras")[0]
    assert np.abs(trained - first).max() > 1e-3  # far enough for a lost step to show
    for ours, theirs in zip(
        _weights("finetune_run/model.keras"), _weights("uninterrupted/model.keras")
    ):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.precision
def test_a_pretraining_run_resumes_on_its_records(fixture_copy, capsys):
    from keras_bert.training import pretraining

    results = pretraining.pretrain(
        pretraining.PretrainConfig(**{**make_fixtures().PRETRAINING_RUN, "train_steps": 4})
    )
    assert "resuming from" in capsys.readouterr().out
    with open("pretraining_run/eval_results.json") as f:
        assert json.load(f)["step"] == 4
    assert all(np.isfinite(value) for value in results.values())
