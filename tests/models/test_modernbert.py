"""ModernBertEncoder against HuggingFace's ModernBertModel: tiny folders saved by
HuggingFace with its outputs beside them (tests/fixtures/modernbert, written
by make_fixtures.py with torch; the tests need neither torch nor transformers).
"""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_bert import ModernBertEncoder
from keras_bert.modernbert_config import ModernBertConfig

from harness import python_script
from repo_paths import TESTS_DIR

FIXTURES = os.path.join(TESTS_DIR, "fixtures", "modernbert")
NAMES = ("tiny_model", "tiny_mlm_biases")
# float32 through 3-4 blocks, rotary angles and LayerNorms: HuggingFace's and
# ours agree to a few 1e-6; 1e-5 is the parity the encoder promises.
PARITY = 1e-5


def fixture(name):
    folder = os.path.join(FIXTURES, name)
    return folder, dict(np.load(folder + "_outputs.npz"))


@pytest.fixture(scope="module")
def loaded():
    return {name: ModernBertEncoder.from_pretrained(fixture(name)[0]) for name in NAMES}


def run(encoder, ids, mask):
    return encoder.predict({"input_ids": ids, "input_mask": mask}, verbose=0)["sequence_output"]


@pytest.mark.parametrize("name", NAMES)
def test_padded_batch_matches_huggingface_at_real_positions(loaded, name):
    _, expected = fixture(name)
    got = run(loaded[name], expected["input_ids"], expected["input_mask"])
    real = expected["input_mask"].astype(bool)
    assert np.abs(got - expected["sequence_output"])[real].max() < PARITY


@pytest.mark.parametrize("name", NAMES)
def test_each_sequence_alone_matches_huggingface(loaded, name):
    _, expected = fixture(name)
    for row, length in enumerate(expected["input_mask"].sum(axis=1)):
        got = run(
            loaded[name],
            expected["input_ids"][row : row + 1, :length],
            expected["input_mask"][row : row + 1, :length],
        )
        np.testing.assert_allclose(got, expected[f"unpadded_{row}"], rtol=0, atol=PARITY)


def test_the_sliding_window_is_what_parity_rests_on(loaded):
    # The same weights with a window covering everything miss HuggingFace by
    # far: the fixtures' sequences (48 tokens, windows of 8 and 16) exercise it.
    folder, expected = fixture("tiny_model")
    wide = ModernBertEncoder(dict(loaded["tiny_model"].config.to_dict(), local_attention=1024))
    wide.set_weights(loaded["tiny_model"].get_weights())
    got = run(wide, expected["input_ids"], expected["input_mask"])
    real = expected["input_mask"].astype(bool)
    assert np.abs(got - expected["sequence_output"])[real].max() > 0.1


def test_huggingface_config_reads_as_its_layers_and_thetas(loaded):
    config = loaded["tiny_mlm_biases"].config
    assert (config.global_attn_every_n_layers, config.local_attention) == (2, 8)
    assert (config.global_rope_theta, config.local_rope_theta) == (1000.0, 500.0)
    assert config.hidden_activation == "gelu_approximate"  # HF's gelu_pytorch_tanh
    assert [config.is_global_layer(i) for i in range(3)] == [True, False, True]
    default = loaded["tiny_model"].config  # layer_types alone, every third global
    assert [default.is_global_layer(i) for i in range(4)] == [True, False, False, True]
    assert [b.attention_layer_norm is None for b in loaded["tiny_model"].transformer_blocks] == [
        True,
        False,
        False,
        False,
    ]


def test_the_older_huggingface_config_form_reads_the_same():
    # transformers 4.48-4.x wrote the pattern and thetas as plain fields.
    config = ModernBertConfig.from_dict(
        dict(
            vocab_size=100,
            hidden_size=32,
            num_hidden_layers=4,
            num_attention_heads=2,
            intermediate_size=48,
            global_attn_every_n_layers=2,
            global_rope_theta=1000.0,
            local_rope_theta=500.0,
            hidden_activation="gelu",
            reference_compile=None,
        )
    )
    assert (config.global_attn_every_n_layers, config.global_rope_theta) == (2, 1000.0)
    assert ModernBertConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "change, message",
    [
        ({"layer_types": ["sliding_attention", "full_attention"]}, "layer_types"),
        ({"rope_parameters": {"full_attention": {"rope_type": "yarn"}}}, "rope_type"),
        ({"num_attention_heads": 5}, "divisible"),
        ({"hidden_activation": "mish"}, "hidden_activation"),
        ({"classifier_pooling": "max"}, "classifier_pooling"),
    ],
)
def test_configs_this_encoder_cannot_build_are_refused(change, message):
    values = dict(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=48,
    )  # fmt: skip
    with pytest.raises(ValueError, match=message):
        ModernBertConfig.from_dict({**values, **change})


def test_a_bert_folder_is_refused_naming_the_right_loader(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="BertEncoder.from_pretrained"):
        ModernBertEncoder.from_pretrained(str(tmp_path))


def test_weights_without_the_biases_the_config_names_are_refused(tmp_path):
    folder, _ = fixture("tiny_model")
    shutil.copy(os.path.join(folder, "model.safetensors"), tmp_path)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    (tmp_path / "config.json").write_text(json.dumps({**config, "mlp_bias": True}))
    with pytest.raises(ValueError, match="missing tensor.*mlp.Wi.bias"):
        ModernBertEncoder.from_pretrained(str(tmp_path))


FRESH_PROCESS = """
import sys, numpy as np
import keras_bert, keras
model = keras.models.load_model(sys.argv[1])
ids = np.load(sys.argv[2])
print(type(model).__name__)
np.save(sys.argv[3], model.predict({"input_ids": ids["input_ids"], "input_mask": ids["input_mask"]},
        verbose=0)["sequence_output"])
"""


def test_a_saved_encoder_loads_in_a_fresh_process(loaded, tmp_path):
    folder, expected = fixture("tiny_mlm_biases")
    path = str(tmp_path / "modernbert.keras")
    loaded["tiny_mlm_biases"].save(path)
    out = str(tmp_path / "out.npy")
    result = python_script(FRESH_PROCESS, path, folder + "_outputs.npz", out, cwd=tmp_path)
    assert result.stdout.split()[-1] == "ModernBertEncoder"
    real = expected["input_mask"].astype(bool)
    assert np.abs(np.load(out) - expected["sequence_output"])[real].max() < PARITY


def test_keras_config_round_trip_builds_the_same_encoder(loaded):
    encoder = loaded["tiny_model"]
    again = ModernBertEncoder.from_config(encoder.get_config())
    assert again.config == encoder.config
    assert [w.shape for w in again.weights] == [w.shape for w in encoder.weights]
    assert keras.saving.get_registered_object("keras_bert>ModernBertEncoder") is ModernBertEncoder
