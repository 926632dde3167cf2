"""int8 products on oneDNN's u8 x s8 kernel, for quantized (exported) Dense layers.

Keras' own int8 Dense (`Model.quantize("int8")`) emits an int8 `MatMul` that
TensorFlow runs on a slow generic kernel: an int8 export so built is several
times slower than float32. TensorFlow's x86 Linux builds register oneDNN's int8 inner product as
`QuantizedMatMulWithBiasAndDequantize` (AVX512-VNNI where the CPU has it): float
out, a float bias added inside the kernel. It only takes activations as quint8
and weights as qint8, each with one scalar range, so:

- weights: Keras' quantization, int8 per output column, `w ~ q / kernel_scale`;
  the kernel is told the range [-127, 127] (a scale of 1) and the per-column
  scales are applied to its float output;
- activations: quantized per call and per row (one token's features, no
  calibration set), symmetrically: 63 levels each side of zero on the row's
  largest magnitude, stored with a zero point of 64, `x ~ step * (x_q - 64)`
  (step = max |x| / 63, x_q in 1 ... 127: 128 levels, not 256, see `LEVELS`),
  the kernel told [0, 255] (a scale of 1 as well). Per row, so a token's
  answer does not depend on the other texts of its request, and one outlier
  token does not coarsen every other token's levels: with one range per
  tensor, a MiniLM classifier lost 0.70 points of rotten_tomatoes dev accuracy
  on an AVX512-VNNI CPU (per row: benchmarks/results/cpu_serving.md);
- so `x w + b ~ step * (x_q q - 64 * column_sums) / kernel_scale + b`
  (column_sums = q summed over its input axis, stored at quantization time):
  the kernel computes `x_q q` and subtracts `64 * column_sums` as its bias,
  and the row scale, column scale and bias follow it. Why symmetric: a zero
  point per row (`x ~ lo + step * x_q`, on the row's min and max) adds a
  row-by-column term `lo * column_sums`, two more passes over every output
  and one over every input; the zero point here is the same for every row, so
  its term is a bias the kernel adds for free. In a one-off A/B of the two
  schemes in one process (docs/benchmarks.md, "CPU serving against ONNX
  Runtime") the MiniLM classifier served 478 against 435 reviews a second at
  batch 32, for the same dev accuracy (+0.08 points against float32 either way).

Why the ranges are fixed at [0, 255] and [-127, 127] rather than the real ones:
the kernel takes one scalar range per operand, and oneDNN's primitive cache is
keyed by the scales' values, so a per-call range would build a new primitive on
every request; and in MIN_FIRST mode TensorFlow 2.20's bias compensation is off
by the scales (the products came out wrong by orders of magnitude), so the
zero point's term goes in as the bias instead, in SCALED mode.

Legend for shape comments: R = rows (every axis but the last), I = input
width, O = output width (units).
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

# uint8 activations, told to the kernel as [0, 255] (a scale of 1)...
KERNEL_ACTIVATION_RANGE = 255.0
# ...but quantized to 1 ... 127 only: 63 levels each side of ZERO_POINT. Without
# VNNI (AVX2, AVX-512 before Cascade Lake) oneDNN's u8 x s8 product adds pairs
# of products in int16 with saturation (vpmaddubsw): 2 * 255 * 127 overflows
# it, 2 * 127 * 127 does not, so an export answers the same on every x86 CPU
# it is served on. Measured on a (37, 64) x (64, 96) product with an outlier
# feature, error / largest value: 256 levels 1.2 % with VNNI but 101 % on AVX2;
# 128 levels 2.1 % on both (3.1 % symmetric, as here).
LEVELS = 63.0
ZERO_POINT = 64.0
WEIGHT_LIMIT = 127.0  # int8 weights: -127 ... 127 (Keras' AbsMaxQuantizer range)


def quantize_rows(rows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """rows (R, I) float -> (x_q (R, I) quint8, step (R, 1)),
    x ~ step * (x_q - ZERO_POINT), each row on its own scale."""
    magnitude = tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True)  # (R, 1)
    # A zero row: any positive step gives x_q = ZERO_POINT and x = 0 exactly.
    step = tf.maximum(magnitude, 1e-30) / LEVELS
    # Every level is >= 0.5 before the cast, which truncates: + 0.5 rounds.
    levels = tf.cast(rows * (1.0 / step) + (ZERO_POINT + 0.5), tf.uint8)  # 1 ... 127
    return tf.bitcast(levels, tf.quint8), step


def column_sums(kernel_q: tf.Tensor | np.ndarray) -> np.ndarray:
    """kernel_q (I, O) int8 -> (O,) float32: each column's sum of levels, exact
    (|sum| <= 127 I, far below float32's 2^24 integers)."""
    return np.asarray(kernel_q, dtype=np.int64).sum(axis=0).astype(np.float32)


def int8_project(
    rows: tf.Tensor,
    kernel_q: tf.Tensor,
    kernel_scale: tf.Tensor,
    kernel_column_sums: tf.Tensor,
    bias: tf.Tensor | None = None,
) -> tf.Tensor:
    """rows (R, I) float32, kernel_q (I, O) int8 with w ~ kernel_q / kernel_scale (O,),
    kernel_column_sums (O,) = `column_sums(kernel_q)`, bias (O,) -> rows w + bias (R, O)."""
    rows_q, step = quantize_rows(rows)  # step (R, 1)
    products = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=rows_q,
        b=tf.bitcast(kernel_q, tf.qint8),
        bias=-ZERO_POINT * kernel_column_sums,  # added to the float products
        min_a=0.0,
        max_a=KERNEL_ACTIVATION_RANGE,
        min_b=-WEIGHT_LIMIT,
        max_b=WEIGHT_LIMIT,
        # Only read for quantized outputs; this variant returns float32.
        min_freezed_output=-1.0,
        max_freezed_output=1.0,
        Toutput=tf.float32,
        input_quant_mode="SCALED",
    )  # (R, O) = (x_q - ZERO_POINT) q
    outputs = products * step * (1.0 / kernel_scale)  # (R, O)
    return outputs if bias is None else outputs + bias


@functools.lru_cache(maxsize=None)
def int8_kernel_available() -> bool:
    """Whether this TensorFlow runs the oneDNN int8 kernel: registered in the x86
    Linux builds, absent elsewhere (it then fails with "Could not find device"),
    and with TF_ENABLE_ONEDNN_OPTS=0 it runs but returns nothing ("Missing 0-th
    output"). Checked once with a 1 x 2 product against its hand value."""
    try:
        with tf.init_scope():  # eagerly, also when first asked while a graph is traced
            rows = tf.constant([[0.0, 2.0]])  # step 2 / 63: levels 64 and 127
            kernel_q = tf.constant([[1], [-3]], tf.int8)
            value = int8_project(
                rows, kernel_q, tf.constant([1.0]), tf.constant(column_sums([[1], [-3]]))
            )
            return bool(abs(float(value[0, 0]) + 6.0) < 1e-3)  # 0 * 1 + 2 * -3
    except (tf.errors.OpError, RuntimeError):
        return False
