"""Checkpoints by name (`from_pretrained("sentence-transformers/all-MiniLM-L6-v2")`,
`"uncased_L-2_H-128_A-2"`, `"bert-base-uncased"`), read from the local caches laid
out on disk here as `hf download` and Google's zips leave them."""

import hashlib
import json
import os

import numpy as np
import pytest
from original_checkpoints import TINY_CONFIG, original_bert_tensors, write_original_folder

from keras_bert import BertClassifier, BertEncoder, checkpoints

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"
CACHE_VARIABLES = (
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_HOME",
    "XDG_CACHE_HOME",
    "KERAS_BERT_CACHE",
)


def add_snapshot(hub, repo, commit, source_folder, ref="main", config_changes=None):
    """A snapshot as huggingface_hub writes one: the files in blobs/ (named by their
    sha256), snapshots/<commit>/<file> relative links to them, refs/<ref> the commit.
    The blobs link to the shipped files; `config_changes` edits config.json."""
    model = os.path.join(hub, "models--" + repo.replace("/", "--"))
    os.makedirs(os.path.join(model, "blobs"), exist_ok=True)
    snapshot = os.path.join(model, "snapshots", commit)
    os.makedirs(snapshot)
    for name in sorted(os.listdir(source_folder)):
        path = os.path.join(source_folder, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            content = f.read()
        if name == "config.json" and config_changes:
            content = json.dumps(dict(json.loads(content), **config_changes)).encode()
        blob = os.path.join(model, "blobs", hashlib.sha256(content).hexdigest())
        if name == "config.json" and config_changes:
            with open(blob, "wb") as f:
                f.write(content)
        elif not os.path.exists(blob):
            os.symlink(path, blob)
        os.symlink(
            os.path.join("..", "..", "blobs", os.path.basename(blob)), os.path.join(snapshot, name)
        )
    if ref is not None:
        os.makedirs(os.path.join(model, "refs"), exist_ok=True)
        with open(os.path.join(model, "refs", ref), "w") as f:
            f.write(commit)  # huggingface_hub writes the bare hash, no newline
    return snapshot


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """Empty HuggingFace and keras_bert caches, named by their variables, and a HOME
    of their own so that nothing of this machine's caches is read."""
    for variable in CACHE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    hub, keras_bert_cache = tmp_path / "hub", tmp_path / "keras_bert_cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("KERAS_BERT_CACHE", str(keras_bert_cache))
    return str(hub), str(keras_bert_cache)


@pytest.fixture
def features():
    rng = np.random.default_rng(5)
    mask = np.array([[1] * 10 + [0] * 4, [1] * 14], np.int32)
    return {
        "input_ids": (rng.integers(5, TINY_CONFIG["vocab_size"], size=(2, 14)) * mask).astype(
            np.int32
        ),
        "input_mask": mask,
        "segment_ids": np.array([[0] * 6 + [1] * 8, [0] * 7 + [1] * 7], np.int32),
    }


def assert_same_outputs(encoder, reference, features):
    outputs, expected = encoder(features), reference(features)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(outputs[key].numpy(), expected[key].numpy(), err_msg=key)


# === HuggingFace names ===


def test_a_hub_name_loads_the_cached_snapshot(caches, minilm_path, features):
    hub, _ = caches
    snapshot = add_snapshot(hub, MINILM, COMMIT, minilm_path)
    source = checkpoints.resolve(MINILM)
    assert (source.kind, source.path) == ("huggingface", MINILM)
    assert source.weights == os.path.join(snapshot, "model.safetensors")
    assert source.vocab_file == os.path.join(snapshot, "vocab.txt")
    assert source.casing.evidence == "tokenizer_config.json do_lower_case true"
    reference = BertEncoder.from_pretrained(minilm_path)
    assert_same_outputs(BertEncoder.from_pretrained(MINILM), reference, features)
    assert_same_outputs(BertEncoder.from_preset(MINILM), reference, features)


def test_a_task_model_from_a_hub_name_takes_text(caches, minilm_path):
    hub, _ = caches
    snapshot = add_snapshot(hub, MINILM, COMMIT, minilm_path)
    model = BertClassifier.from_pretrained(MINILM, num_classes=2, seq_length=16)
    with open(os.path.join(snapshot, "vocab.txt"), encoding="utf-8") as f:
        assert model.preprocessor.tokenizer.vocab == f.read().splitlines()
    assert model.preprocessor.lowercase is True
    probabilities = model.predict_proba(["a charming film", "a dull one"])
    assert probabilities.shape == (2, 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize(
    "variable, hub_below",
    [
        ("HF_HUB_CACHE", ""),
        ("HUGGINGFACE_HUB_CACHE", ""),
        ("HF_HOME", "hub"),
        ("XDG_CACHE_HOME", "huggingface/hub"),
        ("HOME", ".cache/huggingface/hub"),
    ],
)
def test_the_hub_cache_is_where_huggingface_hub_puts_it(
    caches, minilm_path, monkeypatch, tmp_path, variable, hub_below
):
    monkeypatch.delenv("HF_HUB_CACHE")
    root = tmp_path / "chosen"
    monkeypatch.setenv(variable, str(root))
    snapshot = add_snapshot(os.path.join(root, hub_below), MINILM, COMMIT, minilm_path)
    assert checkpoints.resolve(MINILM).weights == os.path.join(snapshot, "model.safetensors")


def test_revisions_refs_and_a_lone_snapshot(caches, minilm_path):
    hub, _ = caches
    add_snapshot(hub, MINILM, COMMIT, minilm_path)
    add_snapshot(
        hub, MINILM, OTHER_COMMIT, minilm_path, ref="v2", config_changes={"num_hidden_layers": 3}
    )
    # refs/main decides among several snapshots; a tag's ref or a commit picks another.
    assert checkpoints.resolve(MINILM).config.num_hidden_layers == 6
    assert checkpoints.resolve(f"{MINILM}@v2").config.num_hidden_layers == 3
    assert checkpoints.resolve(f"{MINILM}@{OTHER_COMMIT}").config.num_hidden_layers == 3
    assert checkpoints.resolve(f"{MINILM}@{COMMIT}").config.num_hidden_layers == 6
    model = os.path.join(hub, "models--sentence-transformers--all-MiniLM-L6-v2")
    os.remove(os.path.join(model, "refs", "main"))
    with pytest.raises(
        FileNotFoundError,
        match=rf"no refs/main and 2 snapshots \({OTHER_COMMIT}, "
        rf"{COMMIT}\); name one: {MINILM}@<commit>",
    ):
        checkpoints.resolve(MINILM)
    # A cache without refs/ and one snapshot (copied by hand) is unambiguous.
    lone = "Org/lone-model"
    add_snapshot(hub, lone, COMMIT, minilm_path, ref=None)
    assert checkpoints.resolve(lone).weights == os.path.join(
        hub, "models--Org--lone-model", "snapshots", COMMIT, "model.safetensors"
    )


def test_a_local_path_wins_over_a_name(caches, minilm_path, tmp_path, monkeypatch):
    hub, _ = caches
    add_snapshot(hub, MINILM, COMMIT, minilm_path)
    monkeypatch.chdir(tmp_path)
    local = tmp_path / "sentence-transformers" / "all-MiniLM-L6-v2"
    write_original_folder(str(local), original_bert_tensors(TINY_CONFIG))
    source = checkpoints.resolve(MINILM)
    assert source.kind == "tf1"
    assert source.weights == os.path.join(MINILM, "bert_model.ckpt")


# === Original releases ===


def test_a_release_name_loads_from_the_keras_bert_cache(caches, features):
    _, cache = caches
    folder = os.path.join(cache, "uncased_L-2_H-128_A-2")
    config = dict(TINY_CONFIG, hidden_size=128, intermediate_size=128)
    write_original_folder(folder, original_bert_tensors(config), config, vocab=["[PAD]", "a"])
    source = checkpoints.resolve("uncased_L-2_H-128_A-2")
    assert (source.kind, source.weights) == ("tf1", os.path.join(folder, "bert_model.ckpt"))
    assert source.vocab_file == os.path.join(folder, "vocab.txt")
    assert source.casing.evidence == "TF1 folder name uncased_L-2_H-128_A-2"
    assert_same_outputs(
        BertEncoder.from_pretrained("uncased_L-2_H-128_A-2"),
        BertEncoder.from_pretrained(folder),
        features,
    )


def test_release_layouts_and_friendly_names(caches, minilm_path):
    hub, cache = caches
    # A 2018 zip unzipped with `-d CACHE/NAME` holds its own NAME/ folder.
    nested = os.path.join(cache, "cased_L-12_H-768_A-12", "cased_L-12_H-768_A-12")
    write_original_folder(nested, original_bert_tensors(TINY_CONFIG))
    release = checkpoints.resolve("cased_L-12_H-768_A-12")
    assert (release.kind, release.weights) == ("tf1", os.path.join(nested, "bert_model.ckpt"))
    assert release.casing.lowercase is False
    # HuggingFace's name of the release: the HuggingFace cache first, then the release.
    assert checkpoints.resolve("bert-base-cased").weights == release.weights
    snapshot = add_snapshot(hub, "google-bert/bert-base-cased", COMMIT, minilm_path)
    assert checkpoints.resolve("bert-base-cased").weights == os.path.join(
        snapshot, "model.safetensors"
    )
    # The release's own name still means the original files.
    assert checkpoints.resolve("cased_L-12_H-768_A-12").weights == release.weights


# === Not found ===


@pytest.mark.parametrize(
    "name, hub_models, releases, command",
    [
        (
            MINILM,
            ["models--sentence-transformers--all-MiniLM-L6-v2"],
            [],
            "hf download sentence-transformers/all-MiniLM-L6-v2",
        ),
        (
            "bert-base-uncased",
            ["models--bert-base-uncased", "models--google-bert--bert-base-uncased"],
            ["uncased_L-12_H-768_A-12"],
            "hf download bert-base-uncased",
        ),
        # google-research/bert's README links each release's zip.
        (
            "uncased_L-12_H-768_A-12",
            ["models--google-bert--bert-base-uncased", "models--bert-base-uncased"],
            ["uncased_L-12_H-768_A-12"],
            "curl -LO https://storage.googleapis.com/bert_models/2018_10_18/uncased_L-12_H-768_A-12.zip",
        ),
        (
            "multi_cased_L-12_H-768_A-12",
            [
                "models--google-bert--bert-base-multilingual-cased",
                "models--bert-base-multilingual-cased",
            ],
            ["multi_cased_L-12_H-768_A-12"],
            "curl -LO https://storage.googleapis.com/bert_models/"
            "2018_11_23/multi_cased_L-12_H-768_A-12.zip",
        ),
        (
            "uncased_L-4_H-256_A-4",
            ["models--google--bert_uncased_L-4_H-256_A-4"],
            ["uncased_L-4_H-256_A-4"],
            "curl -LO https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-4_H-256_A-4.zip",
        ),
    ],
)
def test_a_name_not_cached_lists_the_places_and_the_fetch_command(
    caches, name, hub_models, releases, command
):
    hub, cache = caches
    with pytest.raises(FileNotFoundError) as error:
        BertEncoder.from_pretrained(name)
    message = str(error.value)
    assert message.startswith(f"{name}: no such local path")
    assert "reads no network" in message
    for model in hub_models:
        assert os.path.join(hub, model, "refs", "main") in message
    for release in releases:
        assert os.path.join(cache, release) in message
    assert f"Fetch it with: {command}" in message
    if command.startswith("curl"):  # into the folder looked in
        assert message.endswith(f".zip && unzip {name}.zip -d {os.path.join(cache, name)}")
    assert len(message.splitlines()) == 2 + len(hub_models) + len(releases)
    # Short: the cache folders aside, a few lines.
    assert len(message.replace(hub, "HUB").replace(cache, "CACHE")) < 600


def test_missing_paths_that_are_no_names_say_so(caches, tmp_path):
    for path in (str(tmp_path / "absent"), "out/bert_model.ckpt", "../elsewhere"):
        with pytest.raises(FileNotFoundError, match=r"^pretrained checkpoint not found: "):
            checkpoints.resolve(path)
