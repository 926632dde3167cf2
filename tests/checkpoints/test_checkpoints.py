"""Checkpoint import, checked against an independent NumPy forward pass."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from keras_bert import BertConfig, BertEncoder, BertTokenizer, checkpoints
from keras_bert.models.encoder import load_encoder_and_heads

SENTENCES = [
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife.",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy "
    "disposition, seemed to unite some of the best blessings of existence.",
    "The film is a charming, funny and moving story.",
]


def numpy_bert(weights, config, input_ids, input_mask, segment_ids):
    """BERT forward pass written from the paper, on HuggingFace tensor names."""
    from math import erf, sqrt

    gelu = np.vectorize(lambda x: 0.5 * x * (1.0 + erf(x / sqrt(2.0))))

    def layer_norm(x, prefix):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * weights[prefix + ".weight"] + weights[
            prefix + ".bias"
        ]

    def linear(x, prefix):
        return x @ weights[prefix + ".weight"].T + weights[prefix + ".bias"]

    length = input_ids.shape[1]
    x = (
        weights["embeddings.word_embeddings.weight"][input_ids]
        + weights["embeddings.token_type_embeddings.weight"][segment_ids]
        + weights["embeddings.position_embeddings.weight"][:length]
    )
    x = layer_norm(x, "embeddings.LayerNorm")
    heads, size = (
        config["num_attention_heads"],
        config["hidden_size"] // config["num_attention_heads"],
    )
    bias = (1.0 - input_mask[:, None, None, :]) * -10000.0
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def split(t):
            return t.reshape(t.shape[0], length, heads, size).transpose(0, 2, 1, 3)

        q, k, v = (split(linear(x, p + f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = layer_norm(
            x + linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm"
        )
        ffn = linear(gelu(linear(x, p + "intermediate.dense")), p + "output.dense")
        x = layer_norm(x + ffn, p + "output.LayerNorm")
    return x


@pytest.fixture(scope="module")
def minilm(minilm_path):
    return BertEncoder.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def packed(real_vocab_file):
    tokenizer = BertTokenizer(real_vocab_file)
    return {k: v.numpy() for k, v in tokenizer.pack(SENTENCES, seq_length=48).items()}


def test_huggingface_matches_numpy_reference(minilm, minilm_path, packed):
    weights = {
        k: v.astype(np.float64)
        for k, v in load_file(os.path.join(minilm_path, "model.safetensors")).items()
    }
    with open(os.path.join(minilm_path, "config.json")) as f:
        config = json.load(f)
    expected = numpy_bert(
        weights,
        config,
        packed["input_ids"],
        packed["input_mask"].astype(np.float64),
        packed["segment_ids"],
    )
    actual = minilm(packed)["sequence_output"].numpy()
    mask = packed["input_mask"].astype(bool)
    difference = np.abs(actual[mask] - expected[mask]).max()
    print(f"largest absolute difference against the NumPy reference: {difference:.2e}")
    assert difference < 1e-4


def mean_pooled(encoder, packed):
    sequence = encoder(packed)["sequence_output"].numpy()
    mask = packed["input_mask"][..., None].astype("float32")
    pooled = (sequence * mask).sum(1) / mask.sum(1)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


def test_sentence_embeddings_rank_paraphrases(minilm, real_vocab_file):
    tokenizer = BertTokenizer(real_vocab_file)
    pairs = [
        ("Mr. Darcy was proud and disagreeable.", "Darcy behaved with pride and rudeness."),
        ("The soup was cold and tasteless.", "The food was cold and had no flavour."),
        ("She walked to the village in the rain.", "In the rain she went on foot to the town."),
    ]
    packed_a = {
        k: v.numpy() for k, v in tokenizer.pack([a for a, _ in pairs], seq_length=32).items()
    }
    packed_b = {
        k: v.numpy() for k, v in tokenizer.pack([b for _, b in pairs], seq_length=32).items()
    }
    similarity = mean_pooled(minilm, packed_a) @ mean_pooled(minilm, packed_b).T
    for i in range(len(pairs)):
        others = np.delete(similarity[i], i)
        assert similarity[i, i] > others.max() + 0.1, similarity


def write_tf1_checkpoint(tensors, prefix):
    """A checkpoint with the original variable names, written with tf.compat.v1."""
    graph = tf.Graph()
    with graph.as_default():
        variables = [
            tf.compat.v1.get_variable(name, initializer=value) for name, value in tensors.items()
        ]
        variables.append(tf.compat.v1.get_variable("global_step", initializer=np.int64(7)))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, prefix)


def test_tf1_checkpoint_loads_and_matches(minilm, minilm_path, tmp_path, packed):
    _, tensors = checkpoints.read_huggingface(minilm_path)
    tensors["cls/seq_relationship/output_weights"] = np.ones((2, 384), "float32")
    tensors["cls/seq_relationship/output_bias"] = np.zeros((2,), "float32")
    for name in ("bert/pooler/dense/bias", "bert/embeddings/LayerNorm/gamma"):
        tensors[name + "/adam_m"] = tensors[name]  # Optimizer slots are skipped.
    prefix = write_tf1_checkpoint(tensors, str(tmp_path / "bert_model.ckpt"))
    BertConfig.from_json_file(minilm_path).to_json_file(tmp_path / "bert_config.json")
    encoder, heads = load_encoder_and_heads(prefix)
    assert sorted(heads) == [
        "cls/seq_relationship/output_bias",
        "cls/seq_relationship/output_weights",
    ]
    np.testing.assert_allclose(
        encoder(packed)["sequence_output"], minilm(packed)["sequence_output"], atol=1e-6
    )
    # The folder form finds the latest checkpoint and bert_config.json beside it.
    again = BertEncoder.from_pretrained(str(tmp_path))
    np.testing.assert_allclose(
        again(packed)["pooled_output"], minilm(packed)["pooled_output"], atol=1e-6
    )


def test_bad_checkpoints_name_tensor_and_shapes(minilm, minilm_path):
    _, tensors = checkpoints.read_huggingface(minilm_path)
    encoder = BertEncoder(BertConfig.from_json_file(minilm_path))
    before = [w.numpy().copy() for w in encoder.weights]

    broken = dict(tensors)
    broken["bert/encoder/layer_3/intermediate/dense/kernel"] = np.zeros((384, 10), "float32")
    with pytest.raises(
        ValueError,
        match=r"layer_3/intermediate/dense/kernel has shape \(384, 10\) "
        r"but the model expects \(384, 1536\)",
    ):
        checkpoints.assign_encoder_weights(encoder, broken, "ckpt")
    missing = dict(tensors)
    del missing["bert/pooler/dense/bias"]
    with pytest.raises(ValueError, match="ckpt: missing tensor.*bert/pooler/dense/bias"):
        checkpoints.assign_encoder_weights(encoder, missing, "ckpt")
    extra = dict(tensors, **{"bert/encoder/layer_9/output/dense/kernel": np.zeros((1,))})
    with pytest.raises(ValueError, match="unexpected tensor.*layer_9"):
        checkpoints.assign_encoder_weights(encoder, extra, "ckpt")
    # Nothing was half-loaded.
    for old, new in zip(before, encoder.weights):
        np.testing.assert_array_equal(old, new.numpy())


def test_missing_files_are_named(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match="not a checkpoint folder; looked for a HuggingFace folder .config.json",
    ):
        BertEncoder.from_pretrained(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(
        FileNotFoundError, match="lacks model.safetensors .it has pytorch_model.bin"
    ):
        BertEncoder.from_pretrained(str(tmp_path))
