"""The fine-tuning datasets: readers, feature conversion, post-processing and official metrics."""

from keras_bert._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
