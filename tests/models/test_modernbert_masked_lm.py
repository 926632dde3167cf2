"""ModernBertMaskedLM against HuggingFace's ModernBertForMaskedLM: the logits
HuggingFace wrote beside its tiny folder (tests/fixtures/modernbert)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert import ModernBertMaskedLM

from repo_paths import REPO_ROOT, TESTS_DIR

FOLDER = os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_mlm_biases")


@pytest.fixture(scope="module")
def expected():
    return dict(np.load(FOLDER + "_outputs.npz"))


@pytest.fixture(scope="module")
def model():
    return ModernBertMaskedLM.from_pretrained(FOLDER)


def inputs(expected):
    return {"input_ids": expected["input_ids"], "input_mask": expected["input_mask"]}


def test_logits_match_huggingface_at_real_positions(model, expected):
    got = model.predict(inputs(expected), verbose=0)
    real = expected["input_mask"].astype(bool)
    want = expected["mlm_logits"]
    assert got.shape == want.shape and got.dtype == np.float32
    # Logits of size ~20 (a 32-wide product with an unnormalised table): the
    # hidden states' 1e-5 parity, relative to that scale.
    assert np.abs(got - want)[real].max() < 1e-5 * np.abs(want[real]).max()


def test_a_folder_without_the_head_is_refused():
    folder = os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_model")
    with pytest.raises(ValueError, match="missing tensor.*head.dense.weight"):
        ModernBertMaskedLM.from_pretrained(folder)


FRESH_PROCESS = """
import sys, numpy as np
import keras_bert, keras
model = keras.models.load_model(sys.argv[1])
ids = np.load(sys.argv[2])
print(type(model).__name__)
np.save(sys.argv[3], model.predict({"input_ids": ids["input_ids"], "input_mask": ids["input_mask"]},
        verbose=0))
"""


def test_a_saved_masked_lm_loads_in_a_fresh_process(model, expected, tmp_path):
    path = str(tmp_path / "mlm.keras")
    model.save(path)
    out = str(tmp_path / "out.npy")
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, path, FOLDER + "_outputs.npz", out],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
        cwd=str(tmp_path),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "ModernBertMaskedLM"
    np.testing.assert_array_equal(np.load(out), model.predict(inputs(expected), verbose=0))
