"""keras_bert runs on Keras' TensorFlow backend only (its tokenizer runs in the
TensorFlow graph): another backend is refused at `import keras_bert`, naming
it and how to choose TensorFlow, in a fresh process as a user's script meets it.

The other backends need not be installed: `import keras_bert` refuses before
Keras loads one, and Keras, once imported, reports its backend through
`keras.backend.backend()`, which is what keras_bert reads."""

import json
import os
import subprocess
import sys

import pytest

from repo_paths import REPO_ROOT


def run_python(code, tmp_path, **environ):
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    # A Keras home of the test's own: no keras.json of the machine's counts.
    env.update(KERAS_HOME=str(tmp_path / "keras_home"), PYTHONPATH=REPO_ROOT, **environ)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_another_backend_is_refused_at_import_naming_it(tmp_path, backend):
    done = run_python("import keras_bert", tmp_path, KERAS_BACKEND=backend)
    assert done.returncode != 0
    last_line = done.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: keras_bert needs Keras' TensorFlow backend")
    assert f"KERAS_BACKEND={backend} selects another backend" in last_line
    assert "set KERAS_BACKEND=tensorflow" in last_line


def test_keras_imported_first_on_another_backend_is_refused(tmp_path):
    """keras.json chose another backend and keras was imported before keras_bert:
    what `keras.backend.backend()` reports is named."""
    code = (
        "import keras\n"
        "keras.backend.backend = lambda: 'jax'  # what Keras on jax reports\n"
        "import keras_bert\n"
    )
    done = run_python(code, tmp_path)
    assert done.returncode != 0
    last_line = done.stderr.strip().splitlines()[-1]
    assert "Keras is already imported with the 'jax' backend" in last_line
    assert "import keras_bert before keras" in last_line


@pytest.mark.parametrize("variable", [None, ""])
def test_keras_json_of_another_backend_gives_way_to_tensorflow(tmp_path, variable):
    """Without a KERAS_BACKEND of the user's (unset or empty), keras_bert
    chooses TensorFlow before Keras reads keras.json."""
    home = tmp_path / "keras_home"
    home.mkdir()
    (home / "keras.json").write_text(json.dumps({"backend": "jax", "floatx": "float32"}))
    environ = {} if variable is None else {"KERAS_BACKEND": variable}
    code = "import keras_bert, keras\nprint(keras.backend.backend())"
    done = run_python(code, tmp_path, **environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tensorflow"]
