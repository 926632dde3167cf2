"""Text -> model inputs and model outputs -> answers, inside the TensorFlow graph.

The same code runs in a task model's `fit` / `predict` on strings
(`keras_bert.models`) and in the exported SavedModels (`keras_bert.export`).
"""

import importlib

from keras_bert._lazy import submodule_getattr

_submodule = submodule_getattr(__name__, __path__)


def __getattr__(name: str):
    # `from keras_bert.preprocessing import BertPreprocessor`, still importing
    # TensorFlow only when it is asked for.
    if name == "BertPreprocessor":
        return importlib.import_module(f"{__name__}.preprocessor").BertPreprocessor
    return _submodule(name)
