"""A tiny `keras-bert finetune` output folder for the command tests that need
a model (random weights: answers are compared with the model's own methods)."""

import json
import os

from keras_bert import BertConfig, BertEncoder
from keras_bert.models.classifier import BertClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor

from conftest import TINY_VOCAB

CONFIG = BertConfig(
    vocab_size=len(TINY_VOCAB),
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=32,
)


def tiny_classifier_output(folder):
    """Writes model.keras, vocab.txt and finetune_config.json of a 2-class
    classifier (labels neg, pos; seq_length 16) into `folder`; returns its path."""
    folder = str(folder)
    vocab = os.path.join(folder, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(TINY_VOCAB) + "\n")
    model = BertClassifier(
        BertEncoder(CONFIG),
        num_classes=2,
        label_names=["neg", "pos"],
        preprocessor=BertPreprocessor(vocab, seq_length=16),
    )
    model.save(os.path.join(folder, "model.keras"))
    with open(os.path.join(folder, "finetune_config.json"), "w", encoding="utf-8") as f:
        json.dump({"task": "classify", "label_names": ["neg", "pos"], "seq_length": 16}, f)
    return folder
