"""Tiny checkpoints in google-research/bert's own format, written without our code:
the variable names and shapes of its modeling.py, saved by a tf.compat.v1 Saver
as run_pretraining.py, run_classifier.py and run_squad.py save them."""

import json
import os

import numpy as np
import tensorflow as tf

# A bert_config.json as the original reads it, small enough to write in a test.
TINY_CONFIG = {
    "vocab_size": 30,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 16,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def original_bert_tensors(config, seed=0):
    """Random weights under modeling.py's names (`bert/...`), in its layouts."""
    rng = np.random.default_rng(seed)
    hidden, inner = config["hidden_size"], config["intermediate_size"]

    def normal(*shape, scale=0.05):
        return (rng.standard_normal(shape) * scale).astype("float32")

    tensors = {
        "bert/embeddings/word_embeddings": normal(config["vocab_size"], hidden),
        "bert/embeddings/token_type_embeddings": normal(config["type_vocab_size"], hidden),
        "bert/embeddings/position_embeddings": normal(config["max_position_embeddings"], hidden),
        "bert/pooler/dense/kernel": normal(hidden, hidden, scale=0.2),
        "bert/pooler/dense/bias": normal(hidden),
    }
    norms = ["bert/embeddings/LayerNorm"]
    for i in range(config["num_hidden_layers"]):
        layer = f"bert/encoder/layer_{i}"
        for scope, (fan_in, fan_out) in {
            "attention/self/query": (hidden, hidden),
            "attention/self/key": (hidden, hidden),
            "attention/self/value": (hidden, hidden),
            "attention/output/dense": (hidden, hidden),
            "intermediate/dense": (hidden, inner),
            "output/dense": (inner, hidden),
        }.items():
            tensors[f"{layer}/{scope}/kernel"] = normal(fan_in, fan_out, scale=0.2)
            tensors[f"{layer}/{scope}/bias"] = normal(fan_out)
        norms += [f"{layer}/attention/output/LayerNorm", f"{layer}/output/LayerNorm"]
    for norm in norms:
        tensors[f"{norm}/gamma"] = 1.0 + normal(hidden, scale=0.1)
        tensors[f"{norm}/beta"] = normal(hidden)
    return tensors


def write_tf1_checkpoint(tensors, prefix):
    """A checkpoint with the original variable names, written with tf.compat.v1,
    with the Adam slots and global_step the original's training saves beside them."""
    graph = tf.Graph()
    with graph.as_default():
        for name, value in tensors.items():
            tf.compat.v1.get_variable(name, initializer=value)
            tf.compat.v1.get_variable(name + "/adam_m", initializer=np.zeros_like(value))
        tf.compat.v1.get_variable("global_step", initializer=np.int64(7))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, prefix)


def write_original_folder(folder, tensors, config=TINY_CONFIG, vocab=None):
    """A release-style folder: bert_config.json, bert_model.ckpt.* (no
    `checkpoint` index file, as in Google's zips) and vocab.txt if given."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        json.dump(config, f)
    prefix = write_tf1_checkpoint(tensors, os.path.join(folder, "bert_model.ckpt"))
    os.remove(os.path.join(folder, "checkpoint"))
    if vocab is not None:
        with open(os.path.join(folder, "vocab.txt"), "w") as f:
            f.write("\n".join(vocab) + "\n")
    return prefix
