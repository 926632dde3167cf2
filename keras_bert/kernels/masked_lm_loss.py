"""The masked-LM cross-entropy over the whole vocabulary, with the prediction it implies.

Legend for shape comments: N = predictions (rows), H = hidden size,
V = vocabulary size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tensorflow as tf

if TYPE_CHECKING:
    import keras


def _checked_rows(labels, vocabulary, labels_name):
    """labels (...) -> (N,) int32; an id outside [0, V) raises an error naming
    `labels_name` (without XLA)."""
    row_labels = tf.reshape(tf.cast(labels, tf.int32), (-1,))  # (N,)
    tf.debugging.assert_non_negative(row_labels, message=f"{labels_name} holds a negative id")
    tf.debugging.assert_less(
        row_labels,
        vocabulary,
        message=(f"{labels_name} holds an id outside the vocabulary (>= its size)"),
    )
    return row_labels


def _softmax_loss(row_logits, row_labels, predicted):
    """float32 logits (N, V) -> softmax (N, V) and cross-entropy (N,).

    The log-normaliser comes from the softmax at the arg-max: log Z =
    logit_max - log p_max, and p_max >= 1 / V never underflows, so the loss
    stays exact however unlikely the label (reading p at the label instead
    would give -log(0) = inf below 1e-38).
    """
    probabilities = tf.nn.softmax(row_logits)  # (N, V)
    best_logit = tf.gather(row_logits, predicted, batch_dims=1)  # (N,)
    best_probability = tf.gather(probabilities, predicted, batch_dims=1)  # (N,)
    label_logit = tf.gather(row_logits, row_labels, batch_dims=1)  # (N,)
    return probabilities, (best_logit - label_logit) - tf.math.log(best_probability)


def cross_entropy_and_prediction(
    logits: tf.Tensor, labels: tf.Tensor, labels_name: str = "labels"
) -> tuple[tf.Tensor, tf.Tensor]:
    """logits (..., V) float, labels (...) int -> per-row cross-entropy
    (...) float32 and the arg-max prediction (...) int32. A label outside
    [0, V) raises an error naming `labels_name` (without XLA).

    Equal to `tf.nn.sparse_softmax_cross_entropy_with_logits` (and its
    gradient) to float rounding. Why not that op: over the masked-LM head's
    logits it is several times slower than oneDNN's softmax, which this
    builds on, arg-max included (the accuracy metric needs it anyway; figures
    in benchmarks/README.md). Training uses `tied_output_cross_entropy`, which also skips
    the (N, V) gradient of the logits.
    """
    logits = tf.cast(logits, tf.float32)
    vocabulary = tf.shape(logits)[-1]
    row_logits = tf.reshape(logits, (-1, vocabulary))  # (N, V)
    row_labels = _checked_rows(labels, vocabulary, labels_name)  # (N,)
    predicted = tf.argmax(row_logits, axis=-1, output_type=tf.int32)  # (N,)

    @tf.custom_gradient
    def cross_entropy(row_logits):
        probabilities, loss = _softmax_loss(row_logits, row_labels, predicted)

        def grad(upstream):  # (N,): d loss = softmax - one_hot(label)
            label_cells = tf.stack([tf.range(tf.shape(row_labels)[0]), row_labels], axis=1)
            return tf.tensor_scatter_nd_sub(
                probabilities * upstream[:, None], label_cells, upstream
            )

        return loss, grad

    loss = cross_entropy(row_logits)
    return tf.reshape(loss, tf.shape(labels)), tf.reshape(predicted, tf.shape(labels))


def tied_output_cross_entropy(
    hidden: tf.Tensor,
    table: tf.Tensor,
    bias: tf.Tensor | keras.Variable,
    labels: tf.Tensor,
    labels_name: str = "labels",
) -> tuple[tf.Tensor, tf.Tensor]:
    """The masked-LM head's output layer and loss in one: hidden (N, H) and the
    (tied) embedding table (V, H), both in the compute dtype, bias (V,) and
    labels (N,) -> cross-entropy (N,) float32 of softmax(hidden table^T +
    bias) and the arg-max prediction (N,) int32.

    Equal (values and gradients, to float rounding) to the logits, then
    `cross_entropy_and_prediction`. Why fused: the one-hot part of the
    gradient never meets the (N, V) softmax. d hidden = P table -
    table[label], d table = P^T hidden - (hidden scattered to the label
    rows), d bias = column sums of P - (1 at the labels), each row weighed
    by its upstream gradient, on the (N, H) side in float32. So the
    gradient skips two passes over (N, V): the row weighting and the
    one-hot subtraction. d table is the transposed (H, V) product
    (hidden^T P)^T in float32, P^T hidden in 16 bits, where TensorFlow's
    16-bit transpose is slow (figures in benchmarks/README.md).
    """
    vocabulary = tf.shape(table)[0]
    row_labels = _checked_rows(labels, vocabulary, labels_name)  # (N,)
    bias = tf.cast(bias, tf.float32)
    label_rows = row_labels[:, None]  # (N, 1): scatter / gather indices into the V rows
    # The arg-max is read from the logits inside, but it is an integer, not a
    # differentiated output: it leaves the function through this list.
    predicted_holder = []

    @tf.custom_gradient
    def output_and_loss(hidden, table, bias):
        # Logits in float32: the softmax over 30k classes loses too much in 16 bits.
        logits = tf.nn.bias_add(
            tf.cast(tf.matmul(hidden, table, transpose_b=True), tf.float32), bias
        )  # (N, V)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)  # (N,)
        predicted_holder.append(predicted)
        probabilities, loss = _softmax_loss(logits, row_labels, predicted)

        def grad(upstream):  # (N,)
            label_weight = tf.cast(upstream[:, None], hidden.dtype)  # (N, 1)
            if hidden.dtype != tf.float16:
                # Row weights on the (N, H) side: P itself (cast once in
                # bfloat16, whose exponent range is float32's) is the (N, V) operand.
                weighted_probabilities = tf.cast(probabilities, hidden.dtype)
                d_bias = tf.linalg.matvec(probabilities, upstream, transpose_a=True)  # (V,)
                weigh_rows = lambda rows: label_weight * rows  # noqa: E731
            else:
                # float16: weigh the rows in float32 first, so that a small
                # p * (loss-scaled) upstream does not underflow in the cast.
                weighted = probabilities * upstream[:, None]  # (N, V)
                d_bias = tf.reduce_sum(weighted, axis=0)
                weighted_probabilities = tf.cast(weighted, hidden.dtype)
                weigh_rows = lambda rows: rows  # noqa: E731
            d_bias = tf.tensor_scatter_nd_sub(d_bias, label_rows, upstream)  # (V,)
            d_hidden = weigh_rows(
                tf.matmul(weighted_probabilities, table)
            ) - label_weight * tf.gather(table, row_labels)  # (N, H)
            if hidden.dtype == tf.float32:
                d_table = tf.transpose(
                    tf.matmul(weigh_rows(hidden), weighted_probabilities, transpose_a=True)
                )  # (V, H)
            else:
                # 16 bits: the (H, V) transpose costs more than the transposed read.
                d_table = tf.matmul(weighted_probabilities, weigh_rows(hidden), transpose_a=True)
            d_table = tf.tensor_scatter_nd_sub(d_table, label_rows, label_weight * hidden)
            return d_hidden, d_table, d_bias

        return loss, grad

    loss = output_and_loss(hidden, table, bias)
    return loss, predicted_holder[0]


def plain_cross_entropy_and_prediction(
    logits: tf.Tensor, labels: tf.Tensor, labels_name: str = "labels"
) -> tuple[tf.Tensor, tf.Tensor]:
    """`cross_entropy_and_prediction` from TensorFlow's own ops: the plain path."""
    logits = tf.cast(logits, tf.float32)
    vocabulary = tf.shape(logits)[-1]
    row_logits = tf.reshape(logits, (-1, vocabulary))  # (N, V)
    row_labels = _checked_rows(labels, vocabulary, labels_name)  # (N,)
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(row_labels, row_logits)  # (N,)
    predicted = tf.argmax(row_logits, axis=-1, output_type=tf.int32)  # (N,)
    return tf.reshape(loss, tf.shape(labels)), tf.reshape(predicted, tf.shape(labels))


def loss_and_prediction(
    logits: tf.Tensor, labels: tf.Tensor, labels_name: str = "labels", fast_kernels: bool = True
) -> tuple[tf.Tensor, tf.Tensor]:
    """Cross-entropy and arg-max of logits (..., V): the fast kernel or the plain ops."""
    if fast_kernels:
        return cross_entropy_and_prediction(logits, labels, labels_name)
    return plain_cross_entropy_and_prediction(logits, labels, labels_name)
