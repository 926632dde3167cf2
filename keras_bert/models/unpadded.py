"""The encoder's inference pass with the padding taken out of its per-token work.

A batch of texts is padded to its longest (or to the export's length), but
only attention mixes positions: the embeddings, the query / key / value and
output projections, the feed-forward layers and the LayerNorms treat every
position on its own, so on padding they compute values nobody reads. Here
those run on the real positions only, packed into rows (R, H), R = the real
tokens of the batch; attention scatters its queries, keys and values back to
(B, T) for the masked product, as the padded model does. A batch of 32 review
sentences is about half padding when padded to its longest (the inference
benchmark's reviews: 51 % real), and 80 % at a fixed 128.

Every real position's outputs are the padded model's (the same products on
the same rows, so equal to float rounding); padded positions of
`sequence_output` and `encoder_outputs` come out 0. Position 0 ([CLS], which
the pooler reads) always counts as real.

Used through `unpadded_inference()`: while it is on, `BertEncoder` called
outside training takes this path, so any task model built on an encoder
(classifier, tagger, span extractor) gets it without changes; the exports
trace their signatures under it (`export_saved_model(remove_padding=True)`).
Inference only: no dropout, no gradient path is meant through it.

Legend for shape comments: B = batch, T = sequence length, R = real
positions in the batch, H = hidden size, N = heads, D = head size,
L = number of layers.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import tensorflow as tf

from keras_bert.layers.pooling import pooled_token

if TYPE_CHECKING:
    from keras_bert.layers.transformer import TransformerBlock
    from keras_bert.models.encoder import BertEncoder

_enabled = False


def unpadded_inference_enabled() -> bool:
    return _enabled


@contextlib.contextmanager
def unpadded_inference() -> Iterator[None]:
    """`with unpadded_inference(): ...`: encoders called (or traced) inside,
    outside training, skip the padding (see the module's docstring)."""
    global _enabled
    before = _enabled
    _enabled = True
    try:
        yield
    finally:
        _enabled = before


class _Packing:
    """Where the real positions of a (B, T) batch go in the packed (R, ...) rows."""

    def __init__(self, input_mask: tf.Tensor) -> None:
        batch, length = tf.shape(input_mask)[0], tf.shape(input_mask)[1]
        real = tf.not_equal(input_mask, 0) | tf.equal(tf.range(length), 0)[None]  # (B, T)
        flat_real = tf.reshape(real, (-1,))  # (B * T,)
        self.shape = (batch, length)
        self.flat_rows = tf.cast(tf.where(flat_real)[:, 0], tf.int32)  # (R,) into B * T
        self.count = tf.size(self.flat_rows)  # R
        # Each padded position's packed row, or R: a zero row appended by `unpack`.
        running = tf.cumsum(tf.cast(flat_real, tf.int32)) - 1  # (B * T,)
        self.row_of = tf.reshape(tf.where(flat_real, running, self.count), (batch, length))

    def pack(self, padded: tf.Tensor) -> tf.Tensor:
        """(B, T, ...) -> (R, ...)."""
        flat = tf.reshape(padded, tf.concat([[-1], tf.shape(padded)[2:]], 0))
        return tf.gather(flat, self.flat_rows)

    def unpack(self, packed: tf.Tensor) -> tf.Tensor:
        """(R, W) -> (B, T, W), zeros at the padding."""
        with_zero_row = tf.concat([packed, tf.zeros_like(packed[:1])], 0)  # (R + 1, W)
        return tf.gather(with_zero_row, self.row_of)


def unpadded_encoder_outputs(encoder: BertEncoder, inputs: Mapping[str, tf.Tensor]
                             ) -> dict[str, Any]:
    """`encoder(inputs, training=False)`'s outputs, computed on the real positions."""
    input_mask = inputs["input_mask"]
    packing = _Packing(input_mask)
    input_ids, segment_ids = packing.pack(inputs["input_ids"]), packing.pack(inputs["segment_ids"])
    positions = packing.flat_rows % packing.shape[1]  # (R,)
    hidden = (encoder.token_embedding(input_ids) + encoder.segment_embedding(segment_ids)
              + tf.gather(encoder.position_embedding.embeddings, positions))  # (R, H)
    hidden = encoder.embeddings_layer_norm(hidden)
    mask_bias = encoder.attention_mask_bias(input_mask)  # (B, 1, 1, T) or (B, 1, T, T)
    packed_layers = []
    for block in encoder.transformer_blocks:
        hidden = _block(block, hidden, mask_bias, packing)  # (R, H)
        packed_layers.append(hidden)
    layers = [packing.unpack(layer) for layer in packed_layers]  # L x (B, T, H)
    pooled = encoder.pooler(pooled_token(layers[-1], input_mask, encoder.config.attention))
    return {"sequence_output": layers[-1], "pooled_output": pooled, "encoder_outputs": layers}


def _block(block: TransformerBlock, hidden: tf.Tensor, mask_bias: tf.Tensor,
           packing: _Packing) -> tf.Tensor:
    """`TransformerBlock.call` at inference on packed rows: (R, H) -> (R, H)."""
    attention = block.attention
    batch, length = packing.shape
    scale = 1.0 / math.sqrt(attention.head_size)

    def heads(projection, scale=1.0):  # (R, H) -> (B, N, T, D)
        rows = projection(hidden)
        if scale != 1.0:  # after the product, as the padded inference path scales
            rows = rows * tf.cast(scale, rows.dtype)
        padded = tf.reshape(packing.unpack(rows),
                            (batch, length, attention.num_heads, attention.head_size))
        return tf.transpose(padded, (0, 2, 1, 3))

    query, key, value = (heads(attention.query, scale), heads(attention.key),
                         heads(attention.value))
    scores = tf.linalg.matmul(query, key, transpose_b=True)  # (B, N, T, T)
    scores = scores + tf.cast(mask_bias, scores.dtype)
    probs = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1), value.dtype)
    context = tf.transpose(tf.matmul(probs, value), (0, 2, 1, 3))  # (B, T, N, D)
    context = tf.reshape(context, (batch, length, attention.num_heads * attention.head_size))
    attended = attention.attention_output(packing.pack(context))  # (R, H)
    hidden = block.attention_layer_norm(hidden + attended)
    feed_forward = block.ffn_output(block.intermediate_activation(block.intermediate(hidden)))
    return block.output_layer_norm(hidden + feed_forward)  # (R, H)
