"""Tiny task models and real reviews shared by the task-model tests."""

import os

import keras
import numpy as np

from keras_bert import BertEncoder
from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets.text_classification import read_text_examples
from keras_bert.models.classifier import BertClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor

from harness import tiny_config

NAMES = ["rotten", "fresh"]


def tiny_encoder(seed=0, num_hidden_layers=1):
    keras.utils.set_random_seed(seed)
    # No dropout: two runs of the same data must take the same steps.
    return BertEncoder(tiny_config(vocab_size=30522, num_hidden_layers=num_hidden_layers))


def reviews(datasets_dir, count=16):
    examples = read_text_examples(os.path.join(datasets_dir, "rotten_tomatoes", "dev.tsv"))
    return examples.texts_a[:count], examples.labels[:count]


def classifier(seq_length=32, seed=0, preprocessor=True):
    pre = BertPreprocessor(VOCAB_FILE, seq_length=seq_length) if preprocessor else None
    return BertClassifier(tiny_encoder(seed), 2, dropout=0.0, label_names=NAMES, preprocessor=pre)


def assert_same_weights(a, b):
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_allclose(x.numpy(), y.numpy(), atol=1e-6, err_msg=x.path)
