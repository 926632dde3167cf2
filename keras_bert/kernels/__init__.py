"""The fast paths: hand-written gradients and fused ops that give the values of
the plain TensorFlow / Keras ops they replace, faster. One switch (`switch`: a
model option, `BertEncoder(fast_kernels=...)`, saved in its config) chooses
them, on by default; tests/kernels/test_fast_*.py prove fast == plain, values and
gradients; measured figures are in benchmarks/README.md.

- `dense`: `FastDense`, whose kernel gradient uses the layout CPUs are fast at
- `layer_norm`: `FastLayerNorm`, LayerNorm with its closed-form gradient
- `dropout`: `FastDropout`, 16 random bits per element instead of 32
- `gelu`: the exact GELU with its derivative written out, and XLA-compiled
- `fused_projection`: query, key and value as one product in training
- `masked_lm_loss`: the masked-LM output layer fused with its cross-entropy
"""

from keras_bert._lazy import submodule_getattr  # noqa: E402
from keras_bert.kernels.switch import FAST_KERNELS_ENV, fast_kernels_in_effect  # noqa: F401

__getattr__ = submodule_getattr(__name__, __path__)
