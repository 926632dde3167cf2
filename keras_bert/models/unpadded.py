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

Used through `BertEncoder.remove_padding()`: while it is on, that encoder's calls (and
traces) run their one forward pass (`keras_bert.models.encoder.encoder_forward`)
with a `TokenPacking` of the batch, so any task model built on an encoder gets it without
changes. The exports trace their signatures under it
(`export_saved_model(remove_padding=True)`); `TextTask`'s train / test steps
where their models allow it.

Legend for shape comments: B = batch, T = sequence length, R = real
positions in the batch, H = hidden size, L = number of layers.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import tensorflow as tf

from keras_bert.layers.pooling import last_real_positions


class PaddingRemoval:
    """One encoder's setting: whether its calls (and traces) skip the padding,
    and where its last block is read. Off but inside `on(...)`, which a task
    model's train / test step and an export's trace enter around one call: a
    functional task model cannot hand its encoder an extra argument, and a
    setting per encoder (not per process) lets two models differ."""

    def __init__(self) -> None:
        self.enabled = False
        self.read_positions: tf.Tensor | None = None

    @contextlib.contextmanager
    def on(self, read_positions: tf.Tensor | None = None) -> Iterator[None]:
        """Inside, the encoder skips the padding in its per-token layers (see
        the module's docstring).

        `read_positions` (B, T), nonzero where the caller reads the last layer's
        output (besides the pooler's row, always computed): the last block runs
        its queries, feed-forward layers and LayerNorms on those rows alone, and
        the other positions of `sequence_output` (and of the last
        `encoder_outputs`) come out 0. A tagger's loss reads its labelled
        pieces, a classifier only [CLS] (an all-zero tensor).
        """
        before = self.enabled, self.read_positions
        self.enabled, self.read_positions = True, read_positions
        try:
            yield
        finally:
            self.enabled, self.read_positions = before


def read_rows(read_positions: tf.Tensor, input_mask: tf.Tensor, attention: str) -> tf.Tensor:
    """(B, T) int32, 1 at the real positions read and at the pooler's row (left to
    right the last real token; [CLS] `TokenPacking` keeps anyway)."""
    read = tf.not_equal(read_positions, 0) & tf.not_equal(input_mask, 0)
    if attention == "left_to_right":
        read |= last_real_positions(input_mask)
    return tf.cast(read, tf.int32)
