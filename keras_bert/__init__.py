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
import sys

# Keras 3 must run on TensorFlow: the tokenizer (tensorflow-text) runs inside
# the TensorFlow graph, and tf.data and tf.distribute are TF. An empty
# KERAS_BACKEND is no choice (Keras then reads keras.json).
if not os.environ.get("KERAS_BACKEND"):
    os.environ["KERAS_BACKEND"] = "tensorflow"


def _check_keras_backend() -> None:
    """Refuses another Keras backend now, naming it, rather than building
    models that half work on it. Keras, once imported, reports its backend
    (from KERAS_BACKEND, else keras.json); before, KERAS_BACKEND decides."""
    keras = sys.modules.get("keras")
    backend = getattr(getattr(keras, "backend", None), "backend", None)
    if callable(backend):
        found = backend()
        where = (
            "Keras is already imported with the {!r} backend (from KERAS_BACKEND, "
            'else the "backend" of keras.json in $KERAS_HOME or ~/.keras)'
        )
        fix = "import keras_bert before keras, or set KERAS_BACKEND=tensorflow"
    else:
        found = os.environ["KERAS_BACKEND"]
        where = "KERAS_BACKEND={} selects another backend"
        fix = "set KERAS_BACKEND=tensorflow (or unset it)"
    if found != "tensorflow":
        raise ImportError(
            "keras_bert needs Keras' TensorFlow backend (its tokenizer, tensorflow-text, "
            f"runs inside the TensorFlow graph), but {where.format(found)}: {fix} before "
            "Python imports keras_bert, e.g. `KERAS_BACKEND=tensorflow python ...`"
        )


_check_keras_backend()

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
    "ModernBertConfig": "keras_bert.modernbert_config",
    "ModernBertEncoder": "keras_bert.models.modernbert",
    "ModernBertMaskedLM": "keras_bert.models.modernbert_masked_lm",
    "ModernBertPretrainer": "keras_bert.models.modernbert_pretrainer",
    "ModernBertElectraPretrainer": "keras_bert.models.modernbert_electra",
    "BertPretrainer": "keras_bert.models.pretrainer",
    "ElectraDiscriminator": "keras_bert.models.electra",
    "ElectraGenerator": "keras_bert.models.electra",
    "ElectraPretrainer": "keras_bert.models.electra_pretrainer",
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
