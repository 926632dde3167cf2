"""Task data: readers, feature conversion, post-processing and metrics."""

from keras_bert._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
