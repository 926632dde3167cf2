"""Start-up cost: `import keras_bert` is light, data commands skip Keras and its optional extras."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

import keras_bert
from keras_bert.cli.startup import OPTIONAL_PACKAGES

from repo_paths import REPO_ROOT

ROOT = REPO_ROOT


def _run_python(code):
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def two_documents(tmp_path):
    """A corpus of two short documents, and where to write its records."""
    text = tmp_path / "t.txt"
    text.write_text(
        "The first sentence here.\nA second one follows.\n\n"
        "Another document starts.\nIt ends here.\n"
    )
    return text, str(tmp_path / "o.tfrecord")


def test_import_keras_bert_loads_neither_keras_nor_tensorflow():
    loaded = _run_python(
        "import json, sys, keras_bert\n"
        "print(json.dumps([m for m in ('keras', 'tensorflow', 'tensorflow_text') "
        "if m in sys.modules]))"
    )
    assert loaded == []


def test_public_names_are_the_classes():
    from keras_bert.models.classifier import BertClassifier
    from keras_bert.models.encoder import BertEncoder
    from keras_bert.text.tokenizer import BertTokenizer

    assert keras_bert.BertEncoder is BertEncoder
    assert keras_bert.BertClassifier is BertClassifier
    assert keras_bert.BertTokenizer is BertTokenizer
    assert keras_bert.models.BertEncoder is BertEncoder
    assert {"BertConfig", "BertEncoder", "BertTokenizer", "models"} <= set(dir(keras_bert))
    assert set(keras_bert.__all__) <= set(dir(keras_bert))
    with pytest.raises(AttributeError, match="no attribute 'BertDecoder'"):
        keras_bert.BertDecoder  # noqa: B018


@pytest.mark.slow
def test_create_pretraining_data_command_skips_the_optional_extras(two_documents, real_vocab_file):
    text, out = two_documents
    installed = [m for m in OPTIONAL_PACKAGES if importlib.util.find_spec(m) is not None]
    report = _run_python(
        "import json, sys\n"
        "from keras_bert.cli import main\n"
        f"code = main(['create-pretraining-data', '--input-file', {str(text)!r}, "
        f"'--output-file', {out!r}, '--vocab-file', {real_vocab_file!r}, '--quiet'])\n"
        f"loaded = [m for m in {OPTIONAL_PACKAGES!r} + ('keras',) if m in sys.modules]\n"
        # Hidden only while TensorFlow loads: importable afterwards.
        f"for m in {installed!r}: __import__(m)\n"
        "import keras, tensorflow as tf\n"
        "layer_ok = isinstance(keras.layers.Dense(2), tf.keras.layers.Layer)\n"
        "print(json.dumps([code, loaded, 'keras_bert.models' in sys.modules, layer_ok]))"
    )
    assert report == [0, [], False, True]
    assert os.path.getsize(out) > 0


@pytest.mark.slow
def test_command_line_exits_at_once_with_everything_written(two_documents, real_vocab_file):
    text, out = two_documents
    # Output to a pipe (block-buffered) must still be complete after the fast exit.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_bert.cli",
            "create-pretraining-data",
            "--input-file",
            str(text),
            "--output-file",
            out,
            "--vocab-file",
            real_vocab_file,
            "--num-shards",
            "1",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.rstrip().splitlines()[-1].startswith("seconds: ")
    instances = int(result.stdout.split("instances: ")[1].split()[0])
    import tensorflow as tf

    assert sum(1 for _ in tf.data.TFRecordDataset(out)) == instances > 0


def test_training_commands_turn_on_the_fast_cpu_settings_unless_set():
    # Set before TensorFlow loads (it reads them once), never over the user's
    # own values; the data commands leave them alone.
    code = (
        "import json, os, sys\n"
        "from keras_bert import cli\n"
        "os.environ['TF_CPU_ALLOCATOR_USE_BFC'] = 'false'\n"
        "cli.main(['pretrain', '--config', 'missing.yaml'])\n"
        "loaded = 'tensorflow' in sys.modules\n"
        "print(json.dumps([os.environ.get(n) for n in "
        "('TF_ENABLE_ONEDNN_OPTS', 'TF_CPU_ALLOCATOR_USE_BFC')] + [loaded]))"
    )
    assert _run_python(code) == ["1", "false", True]
    # `export` too: its int8 products run on oneDNN's kernel only with oneDNN on,
    # which TensorFlow leaves off on AVX2-only CPUs.
    export = code.replace(
        "['pretrain', '--config', 'missing.yaml']",
        "['export', '--model-dir', 'missing', '--output', 'missing/1']",
    )
    assert _run_python(export) == ["1", "false", True]
    import tensorflow  # noqa: F401

    from keras_bert.cli.startup import use_fast_cpu_training_settings

    environ = {}
    # With TensorFlow loaded it is too late to change anything.
    assert use_fast_cpu_training_settings(environ) == [] and environ == {}
