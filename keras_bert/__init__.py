"""keras_bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3.

Submodules and the public classes load on first use: importing Keras and
TensorFlow takes seconds, which commands that need neither (or only the
tokenizer) should not pay. `keras_bert.checkpoints`, `keras_bert.export`,
`from keras_bert import BertEncoder` and the like all work after a plain
`import keras_bert`, which also makes every keras_bert class known to
`keras.models.load_model` (`keras_bert._registration`).
"""

import importlib
import os

# Keras 3 must run on TensorFlow: the tokenizer, tf.data and tf.distribute are TF.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow's C++ start-up chatter (no CUDA here, CPU features) hides real output;
# KERAS_BERT_VERBOSE=1 (or a command's --verbose) keeps it.
_VERBOSE = os.environ.get("KERAS_BERT_VERBOSE", "").lower() in ("1", "true", "yes")
_QUIETED_TENSORFLOW = "TF_CPP_MIN_LOG_LEVEL" not in os.environ and not _VERBOSE
if _QUIETED_TENSORFLOW:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

from keras_bert._lazy import submodule_getattr, submodule_names  # noqa: E402
from keras_bert._registration import register_serializable_classes  # noqa: E402
from keras_bert.config import BertConfig  # noqa: E402
from keras_bert.version import __version__  # noqa: E402

# Public classes: name -> the module that defines it.
_LAZY_CLASSES = {
    "BertEncoder": "keras_bert.models",
    "BertClassifier": "keras_bert.models",
    "BertFeatureExtractor": "keras_bert.models",
    "BertSentenceEncoder": "keras_bert.models",
    "BertSpanExtractor": "keras_bert.models",
    "BertTokenClassifier": "keras_bert.models",
    "BertPretrainer": "keras_bert.models.pretrainer",
    "BertPreprocessor": "keras_bert.preprocessing.preprocessor",
    "BertTokenizer": "keras_bert.text.tokenizer",
}
_SUBMODULES = submodule_names(__path__)
register_serializable_classes()
_submodule = submodule_getattr(__name__, __path__)

__all__ = ["BertConfig", "__version__", *_LAZY_CLASSES, *_SUBMODULES]


def __getattr__(name: str):
    if name in _LAZY_CLASSES:
        value = getattr(importlib.import_module(_LAZY_CLASSES[name]), name)
    else:
        value = _submodule(name)  # AttributeError for anything else
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
