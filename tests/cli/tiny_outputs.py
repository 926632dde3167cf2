"""A tiny `keras-bert finetune` output folder for the command tests that need
a model (random weights: answers are compared with the model's own methods)."""

import json
import os

from keras_bert import BertEncoder
from keras_bert.models.classifier import BertClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor

from conftest import TINY_VOCAB
from harness import small_config

CONFIG = small_config(vocab_size=len(TINY_VOCAB), num_hidden_layers=1, max_position_embeddings=32)


def tiny_output(folder, build, finetune_config):
    """Writes model.keras (`build(preprocessor)`: a task model on CONFIG,
    seq_length 16), vocab.txt and finetune_config.json into `folder`;
    returns its path."""
    folder = str(folder)
    vocab = os.path.join(folder, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(TINY_VOCAB) + "\n")
    build(BertPreprocessor(vocab, seq_length=16)).save(os.path.join(folder, "model.keras"))
    with open(os.path.join(folder, "finetune_config.json"), "w", encoding="utf-8") as f:
        json.dump({**finetune_config, "seq_length": 16}, f)
    return folder


def tiny_classifier_output(folder):
    """A 2-class classifier (labels neg, pos; seq_length 16) in `folder`."""
    names = ["neg", "pos"]
    return tiny_output(
        folder,
        lambda pre: BertClassifier(BertEncoder(CONFIG), 2, label_names=names, preprocessor=pre),
        {"task": "classify", "label_names": names},
    )
