"""Losses that are means over the global batch, however tf.distribute replicas
and gradient-accumulation micro-batches split it.

A weighted mean (masked-LM positions, labelled word pieces) computed per
replica or per micro-batch is not the global one: the parts hold different
weight sums. Normalising each part's weighted sum by the weight sum of the
whole update (all micro-batches, all replicas) makes the parts' losses add up
to the global mean, which is what the all-reduce of their gradients sums.
"""

from __future__ import annotations

import tensorflow as tf
from keras import ops


def all_replicas_sum(value: tf.Tensor) -> tf.Tensor:
    """Sum over every replica of the running tf.distribute strategy (identity
    without one), so that a weighted mean is over the global batch."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def global_weight_sum(weights: tf.Tensor) -> tf.Tensor:
    """A weighted loss's normaliser: the weights of the whole (global) batch,
    read from this replica's share; no gradient flows through it."""
    local = ops.sum(ops.cast(weights, "float32"))
    return ops.maximum(ops.stop_gradient(all_replicas_sum(local)), 1e-5)
