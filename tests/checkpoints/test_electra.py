"""ELECTRA's weights in: HuggingFace folders and google-research/electra
checkpoints give HuggingFace's own outputs.

The oracle is HuggingFace `transformers` itself: tests/fixtures/electra holds
tiny ElectraForPreTraining / ElectraForMaskedLM folders saved with
`save_pretrained` and what they computed on real text (`outputs.npz`,
written by `make_fixtures.py`; see its README). No torch is needed here.
"""

import json
import os
import re

import keras
import numpy as np
import pytest
from original_checkpoints import write_tf1_checkpoint
from safetensors.numpy import load_file

from keras_bert import BertConfig, BertEncoder, ElectraDiscriminator, ElectraGenerator
from keras_bert.layers.electra_heads import ReplacedTokenHead
from keras_bert.layers.pretraining_heads import MaskedLMHead

from harness import run_layer_test
from repo_paths import REPO_ROOT

FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures", "electra")
# HuggingFace's float32 outputs within 1e-5; two tiny layers deep, the
# differences measured stay below 4e-6.
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def hf_outputs():
    with np.load(os.path.join(FIXTURES, "outputs.npz")) as outputs:
        return dict(outputs)


def _inputs(outputs):
    return {name: outputs[name] for name in ("input_ids", "input_mask", "segment_ids")}


def _assert_close(actual, expected):
    actual = keras.ops.convert_to_numpy(actual)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE)


def test_the_fixture_has_padded_rows_and_a_second_segment(hf_outputs):
    # What the comparisons below rely on to mean something.
    assert (hf_outputs["input_mask"] == 0).any()
    assert (hf_outputs["segment_ids"] == 1).any()
    assert np.abs(hf_outputs["discriminator_logits"]).max() > 0.1


@pytest.mark.parametrize("folder", ["discriminator", "generator", "generator_untied"])
def test_encoder_of_an_electra_folder_equals_huggingface(folder, hf_outputs):
    encoder = BertEncoder.from_pretrained(os.path.join(FIXTURES, folder))
    config = json.load(open(os.path.join(FIXTURES, folder, "config.json")))
    projected = config["embedding_size"] != config["hidden_size"]
    assert (encoder.embeddings_projection is not None) == projected
    outputs = encoder(_inputs(hf_outputs))
    _assert_close(outputs["sequence_output"], hf_outputs[f"{folder}_sequence_output"])


def test_discriminator_logits_equal_huggingface(hf_outputs):
    model = ElectraDiscriminator.from_pretrained(os.path.join(FIXTURES, "discriminator"))
    assert len(model.loaded_head_weights) == 4
    logits = model(_inputs(hf_outputs))["replaced_token_logits"]
    _assert_close(logits, hf_outputs["discriminator_logits"])


@pytest.mark.parametrize("folder", ["generator", "generator_untied"])
def test_generator_logits_equal_huggingface(folder, hf_outputs):
    model = ElectraGenerator.from_pretrained(os.path.join(FIXTURES, folder))
    assert model.tie_embeddings == (folder == "generator")
    assert len(model.loaded_head_weights) == (5 if model.tie_embeddings else 6)
    logits = model(_inputs(hf_outputs))["masked_lm_logits"]
    _assert_close(logits, hf_outputs[f"{folder}_logits"])


def test_electra_encoder_keeps_a_fresh_pooler():
    # ELECTRA has no pooler; the encoder is still whole (pooled_output for a classifier).
    encoder = BertEncoder.from_pretrained(os.path.join(FIXTURES, "discriminator"))
    assert encoder.pooler.kernel.shape == (32, 32)
    assert float(np.std(keras.ops.convert_to_numpy(encoder.pooler.kernel))) > 0


def test_saved_models_reload_with_their_heads(tmp_path, hf_outputs):
    x = _inputs(hf_outputs)
    for model, key in (
        (
            ElectraDiscriminator.from_pretrained(os.path.join(FIXTURES, "discriminator")),
            "replaced_token_logits",
        ),
        (
            ElectraGenerator.from_pretrained(os.path.join(FIXTURES, "generator_untied")),
            "masked_lm_logits",
        ),
    ):
        path = str(tmp_path / f"{type(model).__name__}.keras")
        model.save(path)
        reloaded = keras.models.load_model(path)
        assert type(reloaded) is type(model)
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(reloaded(x)[key]), keras.ops.convert_to_numpy(model(x)[key])
        )
        # The encoder inside a saved ELECTRA model is a pretrained source too.
        encoder = BertEncoder.from_pretrained(path)
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(encoder(x)["sequence_output"]),
            keras.ops.convert_to_numpy(model.encoder(x)["sequence_output"]),
        )


def test_a_fresh_generator_writes_its_logits_in_the_embedding_width():
    config = BertConfig(
        vocab_size=40,
        hidden_size=32,
        embedding_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
    )
    model = ElectraGenerator(BertEncoder(config))
    assert model.generator_head.dense.kernel.shape == (32, 16)
    ids = np.ones((2, 5), "int32")
    logits = model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
    assert logits["masked_lm_logits"].shape == (2, 5, 40)


# === google-research/electra's TF1 checkpoints ===


def _original_electra_name(hf_name: str) -> tuple[str, bool]:
    """A HuggingFace ELECTRA tensor's name in google-research/electra's
    checkpoints, and whether its layout is transposed there (written here from
    the original's variable scopes, independently of keras_bert's map)."""
    name = hf_name.replace("generator_lm_head.bias", "generator_predictions.output_bias")
    name = name.replace("dense_prediction", "dense_1")
    name = re.sub(r"layer\.(\d+)", r"layer_\1", name).replace(".", "/")
    for table in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        name = name.replace(f"{table}/weight", table)
    if "LayerNorm/" in name:
        return name.replace("/weight", "/gamma").replace("/bias", "/beta"), False
    if name.endswith("/weight"):
        return name[: -len("/weight")] + "/kernel", True
    return name, False


def _write_electra_tf1_folder(folder, hf_folder, extra_scope=None):
    """An ELECTRA checkpoint in the original's names from a HuggingFace folder,
    with a bert_config.json; `extra_scope`: another folder's encoder saved
    beside it under `generator/`, as in the original's pretraining checkpoints."""
    tensors = {}
    for hf_name, value in load_file(os.path.join(hf_folder, "model.safetensors")).items():
        name, transposed = _original_electra_name(hf_name)
        tensors[name] = value.T if transposed else value
    if extra_scope is not None:
        for hf_name, value in load_file(os.path.join(extra_scope, "model.safetensors")).items():
            name, transposed = _original_electra_name(hf_name)
            if name.startswith("electra/encoder/"):
                tensors["generator/" + name[len("electra/") :]] = value.T if transposed else value
    assert any(name.startswith("electra/embeddings_project/") for name in tensors)
    hf_config = json.load(open(os.path.join(hf_folder, "config.json")))
    config = {
        field: hf_config[field]
        for field in (
            "vocab_size",
            "hidden_size",
            "embedding_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "hidden_act",
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
            "max_position_embeddings",
            "type_vocab_size",
            "initializer_range",
        )
    }
    # HuggingFace computes the exact GELU; the original's "gelu" is its tanh form.
    config["exact_gelu"] = True
    os.makedirs(folder)
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        json.dump(config, f)
    return write_tf1_checkpoint(tensors, os.path.join(folder, "model.ckpt"))


def test_discriminator_from_an_original_electra_checkpoint(tmp_path, hf_outputs):
    folder = str(tmp_path / "electra")
    _write_electra_tf1_folder(
        folder,
        os.path.join(FIXTURES, "discriminator"),
        extra_scope=os.path.join(FIXTURES, "generator"),
    )
    model = ElectraDiscriminator.from_pretrained(folder)
    assert len(model.loaded_head_weights) == 4
    x = _inputs(hf_outputs)
    _assert_close(model.encoder(x)["sequence_output"], hf_outputs["discriminator_sequence_output"])
    _assert_close(model(x)["replaced_token_logits"], hf_outputs["discriminator_logits"])


def test_generator_from_an_original_electra_checkpoint(tmp_path, hf_outputs):
    folder = str(tmp_path / "electra")
    _write_electra_tf1_folder(folder, os.path.join(FIXTURES, "generator"))
    model = ElectraGenerator.from_pretrained(folder)
    assert model.tie_embeddings and len(model.loaded_head_weights) == 5
    _assert_close(model(_inputs(hf_outputs))["masked_lm_logits"], hf_outputs["generator_logits"])


# === BertConfig.embedding_size ===


def test_embedding_size_is_absent_for_bert():
    config = BertConfig.preset("tiny")
    assert config.embedding_size is None and "embedding_size" not in config.to_dict()
    assert BertEncoder(config).embeddings_projection is None
    # The hidden size spelled out is the same "no projection".
    assert BertConfig.preset("tiny", embedding_size=128).embedding_size is None


def test_embedding_size_round_trips_through_bert_config_json(tmp_path):
    config = BertConfig.preset("tiny", embedding_size=64)
    config.to_json_file(tmp_path / "bert_config.json")
    assert BertConfig.from_json_file(tmp_path / "bert_config.json") == config


@pytest.mark.parametrize("value", [0, -4, 1.5, True])
def test_embedding_size_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match="embedding_size must be a positive integer"):
        BertConfig.preset("tiny", embedding_size=value)


# === The heads as layers ===


def test_replaced_token_head_is_a_well_formed_layer():
    hidden = np.random.default_rng(0).standard_normal((2, 5, 16)).astype("float32")
    run_layer_test(
        ReplacedTokenHead,
        dict(hidden_size=16, activation="gelu", initializer_range=0.02),
        hidden,
        (2, 5),
        expected_num_trainable_weights=4,
        expected_output_dtype="float32",  # logits
    )


def test_masked_lm_head_reads_a_wider_input_than_its_table():
    # ELECTRA's generator: hidden 24 in, embeddings 16 out.
    hidden = np.random.default_rng(0).standard_normal((2, 5, 24)).astype("float32")
    run_layer_test(
        MaskedLMHead,
        dict(token_embedding=keras.layers.Embedding(30, 16, name="token_embedding")),
        dict(sequence_output=hidden),
        (2, 5, 30),
        expected_num_trainable_weights=6,
        expected_output_dtype="float32",
    )
