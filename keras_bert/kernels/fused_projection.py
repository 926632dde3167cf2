"""Several projections of one input (attention's query, key and value) as one product.

Legend for shape comments: R = rows (every axis but the last), I = input
width, O = one projection's width, k = projections side by side.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from keras_bert.kernels.bias import bias_add
from keras_bert.kernels.dense import FastDense, project


def scaled(tensor: tf.Tensor, scale: float) -> tf.Tensor:
    """tensor * scale, in the tensor's dtype; a scale of 1 is no op at all."""
    return tensor if scale == 1.0 else tensor * tf.cast(scale, tensor.dtype)


def can_fuse(projections: Sequence[FastDense]) -> bool:
    """Whether `fused_projection` gives these projections' values: plain
    kernels and biases only. LoRA adapters and quantized kernels are not a
    kernel that can be put beside another; those run one by one."""
    return all(
        p.quantization_mode is None and not p.lora_enabled and p.bias is not None
        for p in projections
    )


def fused_projection(
    inputs: tf.Tensor, projections: Sequence[FastDense], scales: Sequence[float]
) -> tf.Tensor:
    """inputs (..., I) -> (..., k * O): `scaled(p(inputs), s)` for each
    projection p and scale s, side by side, from one product (R, I) x (I, k * O).

    Why, in training: the backward pass has one product for the input's
    gradient instead of k and their sum, and the outputs split into heads by
    one transpose (or gather) for all k. A scale is folded into its kernel and
    bias (I x O) rather than applied to the (R, O) output: bit for bit the
    scaled output when the scale is a power of 2 (1/8 at head size 64), within
    rounding elsewhere.

    Why not at inference: the kernels would be concatenated (and scaled)
    again on every call, a copy of every attention weight per request, a large
    share of a small batch's serving time; there each projection runs on its
    own (`can_fuse` also sends LoRA and quantized projections that way).
    """
    dtype = projections[0].compute_dtype
    kernel = tf.concat(
        [scaled(tf.cast(p.kernel, dtype), s) for p, s in zip(projections, scales)], axis=1
    )  # (I, k * O)
    bias = tf.concat(
        [scaled(tf.cast(p.bias, dtype), s) for p, s in zip(projections, scales)], axis=0
    )  # (k * O,)
    rows = tf.reshape(tf.cast(inputs, dtype), (-1, kernel.shape[0]))  # (R, I)
    outputs = bias_add(project(rows, kernel), bias)  # (R, k * O)
    if len(inputs.shape) == 2:
        return outputs
    return tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [kernel.shape[1]]], 0))
