"""The encoder with the padding taken out of its per-token work.

A batch of texts is padded to its longest (or to a fixed length), but only
attention mixes positions: the embeddings, the query / key / value and output
projections, the feed-forward layers, dropout and the LayerNorms treat every
position on its own, so on padding they compute values nobody reads. Here
those run on the real positions only, packed into rows (R, H), R = the real
tokens of the batch (`keras_bert.layers.packing.TokenPacking`); attention
puts its queries, keys and values back in the (B, T) layout for the masked
product, as the padded model does, cut at the batch's last real position. A
batch of 32 review sentences is about half padding when padded to its longest
(the inference benchmark's reviews: 51 % real), and 80 % at a fixed 128.

Every real position's outputs are the padded model's (the same products on
the same rows, so equal to float rounding); padded positions of
`sequence_output` and `encoder_outputs` come out 0. Position 0 ([CLS], which
the pooler reads) always counts as real. Gradients flow through the packing
(a gather), so training can use it too: a loss that reads only real positions
(classification, tagging with the padding weighted 0) gets the padded model's
gradients; dropout draws its masks over the packed rows instead.

Asked for by an argument of the call, never by a setting:
`encoder(features, remove_padding=True)`, or a task model's call
`model(features, remove_padding=True, read_positions=...)`, which Keras hands
on to the encoder inside the functional graph as it hands on `training`
(`BertEncoder.call`; its one forward pass is
`keras_bert.models.encoder.encoder_forward`). `TextTask`'s train / test /
predict steps pass them where their models allow it (`TextTask.step_arguments`),
exports trace their signatures with them (`export_saved_model(remove_padding=True)`).
Two replica threads, a traced function and a second model all see what their
own call says.

Legend for shape comments: B = batch, T = sequence length, R = real
positions in the batch, H = hidden size, L = number of layers.
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert.layers.pooling import last_real_positions

# The call arguments of the unpadded forward pass (`BertEncoder.call`). The
# encoder and keras_bert's models register them as Keras call-context
# arguments: a model's call hands them on to the encoder inside it.
UNPADDED_CALL_ARGUMENTS = ("remove_padding", "read_positions")


def may_pack_padding(model) -> bool:
    """Whether `model`'s training step may pack the padding out: not where
    shapes must be static (XLA, TPUs), nor across workers (the embeddings'
    sparse gradients are all-gathered, which needs one shape on every worker)."""
    strategy = tf.distribute.get_strategy()
    static = (tf.distribute.TPUStrategy, tf.distribute.MultiWorkerMirroredStrategy)
    return not (bool(getattr(model, "jit_compile", False)) or isinstance(strategy, static))


def read_rows(read_positions: tf.Tensor, input_mask: tf.Tensor, attention: str) -> tf.Tensor:
    """(B, T) int32, 1 at the real positions read and at the pooler's row (left to
    right the last real token; [CLS] `TokenPacking` keeps anyway)."""
    read = tf.not_equal(read_positions, 0) & tf.not_equal(input_mask, 0)
    if attention == "left_to_right":
        read |= last_real_positions(input_mask)
    return tf.cast(read, tf.int32)
