"""Left-to-right attention and its next-token objective (the paper's LTR ablation):
no position sees a later one, the config round-trips, the targets are the next tokens."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.config import BertConfig
from keras_bert.layers.embeddings import AttentionMaskBias
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.pretraining_data.next_token import next_token_targets

from harness import tiny_config

TINY = tiny_config(hidden_size=16, intermediate_size=32, max_position_embeddings=16)
LEFT_TO_RIGHT = dataclasses.replace(TINY, attention="left_to_right")


def _inputs(ids):
    ids = np.asarray(ids, np.int32)
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def test_no_position_attends_to_a_later_one():
    encoder = BertEncoder(LEFT_TO_RIGHT)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 40, (2, 10))
    changed = ids.copy()
    changed[:, 6:] = rng.integers(5, 40, (2, 4))  # every token after position 5
    before = encoder(_inputs(ids))
    after = encoder(_inputs(changed))
    for name in ("sequence_output",):
        np.testing.assert_allclose(after[name][:, :6], before[name][:, :6], atol=1e-6)
        assert np.abs(np.asarray(after[name][:, 6:]) - np.asarray(before[name][:, 6:])).max() > 1e-3
    for layer_before, layer_after in zip(before["encoder_outputs"], after["encoder_outputs"]):
        np.testing.assert_allclose(layer_after[:, :6], layer_before[:, :6], atol=1e-6)


def test_bidirectional_positions_see_later_tokens():
    encoder = BertEncoder(TINY)
    ids = np.arange(5, 15)[None]
    changed = ids.copy()
    changed[:, -1] = 30
    difference = (
        encoder(_inputs(changed))["sequence_output"] - encoder(_inputs(ids))["sequence_output"]
    )
    assert np.abs(np.asarray(difference[:, 0])).max() > 1e-4


def test_causal_bias_by_hand():
    bias = AttentionMaskBias(causal=True)(np.array([[1, 1, 0]], np.int32))
    # Query rows: a key is masked (-10000) if it is later or padding, never twice.
    expected = np.array([[0, -1, -1], [0, 0, -1], [0, 0, -1]], np.float32) * 10000
    np.testing.assert_array_equal(np.asarray(bias)[0, 0], expected)


def test_attention_round_trips_and_the_default_is_not_written(tmp_path):
    LEFT_TO_RIGHT.to_json_file(tmp_path / "ltr.json")
    assert BertConfig.from_json_file(tmp_path / "ltr.json") == LEFT_TO_RIGHT
    TINY.to_json_file(tmp_path / "default.json")
    # The original bert_config.json fields, and keras_bert's exact-GELU marker (the
    # original code reads "gelu" as its tanh form and ignores unknown fields).
    assert sorted(json.loads((tmp_path / "default.json").read_text())) == sorted(
        [
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "hidden_act",
            "exact_gelu",
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
            "max_position_embeddings",
            "type_vocab_size",
            "initializer_range",
        ]
    )
    with pytest.raises(ValueError, match="BertConfig.attention"):
        BertConfig(attention="right_to_left")


def test_next_token_targets_put_masked_tokens_back():
    features = {
        "input_ids": tf.constant([[2, 7, 4, 9, 3, 0], [2, 4, 4, 3, 0, 0]]),  # 4 = [MASK]
        "input_mask": tf.constant([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]]),
        "segment_ids": tf.zeros((2, 6), tf.int32),
        "masked_lm_positions": tf.constant([[2, 0], [1, 2]]),
        "masked_lm_ids": tf.constant([[8, 0], [5, 6]]),
        "masked_lm_weights": tf.constant([[1.0, 0.0], [1.0, 1.0]]),
    }
    out = next_token_targets(features)
    np.testing.assert_array_equal(out["input_ids"], [[2, 7, 8, 9, 3, 0], [2, 5, 6, 3, 0, 0]])
    np.testing.assert_array_equal(out["masked_lm_positions"], [[0, 1, 2, 3, 4]] * 2)
    np.testing.assert_array_equal(out["masked_lm_ids"], [[7, 8, 9, 3, 0], [5, 6, 3, 0, 0]])
    np.testing.assert_array_equal(out["masked_lm_weights"], [[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])


def test_lm_pretrainer_logits_are_the_encoders_next_token_logits():
    encoder = BertEncoder(LEFT_TO_RIGHT)
    pretrainer = BertPretrainer(encoder, objective="lm")
    assert pretrainer.next_sentence_head is None
    ids = np.array([[2, 7, 8, 9, 3, 0]], np.int32)
    features = {**_inputs(ids), "masked_lm_positions": np.array([[0, 1, 2, 3, 4]], np.int32)}
    logits = pretrainer(features)["masked_lm_logits"]  # (1, 5, V)
    sequence = encoder(_inputs(ids))["sequence_output"][:, :5]
    np.testing.assert_allclose(logits, pretrainer.masked_lm_head(sequence), atol=1e-5)


def test_lm_objective_needs_left_to_right_attention():
    with pytest.raises(ValueError, match="left_to_right"):
        BertPretrainer(BertEncoder(TINY), objective="lm")
    with pytest.raises(ValueError, match="left_to_right"):
        BertPretrainer(BertEncoder(LEFT_TO_RIGHT), objective="nsp")


def test_left_to_right_pooler_reads_the_last_real_token():
    encoder = BertEncoder(LEFT_TO_RIGHT)
    ids = np.array([[2, 7, 8, 9, 3, 0, 0], [2, 11, 12, 13, 14, 15, 3]], np.int32)
    inputs = dict(_inputs(ids), input_mask=(ids > 0).astype(np.int32))
    out = encoder(inputs)
    last = np.asarray(out["sequence_output"])[[0, 1], [4, 6]]  # each row's [SEP]
    np.testing.assert_allclose(out["pooled_output"], encoder.pooler(last), atol=1e-6)
