"""Text: the in-graph WordPiece tokenizer and its Unicode tables (`tokenizer`),
vocabulary learning (`vocab`) and corpus preparation (`corpus`)."""

from keras_bert._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
