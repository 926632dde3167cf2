"""BertSentenceEncoder on the real all-MiniLM-L6-v2 folder: every pooling mode,
Dense and Normalize modules, the folder's settings, against NumPy computed on
the real weights' token outputs (no PyTorch needed)."""

import csv
import json
import os

import numpy as np
import pytest

from keras_bert import BertEncoder, BertPreprocessor, BertSentenceEncoder
from keras_bert.layers.sentence_pooling import POOLING_MODES

SEQ_LENGTH = 48


def bbc_headlines_and_openings(datasets_dir, count=6):
    """Real text of varied lengths: BBC headlines and their articles' first sentences."""
    with open(os.path.join(datasets_dir, "bbc_news", "dev.tsv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[:count]
    return [row["title"] for row in rows] + [row["text"].split(". ")[0] for row in rows]


@pytest.fixture(scope="module")
def minilm_encoder(minilm_path):
    return BertEncoder.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def texts(datasets_dir):
    return bbc_headlines_and_openings(datasets_dir)


@pytest.fixture(scope="module")
def preprocessed(minilm_encoder, real_vocab_file, texts):
    """One preprocessor at SEQ_LENGTH, and the real token outputs of `texts`."""
    preprocessor = BertPreprocessor(real_vocab_file, seq_length=SEQ_LENGTH)
    return (preprocessor, *token_outputs(minilm_encoder, preprocessor, texts))


def token_outputs(encoder, preprocessor, texts):
    """The real encoder's last layer (N, T, H) and mask (N, T), at the full width."""
    features = preprocessor(texts)
    sequence = encoder(features, training=False)["sequence_output"]
    return np.asarray(sequence, np.float64), np.asarray(features["input_mask"], np.float64)


def numpy_pool(tokens, mask, mode):
    """sentence_transformers.models.Pooling.forward, one mode, in NumPy."""
    expanded = mask[..., None]
    if mode == "cls":
        return tokens[:, 0]
    if mode == "max":
        return np.where(expanded > 0, tokens, -1e9).max(axis=1)
    if mode == "weightedmean":
        expanded = expanded * np.arange(1, tokens.shape[1] + 1)[None, :, None]
    if mode in ("mean", "mean_sqrt_len_tokens", "weightedmean"):
        total = (tokens * expanded).sum(axis=1)
        count = np.clip(expanded.sum(axis=1), 1e-9, None)
        return total / (np.sqrt(count) if mode == "mean_sqrt_len_tokens" else count)
    if mode == "lasttoken":
        flipped = mask[:, ::-1]
        index = flipped.argmax(axis=1)
        index = np.where(flipped.max(axis=1) == 0, mask.shape[1] - 1, index)
        last = mask.shape[1] - index - 1
        return tokens[np.arange(len(tokens)), last]
    raise AssertionError(mode)


def numpy_normalize(x):
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


@pytest.mark.parametrize(
    "modes",
    [[mode] for mode in POOLING_MODES]
    + [["cls", "mean", "max"], ["lasttoken", "mean_sqrt_len_tokens"]],
)
def test_every_pooling_mode_equals_numpy_on_the_real_token_outputs(
    minilm_encoder, preprocessed, texts, modes
):
    preprocessor, tokens, mask = preprocessed
    model = BertSentenceEncoder(minilm_encoder, pooling=modes, preprocessor=preprocessor)
    assert mask.sum(axis=1).min() < mask.sum(axis=1).max()  # padding to pool past
    # Concatenated in the order given, as sentence-transformers 6 does.
    expected = np.concatenate([numpy_pool(tokens, mask, mode) for mode in modes], axis=-1)
    got = model.predict(texts, batch_size=4, verbose=0)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384 * len(modes))
    np.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-5)


def test_the_minilm_folder_reads_its_modules_and_settings(minilm_path, minilm_encoder, texts):
    """modules.json: Transformer, Pooling (mean), Normalize; max_seq_length 256."""
    model = BertSentenceEncoder.from_pretrained(minilm_path)
    assert model.pooling == ("mean",) and model.normalize and not model.dense
    assert model.preprocessor.seq_length == 256 and model.preprocessor.lowercase
    long_texts = texts + [" ".join(texts * 4)]  # one past 256 pieces: cut as sentence-transformers
    tokens, mask = token_outputs(minilm_encoder, model.preprocessor, long_texts)
    assert mask.sum(axis=1).max() == 256
    expected = numpy_normalize(numpy_pool(tokens, mask, "mean"))
    got = model.predict(long_texts, verbose=0)
    np.testing.assert_allclose(got, expected, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # encode: batches of similar lengths, answered in the texts' order.
    np.testing.assert_allclose(model.encode(long_texts, batch_size=3), expected, atol=2e-5)
    np.testing.assert_allclose(
        model.similarity(long_texts[:2], long_texts[2:5]), expected[:2] @ expected[2:5].T, atol=2e-5
    )


def _link_bert_files(source, folder):
    os.makedirs(folder, exist_ok=True)
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        os.symlink(os.path.join(source, name), os.path.join(folder, name))


def _write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


# sentence-transformers 6's module types, by the folder name's kind (`2_Dense`).
_ST6 = "sentence_transformers.base.modules."
_ST6_TYPES = {
    "Pooling": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    "Dense": _ST6 + "dense.Dense",
    "Normalize": _ST6 + "normalize.Normalize",
}


def _write_st6_modules(folder, *paths):
    """sentence-transformers 6's modules.json: the Transformer in the folder
    itself, then a module per folder of `paths` (`1_Pooling`, `2_Dense`, ...)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": _ST6 + "transformer.Transformer"}]
    for i, path in enumerate(paths, 1):
        kind = path.split("_", 1)[1]
        modules.append({"idx": i, "name": str(i), "path": path, "type": _ST6_TYPES[kind]})
    _write_json(folder / "modules.json", modules)


def test_dense_and_normalize_modules_of_a_folder(tmp_path, minilm_path, minilm_encoder, texts):
    """A folder as sentence-transformers writes one with Dense modules: the
    Transformer in 0_Transformer, max pooling, Dense 384->16 tanh, Dense 16->8
    identity without bias, Normalize; lowercase text first (do_lower_case)."""
    from safetensors.numpy import save_file

    folder = tmp_path / "st_model"
    _link_bert_files(minilm_path, folder / "0_Transformer")
    _write_json(
        folder / "0_Transformer" / "sentence_bert_config.json",
        {"max_seq_length": 40, "do_lower_case": True},
    )
    _write_json(
        folder / "1_Pooling" / "config.json",
        {"word_embedding_dimension": 384, "pooling_mode_max_tokens": True},
    )
    rng = np.random.default_rng(0)
    w1, b1 = (
        rng.normal(size=(16, 384)).astype(np.float32) / 20,
        rng.normal(size=16).astype(np.float32),
    )
    w2 = rng.normal(size=(8, 16)).astype(np.float32)
    for path, tensors, config in (
        (
            "2_Dense",
            {"linear.weight": w1, "linear.bias": b1},
            {
                "in_features": 384,
                "out_features": 16,
                "bias": True,
                "activation_function": "torch.nn.modules.activation.Tanh",
            },
        ),
        (
            "3_Dense",
            {"linear.weight": w2},
            {
                "in_features": 16,
                "out_features": 8,
                "bias": False,
                "activation_function": "torch.nn.modules.linear.Identity",
            },
        ),
    ):
        _write_json(folder / path / "config.json", config)
        save_file(tensors, str(folder / path / "model.safetensors"))
    modules = [
        ("0_Transformer", "Transformer"),
        ("1_Pooling", "Pooling"),
        ("2_Dense", "Dense"),
        ("3_Dense", "Dense"),
        ("4_Normalize", "Normalize"),
    ]
    _write_json(
        folder / "modules.json",
        [
            {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
            for i, (path, kind) in enumerate(modules)
        ],
    )

    model = BertSentenceEncoder.from_pretrained(str(folder))
    assert model.pooling == ("max",) and model.normalize and model.lowercase_text
    assert model.preprocessor.seq_length == 40
    tokens, mask = token_outputs(minilm_encoder, model.preprocessor, texts)
    hidden = np.tanh(numpy_pool(tokens, mask, "max") @ w1.T + b1)
    expected = numpy_normalize(hidden @ w2.T)
    np.testing.assert_allclose(model.predict(texts, verbose=0), expected, atol=2e-5)


def test_a_folder_as_sentence_transformers_6_writes_it(
    tmp_path, minilm_path, minilm_encoder, texts
):
    """sentence-transformers 6: module types by their full path, `pooling_mode`
    as a list (concatenated in its order), max_seq_length as the tokenizer's
    model_max_length, and tokenizer.json without vocab.txt."""
    folder = tmp_path / "st6"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        os.symlink(os.path.join(minilm_path, name), folder / name)
    with open(os.path.join(minilm_path, "tokenizer_config.json"), encoding="utf-8") as f:
        tokenizer_config = json.load(f)
    _write_json(folder / "tokenizer_config.json", {**tokenizer_config, "model_max_length": 36})
    _write_json(folder / "sentence_bert_config.json", {"transformer_task": "feature-extraction"})
    _write_json(
        folder / "1_Pooling" / "config.json",
        {"embedding_dimension": 384, "pooling_mode": ["mean", "cls"], "include_prompt": True},
    )
    _write_st6_modules(folder, "1_Pooling", "2_Normalize")
    model = BertSentenceEncoder.from_pretrained(str(folder))
    assert model.pooling == ("mean", "cls") and model.normalize
    assert model.preprocessor.seq_length == 36
    with open(os.path.join(minilm_path, "vocab.txt"), encoding="utf-8") as f:
        assert model.preprocessor.vocabulary == f.read().splitlines()
    tokens, mask = token_outputs(minilm_encoder, model.preprocessor, texts)
    expected = numpy_normalize(
        np.concatenate([numpy_pool(tokens, mask, "mean"), numpy_pool(tokens, mask, "cls")], axis=-1)
    )
    np.testing.assert_allclose(model.predict(texts, verbose=0), expected, atol=2e-5)


def test_a_sentence_transformers_name_in_the_huggingface_cache(
    tmp_path, monkeypatch, minilm_path, texts
):
    """`ORG/NAME` found in the local hub cache (snapshots/<commit>, refs/main)
    is read as the folder: its modules and settings, not as plain BERT."""
    for variable in (
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_HOME",
        "XDG_CACHE_HOME",
        "KERAS_BERT_CACHE",
    ):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    model_folder = tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    commit = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
    snapshot = model_folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in os.listdir(minilm_path):
        os.symlink(os.path.join(minilm_path, name), snapshot / name)
    (model_folder / "refs").mkdir()
    (model_folder / "refs" / "main").write_text(commit)
    model = BertSentenceEncoder.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")
    assert model.normalize and model.preprocessor.seq_length == 256
    np.testing.assert_allclose(
        model.predict(texts[:3], verbose=0),
        BertSentenceEncoder.from_pretrained(minilm_path).predict(texts[:3], verbose=0),
        atol=1e-6,
    )


def test_a_plain_bert_checkpoint_is_mean_pooled_unnormalised(
    tmp_path, minilm_path, minilm_encoder, texts
):
    """What sentence-transformers builds for a folder without modules.json."""
    folder = tmp_path / "plain"
    _link_bert_files(minilm_path, folder)
    model = BertSentenceEncoder.from_pretrained(str(folder))
    assert model.pooling == ("mean",) and not model.normalize
    assert model.preprocessor.seq_length == 512
    tokens, mask = token_outputs(minilm_encoder, model.preprocessor, texts[:4])
    np.testing.assert_allclose(
        model.predict(texts[:4], verbose=0), numpy_pool(tokens, mask, "mean"), atol=2e-5
    )


def test_a_folder_with_a_module_it_cannot_build_is_named(tmp_path, minilm_path):
    folder = tmp_path / "cnn"
    _link_bert_files(minilm_path, folder)
    _write_json(folder / "1_Pooling" / "config.json", {"pooling_mode_mean_tokens": True})
    _write_json(
        folder / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {
                "idx": 1,
                "name": "1",
                "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling",
            },
            {"idx": 2, "name": "2", "path": "2_CNN", "type": "sentence_transformers.models.CNN"},
        ],
    )
    with pytest.raises(ValueError, match="CNN.*not supported"):
        BertSentenceEncoder.from_pretrained(str(folder))


def test_unknown_pooling_modes_are_named(minilm_encoder):
    with pytest.raises(ValueError, match="choose one or more of"):
        BertSentenceEncoder(minilm_encoder, pooling="median")


def _residual_folder(folder, minilm_path, **changes):
    """A sentence-transformers 6.3 folder: the Transformer at the root, mean
    pooling, Dense 384->384 tanh with use_residual, Dense 384->16 identity with
    use_residual (its input projected by `residual.weight`), Normalize.
    `changes`: {file under the folder: fields to merge into its JSON}."""
    from safetensors.numpy import save_file

    _link_bert_files(minilm_path, folder)
    rng = np.random.default_rng(3)
    weights = {
        "2_Dense": {
            "linear.weight": rng.normal(size=(384, 384)).astype(np.float32) / 20,
            "linear.bias": rng.normal(size=384).astype(np.float32) / 5,
        },
        "3_Dense": {
            "linear.weight": rng.normal(size=(16, 384)).astype(np.float32) / 20,
            "residual.weight": rng.normal(size=(16, 384)).astype(np.float32) / 20,
        },
    }
    files = {
        "sentence_bert_config.json": {
            "transformer_task": "feature-extraction",
            "modality_config": {
                "text": {"method": "forward", "method_output_name": "last_hidden_state"}
            },
            "module_output_name": "token_embeddings",
            "max_seq_length": 40,
        },
        "1_Pooling/config.json": {
            "embedding_dimension": 384,
            "pooling_mode": "mean",
            "include_prompt": True,
        },
        "2_Dense/config.json": {
            "in_features": 384,
            "out_features": 384,
            "bias": True,
            "activation_function": "torch.nn.modules.activation.Tanh",
            "module_input_name": "sentence_embedding",
            "module_output_name": "sentence_embedding",
            "use_residual": True,
        },
        "3_Dense/config.json": {
            "in_features": 384,
            "out_features": 16,
            "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity",
            "module_input_name": "sentence_embedding",
            "module_output_name": "sentence_embedding",
            "use_residual": True,
        },
        "4_Normalize/config.json": {
            "module_input_name": "sentence_embedding",
            "module_output_name": "sentence_embedding",
        },
    }
    for name, fields in changes.items():
        files[name] = {**files[name], **fields}
    for name, value in files.items():
        _write_json(folder / name, value)
    for path, tensors in weights.items():
        save_file(tensors, str(folder / path / "model.safetensors"))
    _write_st6_modules(folder, "1_Pooling", "2_Dense", "3_Dense", "4_Normalize")
    return weights


def test_dense_modules_with_use_residual_add_their_input(
    tmp_path, minilm_path, minilm_encoder, texts
):
    """sentence-transformers 6.3's Dense.forward: activation(linear(x)) + x, the
    input through `residual` (no bias) where in_features != out_features; NumPy
    on the saved weights is the oracle. Saved and reloaded, the model keeps it."""
    import keras

    weights = _residual_folder(tmp_path / "st", minilm_path)
    model = BertSentenceEncoder.from_pretrained(str(tmp_path / "st"))
    assert [layer.get("residual") for layer in model.dense] == [True, True]
    tokens, mask = token_outputs(minilm_encoder, model.preprocessor, texts)
    first, second = weights["2_Dense"], weights["3_Dense"]
    pooled = numpy_pool(tokens, mask, "mean")
    hidden = np.tanh(pooled @ first["linear.weight"].T + first["linear.bias"]) + pooled
    out = hidden @ second["linear.weight"].T + hidden @ second["residual.weight"].T
    expected = numpy_normalize(out)
    np.testing.assert_allclose(model.predict(texts, verbose=0), expected, atol=2e-5)
    # Without the residual (what was computed before) the answer is far off.
    plain = numpy_normalize(
        np.tanh(pooled @ first["linear.weight"].T + first["linear.bias"])
        @ second["linear.weight"].T
    )
    assert np.abs(plain - expected).max() > 0.05
    model.save(tmp_path / "residual.keras")
    again = keras.models.load_model(tmp_path / "residual.keras")
    np.testing.assert_allclose(again.predict(texts, verbose=0), expected, atol=2e-5)


@pytest.mark.parametrize(
    "file, fields, named",
    [
        ("2_Dense/config.json", {"module_input_name": "token_embeddings"}, "module_input_name"),
        ("2_Dense/config.json", {"dropout": 0.1}, "dropout"),
        ("2_Dense/config.json", {"use_residual": "yes"}, "use_residual"),
        ("1_Pooling/config.json", {"pooling_weights": [1, 2]}, "pooling_weights"),
        ("4_Normalize/config.json", {"module_output_name": "normalized"}, "module_output_name"),
        ("sentence_bert_config.json", {"transformer_task": "fill-mask"}, "transformer_task"),
        (
            "sentence_bert_config.json",
            {"processing_kwargs": {"text": {"truncation": "only_first"}}},
            "processing_kwargs",
        ),
        ("sentence_bert_config.json", {"query_length": 32}, "query_length"),
    ],
)
def test_a_module_field_keras_bert_does_not_compute_is_refused(
    tmp_path, minilm_path, file, fields, named
):
    folder = tmp_path / "st"
    _residual_folder(folder, minilm_path, **{file: fields})
    with pytest.raises(ValueError) as refused:
        BertSentenceEncoder.from_pretrained(str(folder))
    message = str(refused.value)
    assert message.startswith(str(folder / file)), message
    assert named in message
