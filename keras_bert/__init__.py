"""keras_bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3."""

import importlib
import os

# Keras 3 must run on TensorFlow: the tokenizer, tf.data and tf.distribute are TF.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow's C++ start-up chatter (no CUDA here, CPU features) hides real output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_bert.config import BertConfig  # noqa: E402

__version__ = "0.1.0"

# The models and the tokenizer load on first use: importing Keras and
# TensorFlow takes seconds, which commands that need neither (or only the
# tokenizer) should not pay. `from keras_bert import BertEncoder` works as
# before; it also registers the Keras classes that `keras.models.load_model`
# needs (as does `import keras_bert.models`).
_LAZY = {
    "BertEncoder": "keras_bert.models",
    "BertClassifier": "keras_bert.models",
    "BertFeatureExtractor": "keras_bert.models",
    "BertSpanExtractor": "keras_bert.models",
    "BertTokenClassifier": "keras_bert.models",
    "BertTokenizer": "keras_bert.tokenizer",
}
_SUBPACKAGES = ("models", "layers")

__all__ = ["BertConfig", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))
