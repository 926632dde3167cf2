"""Text -> model inputs and model outputs -> answers, inside the TensorFlow graph.

The same code runs in a task model's `fit` / `predict` on strings
(`keras_bert.models`) and in the exported SavedModels (`keras_bert.export`).
"""

from keras_bert._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
