"""Sentence embeddings: mean-pooled, L2-normalised encoder outputs."""

from __future__ import annotations

import os
from typing import Iterator, Sequence

import numpy as np
import tensorflow as tf

from keras_bert.assets import VOCAB_FILE as SHIPPED_VOCAB


def mean_pool(sequence_output: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
    """(B, T, H), (B, T) -> (B, H) L2-normalised mean of the real positions."""
    mask = tf.cast(input_mask, sequence_output.dtype)[..., tf.newaxis]
    pooled = tf.reduce_sum(sequence_output * mask, axis=1) / tf.maximum(
        tf.reduce_sum(mask, axis=1), 1.0)
    return tf.math.l2_normalize(pooled, axis=-1)


def encode_sentences(sentences: Sequence[str], init_checkpoint: str | None = None,
                     vocab_file: str | None = None, preset: str = "tiny",
                     seq_length: int = 128) -> Iterator[tuple[str, list[str], np.ndarray]]:
    """Yields (sentence, word pieces, embedding) for each sentence."""
    from keras_bert import BertConfig, BertEncoder, BertTokenizer
    from keras_bert.checkpoints import load_pretrained
    if init_checkpoint:
        encoder = load_pretrained(init_checkpoint)
        candidate = os.path.join(init_checkpoint, "vocab.txt")
        if vocab_file is None and os.path.isdir(init_checkpoint) and os.path.exists(candidate):
            vocab_file = candidate
    else:
        encoder = BertEncoder(BertConfig.preset(preset))
    if seq_length > encoder.config.max_position_embeddings:
        raise ValueError(f"seq_length {seq_length} exceeds the encoder's "
                         f"{encoder.config.max_position_embeddings} positions; use at most that")
    tokenizer = BertTokenizer(vocab_file or SHIPPED_VOCAB)
    features = tokenizer.pack(tf.constant(sentences), seq_length=seq_length)
    embeddings = mean_pool(encoder(features)["sequence_output"], features["input_mask"]).numpy()
    for sentence, ids, embedding in zip(sentences, tokenizer.tokenize(sentences).to_list(), embeddings):
        yield sentence, [tokenizer.vocab[i] for i in ids], np.asarray(embedding)
