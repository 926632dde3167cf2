"""The fast paths: hand-written gradients and fused ops that give the values of
the plain TensorFlow / Keras ops they replace, faster (tests/test_fast_*.py
prove it; figures in recipes/benchmarks/README.md)."""

from keras_bert._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
