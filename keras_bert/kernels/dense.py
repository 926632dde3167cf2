"""Dense projection whose kernel gradient is computed in the layout CPU kernels are fast at.

Legend for shape comments: R = rows (every axis but the last), I = input
width, O = output width (units).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert.kernels.bias import bias_add
from keras_bert.kernels.int8_dense import column_sums, int8_kernel_available, int8_project
from keras_bert.kernels.switch import FastKerasLayer


def _transposed_copy(matrix):
    """matrix (R, C) -> its transpose (C, R), written out in memory.

    Through a 3-D transpose: with a plain 2-D `tf.transpose` before the
    product, the product ran as slowly as with `transpose_a` (36.7 vs 36.3
    ms), as if TensorFlow's graph optimiser had folded it back into the flag.
    """
    rows, columns = tf.shape(matrix)[0], tf.shape(matrix)[1]
    return tf.reshape(tf.transpose(matrix[None], (2, 0, 1)), (columns, rows))


# Widths where the copy pays (see `kernel_gradient`): one side at most
# NARROW_WIDTH, the other at least WIDE_WIDTH, as in BERT's feed-forward
# kernels at hidden size 128-256 (bert-mini's 256 x 1024).
NARROW_WIDTH, WIDE_WIDTH = 256, 1024


def kernel_gradient(inputs: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
    """inputs (R, I) and upstream (R, O) -> inputs^T upstream (I, O).

    Why not always `tf.matmul(inputs, upstream, transpose_a=True)`: with
    oneDNN on CPUs, that product reads its left operand transposed and, for
    one side narrow (<= NARROW_WIDTH) and the other wide (>= WIDE_WIDTH), is
    markedly slower than the same product with the wider operand copied
    transposed and put on the left. Elsewhere the copy costs more than it
    saves or as much, so those keep the plain product (the measured widths
    are in benchmarks/README.md).
    """
    inputs_width, upstream_width = inputs.shape[-1], upstream.shape[-1]
    if (
        inputs_width is None
        or upstream_width is None
        or min(inputs_width, upstream_width) > NARROW_WIDTH
        or max(inputs_width, upstream_width) < WIDE_WIDTH
    ):
        return tf.matmul(inputs, upstream, transpose_a=True)
    if inputs_width > upstream_width:
        return tf.matmul(_transposed_copy(inputs), upstream)  # (I, R) x (R, O)
    return tf.transpose(tf.matmul(_transposed_copy(upstream), inputs))  # ((O, R) x (R, I))^T


@tf.custom_gradient
def project(inputs: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """inputs (R, I) x kernel (I, O) -> (R, O), with `kernel_gradient` backward."""

    def grad(upstream):  # (R, O)
        return (
            tf.matmul(upstream, kernel, transpose_b=True),  # (R, I)
            kernel_gradient(inputs, upstream),
        )  # (I, O)

    return tf.matmul(inputs, kernel), grad


# Private Keras that FastDense overrides or reads (tests/test_keras_internals.py):
# were one renamed, Keras would stop calling the override (int8 layers would
# lose oneDNN's kernel, and the column sums it reads would never be created).
_KERAS_HOOKS = ("_int8_call", "_int8_build")
if not all(callable(getattr(keras.layers.Dense, name, None)) for name in _KERAS_HOOKS):
    raise ImportError(
        f"keras_bert.kernels.dense overrides keras.layers.Dense's {', '.join(_KERAS_HOOKS)}, "
        f"which Keras {keras.__version__} does not all have; keras_bert is tested with "
        "Keras 3.15 (tests/test_keras_internals.py)"
    )


@keras.saving.register_keras_serializable(package="keras_bert")
class FastDense(FastKerasLayer, keras.layers.Dense):
    """keras.layers.Dense (same weights, config and values) whose kernel
    gradient is `kernel_gradient`'s, and whose bias is a BiasAdd that
    TensorFlow's CPU kernels fuse into the product. int8-quantized layers
    (`Model.quantize("int8")`) run their inference products on oneDNN's int8
    kernel (`int8_dense.int8_project`; they also store their kernel's column
    sums for it), other quantized layers and int8 training take Keras' own
    path; LoRA layers (`Dense.enable_lora`) keep the adapters apart, see
    `_lora_project`."""

    def call(self, inputs: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        if (
            not self.runs_fast_kernels
            or self.quantization_mode is not None
            or len(inputs.shape) < 2
        ):
            return super().call(inputs, training=training)
        # `_kernel`: the stored (frozen) kernel; Keras' `kernel` adds the LoRA product.
        kernel = tf.cast(self._kernel, self.compute_dtype)
        inputs = tf.cast(inputs, self.compute_dtype)
        # Rows in, rows out, with no reshape in between: TensorFlow fuses an
        # activation into MatMul + BiasAdd only where it follows them directly.
        rows = inputs if len(inputs.shape) == 2 else tf.reshape(inputs, (-1, kernel.shape[0]))
        outputs = self._lora_project(rows, kernel) if self.lora_enabled else project(rows, kernel)
        if self.bias is not None:
            outputs = bias_add(outputs, self.bias)
        if len(inputs.shape) != 2:
            outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.units]], 0))
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def _lora_project(self, rows: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
        """rows (R, I) -> rows W + (alpha / r) (rows A) B, (R, O); A (I, r), B (r, O).

        Keras' LoRA path multiplies by W + (alpha / r) A B, merged on every
        call: its backward pass then forms the full (I, O) kernel gradient to
        reach A and B. Kept apart, the frozen W needs no gradient (graph
        pruning drops it) and A, B get theirs through rank-r products.
        """
        scale = tf.cast(self.lora_alpha / self.lora_rank, self.compute_dtype)
        down = tf.matmul(rows, tf.cast(self.lora_kernel_a, self.compute_dtype))  # (R, r)
        up = tf.matmul(down, tf.cast(self.lora_kernel_b, self.compute_dtype))  # (R, O)
        return tf.matmul(rows, kernel) + scale * up

    # === int8 on oneDNN's kernel ===

    def _int8_call(self, inputs: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """Keras runs quantized layers through `quantized_call`, not `call`."""
        # Inference only: the kernel has no gradient (training takes Keras' path).
        if (
            not self.runs_fast_kernels
            or training
            or self.lora_enabled
            or len(inputs.shape) < 2
            or not int8_kernel_available()
        ):
            return super()._int8_call(inputs, training=training)
        rows = tf.reshape(tf.cast(inputs, "float32"), (-1, self._kernel.shape[0]))  # (R, I)
        outputs = int8_project(
            rows, self._kernel, self.kernel_scale, self.kernel_column_sums, self.bias
        )  # (R, O)
        outputs = tf.reshape(
            tf.cast(outputs, self.compute_dtype),
            tf.concat([tf.shape(inputs)[:-1], [self.units]], axis=0),
        )
        return outputs if self.activation is None else self.activation(outputs)

    def _int8_build(self, kernel_shape, config=None):
        super()._int8_build(kernel_shape, config)
        self.kernel_column_sums = self.add_weight(
            name="kernel_column_sums", shape=(self.units,), initializer="zeros", trainable=False
        )

    def quantize(self, mode=None, type_check=True, config=None):
        super().quantize(mode, type_check=type_check, config=config)
        if mode == "int8":
            self.kernel_column_sums.assign(column_sums(self._kernel.numpy()))

    @property
    def variable_serialization_spec(self):
        spec = dict(super().variable_serialization_spec)
        spec["int8"] = [*spec["int8"], "kernel_column_sums"]  # saved with the int8 kernel
        return spec
