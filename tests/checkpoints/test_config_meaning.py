"""A checkpoint's config means what its source meant by it.

"gelu": google-research/bert's modeling.py computes the tanh approximation,
HuggingFace's the exact erf form; an original TF1 checkpoint is checked against
Model Garden's own converter and BERT encoder (tf-models-official, which runs
`bert_config.json`'s "gelu" as the original did). A HuggingFace field keras_bert
cannot compute (`position_embedding_type: relative_key`) is refused by name."""

import dataclasses
import json
import os

import numpy as np
import pytest
from original_checkpoints import TINY_CONFIG, original_bert_tensors, write_original_folder
from safetensors.numpy import save_file

from keras_bert import BertConfig, BertEncoder
from keras_bert.models.pretrainer import BertPretrainer

# No dropout, so Model Garden's and our forward passes compare exactly.
CONFIG = dict(TINY_CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _inputs():
    rng = np.random.default_rng(1)
    mask = np.array([[1] * 12, [1] * 7 + [0] * 5], np.int32)
    ids = (rng.integers(1, CONFIG["vocab_size"], size=(2, 12)) * mask).astype(np.int32)
    segments = np.array([[0] * 6 + [1] * 6, [0] * 4 + [1] * 3 + [0] * 5], np.int32)
    return ids, mask, segments


def _model_garden_sequence_output(prefix, tmp_path, ids, mask, segments):
    """The original checkpoint through Model Garden's converter into its BertEncoder."""
    import tensorflow as tf
    from official.legacy.bert import configs
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    config = configs.BertConfig.from_dict(CONFIG)
    converted = tmp_path / "model_garden"
    converter.convert_checkpoint(
        config, str(converted / "ckpt"), prefix, checkpoint_model_name="encoder"
    )
    encoder = converter._create_bert_model(config)
    status = tf.train.Checkpoint(encoder=encoder).restore(tf.train.latest_checkpoint(converted))
    status.assert_existing_objects_matched()
    outputs = encoder(
        dict(input_word_ids=ids, input_mask=mask, input_type_ids=segments), training=False
    )
    return np.asarray(outputs[0])  # (B, T, H) sequence output


def test_an_original_checkpoints_gelu_is_the_tanh_form_as_model_garden_runs_it(tmp_path):
    tensors = original_bert_tensors(CONFIG)
    for name in tensors:  # wide feed-forward inputs, where the two GELUs differ
        if name.endswith("intermediate/dense/kernel"):
            tensors[name] = tensors[name] * 3
    prefix = write_original_folder(str(tmp_path / "original"), tensors, CONFIG)
    ids, mask, segments = _inputs()
    theirs = _model_garden_sequence_output(prefix, tmp_path, ids, mask, segments)

    encoder = BertEncoder.from_pretrained(str(tmp_path / "original"))
    assert encoder.config.hidden_act == "gelu_approximate"
    features = dict(input_ids=ids, input_mask=mask, segment_ids=segments)
    real = mask[..., None].astype(bool)
    ours = np.asarray(encoder(features, training=False)["sequence_output"])
    np.testing.assert_allclose(np.where(real, ours, 0), np.where(real, theirs, 0), atol=1e-5)
    # The exact GELU on the same weights is off by far more: the test tells them apart.
    exact = BertEncoder(dataclasses.replace(encoder.config, hidden_act="gelu"))
    exact.set_weights(encoder.get_weights())
    off = np.asarray(exact(features, training=False)["sequence_output"]) - theirs
    assert np.abs(np.where(real, off, 0)).max() > 1e-4
    # The masked-LM head's transform follows the checkpoint too (modeling.py's get_activation).
    pretrainer = BertPretrainer.from_pretrained(str(tmp_path / "original"))
    assert pretrainer.masked_lm_head.activation == "gelu_approximate"


def test_the_tanh_gelu_formula_of_the_original():
    """modeling.py's gelu: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    from keras_bert.layers.activations import get_activation

    x = np.linspace(-6, 6, 241).astype(np.float32)
    original = 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    for fast in (True, False):
        ours = np.asarray(get_activation("gelu_approximate", fast_kernels=fast)(x))
        np.testing.assert_allclose(ours, original, atol=2e-6)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_approximate"])
def test_bert_config_json_written_here_reads_back_the_same_gelu(tmp_path, hidden_act):
    """keras_bert's own bert_config.json (a pretraining export's, the
    quickstart's): the original's "gelu" either way, so Google's code reads it,
    and `exact_gelu` marks the exact form, so keras_bert reads it back exactly."""
    config = dataclasses.replace(BertConfig.preset("tiny"), hidden_act=hidden_act)
    path = tmp_path / "bert_config.json"
    config.to_json_file(path)
    written = json.loads(path.read_text())
    assert written["hidden_act"] == "gelu"
    assert written.get("exact_gelu", False) is (hidden_act == "gelu")
    assert BertConfig.from_json_file(path) == config


def test_a_huggingface_config_gelu_is_the_exact_form(tmp_path):
    for hidden_act, meant in (
        ("gelu", "gelu"),
        ("gelu_new", "gelu_approximate"),
        ("gelu_pytorch_tanh", "gelu_approximate"),
    ):
        path = tmp_path / hidden_act / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(dict(TINY_CONFIG, hidden_act=hidden_act, model_type="bert")))
        assert BertConfig.from_json_file(path).hidden_act == meant


@pytest.mark.parametrize(
    "field, value",
    [
        ("position_embedding_type", "relative_key"),
        ("position_embedding_type", "relative_key_query"),
        ("layer_norm_eps", 1e-5),
        ("is_decoder", True),
    ],
)
def test_a_huggingface_field_keras_bert_does_not_compute_is_refused(tmp_path, field, value):
    folder = tmp_path / "hf"
    folder.mkdir()
    config = dict(TINY_CONFIG, model_type="bert", position_embedding_type="absolute")
    (folder / "config.json").write_text(json.dumps({**config, field: value}))
    save_file(
        {"embeddings.word_embeddings.weight": np.zeros((30, 32), np.float32)},
        str(folder / "model.safetensors"),
    )
    with pytest.raises(ValueError) as refused:
        BertEncoder.from_pretrained(str(folder))
    message = str(refused.value)
    assert message.startswith(os.path.join(str(folder), "config.json"))
    assert f"{field} is {value!r}" in message
