"""The exact (erf) GELU of BERT with its derivative written out, plain and
XLA-compiled, and in the form TensorFlow fuses into the product before it."""

from __future__ import annotations

import math

import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_MINUS_SQRT_HALF = -_SQRT_HALF
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_cdf(x):  # Phi(x), as TensorFlow's exact gelu writes it
    return 0.5 * tf.math.erfc(x * tf.cast(_MINUS_SQRT_HALF, x.dtype))


def _gelu_cdf_by_erf(x):  # Phi(x) through Erf, which the CPU vectorises (Erfc it does not)
    return (tf.math.erf(x * _SQRT_HALF) + 1.0) * 0.5


def _gelu_derivative(x, cdf, upstream):  # upstream * (Phi(x) + x * phi(x))
    pdf = tf.exp(-0.5 * tf.square(x)) * tf.cast(_INV_SQRT_2PI, x.dtype)
    return upstream * (cdf + x * pdf)


@tf.custom_gradient
def gelu_exact(x: tf.Tensor) -> tf.Tensor:
    """The exact GELU x * Phi(x), values bit-identical to Keras' exact gelu in
    float32, with its derivative Phi(x) + x * phi(x) written out.

    Why: autodiff through erfc builds about twice as many full-size (B, T, F)
    elementwise ops for the backward pass, which nothing fuses without XLA.
    In bfloat16 / float16 both directions compute in float32 and round once:
    TensorFlow's CPU Erfc and Exp have no vectorised bfloat16 kernels (a
    mixed_bfloat16 MiniLM fit step spent 32.5 ms in Erfc against 9.9 ms in
    float32, and the derivative's Exp, Square and Mul 2x theirs), and one
    rounding is closer to the exact value than a chain of bfloat16 ones.
    There Phi comes from Erf, not Erfc: 1.7x faster on CPU (2.8 against
    1.6 ms on a (960, 1536) float32 tensor, AVX-512), and its few float32
    ulps of difference in the far negative tail (GELU about 0) are far below
    the one rounding to 16 bits.
    """
    wide = tf.cast(x, tf.float32)  # no op in float32
    cdf = _gelu_cdf_by_erf(wide) if x.dtype in (tf.bfloat16, tf.float16) else _gelu_cdf(wide)

    def gradient(upstream):
        return tf.cast(_gelu_derivative(wide, cdf, tf.cast(upstream, tf.float32)), x.dtype)

    return tf.cast(wide * cdf, x.dtype), gradient


@tf.function(jit_compile=True)
def _compiled_gelu(x):
    return x * _gelu_cdf(x)


@tf.function(jit_compile=True)
def _compiled_gelu_gradient(x, upstream):
    return _gelu_derivative(x, _gelu_cdf(x), upstream)


@tf.custom_gradient
def gelu_exact_compiled(x: tf.Tensor) -> tf.Tensor:
    """`gelu_exact` with forward and gradient each one XLA-compiled kernel.

    Why: TensorFlow runs GELU as 4 element-wise ops forward and 7 backward,
    each a pass over the (B * T, F) intermediate activations; compiled, each
    direction is one pass, and the gradient recomputes Phi(x) from x instead
    of keeping it. Values differ from `gelu_exact` by XLA's erfc (a few 1e-7).
    For training only: served graphs keep `gelu_exact`, which needs no XLA at
    load time.
    """
    return _compiled_gelu(x), lambda upstream: _compiled_gelu_gradient(x, upstream)


def gelu_exact_fused(x: tf.Tensor) -> tf.Tensor:
    """The exact GELU as (erf(x / sqrt 2) + 1) / 2 * x, for inference.

    Why: written in exactly this order after a MatMul + BiasAdd, it is a
    pattern of TensorFlow's grappler remapper, which folds the whole chain
    into the product (oneDNN's `_MklFusedMatMul` with a `GeluExact` post-op):
    one pass instead of four element-wise ops over the (R, F) feed-forward
    activations, and Erf is vectorised where the Erfc of `gelu_exact` is not.
    Without oneDNN it runs as those four ops. Values within about 1e-6 of
    `gelu_exact` (the erf form loses a few ulps in the negative tail, where
    GELU is near 0); gradients by autodiff, correct but not fast: training
    uses `gelu_exact` / `gelu_exact_compiled`.
    """
    return _gelu_cdf_by_erf(x) * x


def fast_gelu(rows: tf.Tensor, training: bool | None, varying_rows: bool = False) -> tf.Tensor:
    """The exact GELU on a product's output rows (R, F), in the form for the step.

    Inference: `gelu_exact_fused`, the form the CPU's product takes as a
    post-op. Training: `gelu_exact_compiled`, XLA-compiled with its gradient,
    except where the row count R changes nearly every step (`varying_rows`:
    the padding packed out, R = the batch's real tokens): XLA compiles once per
    shape, so the compiles would never pay off; there, `gelu_exact`, the plain
    ops with the derivative written out.
    """
    if not training:
        return gelu_exact_fused(rows)
    return gelu_exact(rows) if varying_rows else gelu_exact_compiled(rows)
