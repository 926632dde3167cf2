"""Tiny task models and real reviews shared by the task-model tests."""

import os

import keras
import numpy as np

from keras_bert import BertConfig, BertEncoder
from keras_bert.assets import VOCAB_FILE
from keras_bert.models.classifier import BertClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor
from keras_bert.tasks.text_classification import read_text_examples

NAMES = ["rotten", "fresh"]


def tiny_encoder(seed=0):
    keras.utils.set_random_seed(seed)
    # No dropout: two runs of the same data must take the same steps.
    return BertEncoder(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def reviews(datasets_dir, count=16):
    examples = read_text_examples(os.path.join(datasets_dir, "rotten_tomatoes", "dev.tsv"))
    return examples.texts_a[:count], examples.labels[:count]


def classifier(seq_length=32, seed=0, preprocessor=True):
    pre = BertPreprocessor(VOCAB_FILE, seq_length=seq_length) if preprocessor else None
    return BertClassifier(tiny_encoder(seed), 2, dropout=0.0, label_names=NAMES, preprocessor=pre)


def assert_same_weights(a, b):
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_allclose(x.numpy(), y.numpy(), atol=1e-6, err_msg=x.path)
