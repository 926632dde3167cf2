import json

import pytest

from keras_bert import BertConfig
from keras_bert.config import PRESETS


def test_round_trip_original_json(tmp_path):
    config = BertConfig.preset("mini", vocab_size=1000)
    path = tmp_path / "bert_config.json"
    config.to_json_file(path)
    assert BertConfig.from_json_file(path) == config
    # The original field names, and `exact_gelu` for the exact GELU (the
    # original's BertConfig.from_dict sets whatever a file holds, reading "gelu").
    assert set(json.loads(path.read_text())) == {
        "exact_gelu",
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "max_position_embeddings",
        "type_vocab_size",
        "initializer_range",
    }


def test_reads_huggingface_config(minilm_path):
    config = BertConfig.from_json_file(minilm_path)
    assert (
        config.num_hidden_layers,
        config.hidden_size,
        config.num_attention_heads,
        config.intermediate_size,
        config.vocab_size,
    ) == (6, 384, 12, 1536, 30522)
    assert config.hidden_act == "gelu"


def test_presets():
    assert BertConfig.preset("base") == BertConfig()
    large = BertConfig.preset("large")
    assert (
        large.num_hidden_layers,
        large.hidden_size,
        large.num_attention_heads,
        large.intermediate_size,
    ) == (24, 1024, 16, 4096)
    small_berts = [name for name in PRESETS if name.startswith("L-")]
    assert len(small_berts) == 24
    config = BertConfig.preset("L-4_H-256_A-4")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (4, 256, 4)
    assert config.vocab_size == 30522
    with pytest.raises(ValueError, match="Unknown BERT preset 'huge'"):
        BertConfig.preset("huge")


@pytest.mark.parametrize(
    "field, value, message",
    [
        (
            "num_attention_heads",
            5,
            "hidden_size .768. must be divisible by num_attention_heads .5.",
        ),
        ("hidden_size", 0, "hidden_size must be a positive integer"),
        ("num_hidden_layers", -1, "num_hidden_layers must be a positive integer"),
        ("hidden_act", "sigmoidish", "hidden_act 'sigmoidish' is not one of"),
        ("hidden_dropout_prob", 1.5, "hidden_dropout_prob must be in"),
    ],
)
def test_invalid_configs_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**{field: value})


def test_missing_file_and_field(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BertConfig.from_json_file(tmp_path / "nope.json")
    path = tmp_path / "partial.json"
    path.write_text('{"vocab_size": 10}')
    with pytest.raises(ValueError, match="partial.json: missing field"):
        BertConfig.from_json_file(path)
