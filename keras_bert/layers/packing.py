"""The rows a Transformer block runs on: the padded (B, T) layout, the real
positions packed into rows (R, ...), or only the positions whose output is read.

`row_layout` picks the layout of one block call (`PaddedRows`, `PackedRows`):
which rows are the block's queries, and how attention splits its projections
into heads and merges them back. The block's code is the same for every layout.

Packed rows: every layer of a Transformer block but attention treats each position on its
own, so it can run on the real positions alone: `TokenPacking` says where
they go (`pack`) and how to put them back in the batch's layout (`unpack`)
for attention. `keras_bert.models.unpadded` runs the encoder this way.

Attention's heads go between the two layouts in one gather each way
(`unpack_heads`, `pack_heads`) instead of an unpack, a reshape and a
transpose: on the CPU a small transpose costs about four times a gather of the
same rows (oneDNN's reorder, 39 against 11 microseconds for one MiniLM head
split at batch 1), and the exported classifier ran 24 of them per request.

Attention's layout spans only the batch's last real position (`span`, S <= T):
past it every row is padding, whose keys the mask gives a weight of 0 and
whose queries nobody reads, so the (B, N, S, S) products and softmax are the
(B, N, T, T) ones without their all-padding columns. A batch of reviews padded
to a fixed 128 attends over its longest review instead (~50 positions for 32
rotten_tomatoes reviews), as if padded to its longest.

Legend for shape comments: B = batch, T = sequence length, R = real
positions in the batch, W = any width, N = attention heads, D = head size,
k = projections side by side, S = the span attention needs, Q = the
positions whose output a block returns (its queries), H = N * D.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from keras import ops


class TokenPacking:
    """Where the real positions of `input_mask` (B, T) go in the packed rows.

    Position 0 ([CLS], which the pooler reads) always counts as real, so a
    row's pooled output never depends on padding. Rows are in the batch's
    order, positions in order within a row.
    """

    def __init__(self, input_mask: tf.Tensor, span: tf.Tensor | None = None) -> None:
        """`span`: attention's length S (default: one past the last real position
        of any row); a second packing of some of these positions (a last block's
        queries) takes the first's, so both sides of attention line up."""
        batch, length = tf.shape(input_mask)[0], tf.shape(input_mask)[1]
        real = tf.not_equal(input_mask, 0) | tf.equal(tf.range(length), 0)[None]  # (B, T)
        flat_real = tf.reshape(real, (-1,))  # (B * T,)
        self.shape = (batch, length)
        self.flat_rows = tf.cast(tf.where(flat_real)[:, 0], tf.int32)  # (R,) into B * T
        self.count = tf.size(self.flat_rows)  # R
        self.span = tf.reduce_max(self.positions) + 1 if span is None else span  # S
        # Each position's packed row, or R at padding: the zero row `unpack` appends.
        running = tf.cumsum(tf.cast(flat_real, tf.int32)) - 1  # (B * T,)
        self.row_of = tf.reshape(tf.where(flat_real, running, self.count), (batch, length))
        self._head_indices = {}  # gather indices of `unpack_heads` / `pack_heads`, built once

    @property
    def positions(self) -> tf.Tensor:
        """(R,) each packed row's position in its sequence."""
        return self.flat_rows % self.shape[1]

    @property
    def sequences(self) -> tf.Tensor:
        """(R,) each packed row's sequence in the batch."""
        return self.flat_rows // self.shape[1]

    def pack(self, padded: tf.Tensor) -> tf.Tensor:
        """(B, T, ...) -> (R, ...)."""
        flat = tf.reshape(padded, tf.concat([[-1], tf.shape(padded)[2:]], 0))
        return tf.gather(flat, self.flat_rows)

    def unpack(self, packed: tf.Tensor) -> tf.Tensor:
        """(R, W) -> (B, T, W), zeros at the padding."""
        # The gather's gradient is sparse (IndexedSlices); the Reshape (no copy)
        # turns it dense before it reaches the op that made `packed` (a
        # LayerNorm). Its Python gradient densified it at its first op anyway,
        # but the gradient a SavedModel saves for it takes dense tensors only:
        # without this, a head trained on an export (Keras' TFSMLayer) fails
        # with "missing a required argument".
        packed = tf.reshape(packed, tf.shape(packed))
        with_zero_row = tf.concat([packed, tf.zeros_like(packed[:1])], 0)  # (R + 1, W)
        return tf.gather(with_zero_row, self.row_of)

    def attention_mask(self, input_mask: tf.Tensor) -> tf.Tensor:
        """(B, T) -> (B, S): the mask over the positions attention spans."""
        return input_mask[:, : self.span]

    def unpack_heads(self, packed: tf.Tensor, num_heads: int, groups: int = 1) -> tf.Tensor:
        """(R, k * N * D) -> (k, B, N, S, D), or (B, N, S, D) for `groups` k = 1:
        the rows split into heads in attention's layout, in one gather.

        Padding positions hold real row 0's values, not zeros: as keys and
        values the mask bias gives them a weight of exactly 0 after softmax,
        and their query rows are never packed back (`pack_heads`), so nothing
        reads them (and their gradients are exactly 0)."""
        head_size = packed.shape[-1] // (groups * num_heads)
        rows = tf.reshape(packed, (-1, head_size))  # (R * k * N, D)
        key = ("unpack", num_heads, groups)
        if key not in self._head_indices:
            group = tf.range(groups)[:, None, None, None] * num_heads  # (k, 1, 1, 1)
            head = tf.range(num_heads)[None, None, :, None]  # (1, 1, N, 1)
            row_of = self.row_of[:, : self.span]  # (B, S)
            real_row = tf.where(row_of < self.count, row_of, 0)  # padding: row 0
            row = real_row[None, :, None, :] * (groups * num_heads)  # (1, B, 1, S)
            index = row + group + head  # (k, B, N, S)
            # Where each row of `rows` sits in that layout, (R, k, N) flattened:
            # the gradient gathers it back from there.
            sequence, position = self.sequences, self.positions  # (R,) each
            group_offset = tf.range(groups)[None, :, None] * self.shape[0]  # (1, k, 1)
            place = (group_offset + sequence[:, None, None]) * num_heads + tf.range(num_heads)
            place = place * self.span + position[:, None, None]  # (R, k, N) into k * B * N * S
            self._head_indices[key] = (
                index if groups > 1 else index[0],
                tf.reshape(place, (-1,)),
            )
        index, place = self._head_indices[key]
        return gather_rows(rows, index, place)

    def pack_heads(self, heads: tf.Tensor) -> tf.Tensor:
        """(B, N, S, D) -> (R, N * D): the real positions of attention's output
        with their heads side by side, in one gather."""
        num_heads, head_size = heads.shape[1], heads.shape[3]
        key = ("pack", num_heads)
        if key not in self._head_indices:
            sequence, position = self.sequences, self.positions  # (R,) each
            head = tf.range(num_heads)[None]  # (1, N)
            index = (sequence[:, None] * num_heads + head) * self.span + position[:, None]
            # Each (B, N, S) position's gathered row, or past the R * N rows (the
            # gradient's appended zero row) where nothing was gathered.
            row_of = self.row_of[:, None, : self.span]  # (B, 1, S)
            real = row_of < self.count
            place = tf.where(real, row_of * num_heads + head[..., None], self.count * num_heads)
            self._head_indices[key] = (index, tf.reshape(place, (-1,)))  # (R, N), (B * N * S,)
        index, place = self._head_indices[key]
        rows = gather_rows(tf.reshape(heads, (-1, head_size)), index, place, zero_row=True)
        return tf.reshape(rows, (-1, num_heads * head_size))  # (R, N * D)


def gather_rows(
    params: tf.Tensor, index: tf.Tensor, place: tf.Tensor, zero_row: bool = False
) -> tf.Tensor:
    """tf.gather(params (P, D), index), whose gradient is a gather as well.

    `place` (P,): where in the gathered output (index's rows, flattened) each
    row of `params` was taken to, or, with `zero_row`, one past its end for a
    row nothing took (its gradient is 0). Why: a gather's own gradient is a
    scatter-add (UnsortedSegmentSum), which cost 18 ms of a 300 ms MiniLM fit
    step for the heads' gathers; these gathers take each real row once, and
    every other place they fill (padding, holding row 0's values) gets a
    gradient of exactly 0 (the mask's weight after softmax, or a query nobody
    reads), so gathering back from one place each is the same sum.
    """

    @tf.custom_gradient
    def gather(params):
        def gradient(upstream):
            flat = tf.reshape(upstream, (-1, params.shape[-1]))
            if zero_row:
                flat = tf.concat([flat, tf.zeros_like(flat[:1])], 0)
            return tf.gather(flat, place)

        return tf.gather(params, index), gradient

    return gather(params)


def gather_positions(sequence: tf.Tensor, positions: tf.Tensor, flat: bool = False) -> tf.Tensor:
    """sequence (B, T, H), positions (B, P) -> (B, P, H), or (B * P, H) if `flat`.

    Flattened gather as in the original `gather_indexes`: one static-shape
    gather that XLA and TPUs handle well, instead of a batched gather.
    """
    batch, length, hidden = ops.shape(sequence)[0], ops.shape(sequence)[1], ops.shape(sequence)[2]
    offsets = ops.arange(batch, dtype="int32")[:, None] * length  # (B, 1)
    flat_positions = ops.reshape(ops.cast(positions, "int32") + offsets, (-1,))  # (B * P,)
    flat_sequence = ops.reshape(sequence, (-1, hidden))  # (B * T, H)
    gathered = ops.take(flat_sequence, flat_positions, axis=0)  # (B * P, H)
    return gathered if flat else ops.reshape(gathered, (batch, -1, hidden))  # (B, P, H)


# === The layout of one block call ===


def row_layout(
    packing: TokenPacking | None = None,
    query_packing: TokenPacking | None = None,
    query_positions: Any = None,
) -> PaddedRows | PackedRows:
    """The rows of a block call given its arguments (`TransformerBlock.call`)."""
    if packing is None:
        if query_packing is not None:
            raise ValueError("query_packing needs packing (the rows its positions are in)")
        return PaddedRows(query_positions)
    if query_positions is not None:
        raise ValueError(
            "query_positions and packing: one or the other (query_packing for the packed rows)"
        )
    return PackedRows(packing, query_packing)


class PaddedRows:
    """hidden (B, T, H) as padded; the queries are every position, or the
    positions `query_positions` (B, Q) (the pretrainer's [CLS] and masked
    positions, the only rows its last block's output is read at)."""

    def __init__(self, query_positions: Any = None) -> None:
        self.query_positions = query_positions
        self.selects_queries = query_positions is not None

    def queries(self, hidden: tf.Tensor) -> tf.Tensor:
        """(B, T, H) -> the query rows, (B, T, H) or (B, Q, H)."""
        return (
            hidden if not self.selects_queries else gather_positions(hidden, self.query_positions)
        )

    def query_mask_bias(self, mask_bias: tf.Tensor) -> tf.Tensor:
        """The bias rows of the queries: (B, 1, 1, T) as is; left to right, a
        row per query, (B, 1, T, T) -> (B, 1, Q, T)."""
        if not self.selects_queries or mask_bias.shape[2] == 1:
            return mask_bias
        return gather_positions(mask_bias[:, 0], self.query_positions)[:, None]

    def split_heads(self, outputs: tf.Tensor, num_heads: int, groups: int = 1) -> tf.Tensor:
        """(B, T, k * N * D) -> (k, B, N, T, D), or (B, N, T, D) for `groups` k = 1."""
        batch, length = ops.shape(outputs)[0], ops.shape(outputs)[1]
        head_size = outputs.shape[-1] // (groups * num_heads)
        if groups == 1:
            heads = ops.reshape(outputs, (batch, length, num_heads, head_size))  # (B, T, N, D)
            return ops.transpose(heads, (0, 2, 1, 3))
        heads = ops.reshape(
            outputs, (batch, length, groups, num_heads, head_size)
        )  # (B, T, k, N, D)
        return ops.transpose(heads, (2, 0, 3, 1, 4))

    split_query_heads = split_heads  # the queries' own (B, Q) layout

    def merge_heads(self, heads: tf.Tensor) -> tf.Tensor:
        """(B, N, Q, D) -> (B, Q, N * D)."""
        heads = ops.transpose(heads, (0, 2, 1, 3))  # (B, Q, N, D)
        batch, length = ops.shape(heads)[0], ops.shape(heads)[1]
        return ops.reshape(heads, (batch, length, heads.shape[2] * heads.shape[3]))


class PackedRows:
    """hidden (R, H), the real positions of `packing`; the queries are every
    row, or the rows of `query_packing` (a second `TokenPacking`, of a subset
    of those positions, spanning the same S: a classifier's [CLS], a tagger's
    labelled pieces). Attention splits heads into the (B, T) layout, cut at
    the span S, and merges them back, one gather each way
    (`TokenPacking.unpack_heads`, `pack_heads`)."""

    def __init__(self, packing: TokenPacking, query_packing: TokenPacking | None = None) -> None:
        self.packing = packing
        self.query_packing = query_packing
        self.selects_queries = query_packing is not None

    def queries(self, hidden: tf.Tensor) -> tf.Tensor:
        """(R, H) -> the query rows, (R, H) or (Q, H)."""
        if not self.selects_queries:
            return hidden
        # The real rows (of `packing`) at query_packing's positions.
        rows = tf.gather(tf.reshape(self.packing.row_of, (-1,)), self.query_packing.flat_rows)
        return tf.gather(hidden, rows)  # (Q, H)

    def query_mask_bias(self, mask_bias: tf.Tensor) -> tf.Tensor:
        """(B, 1, 1 or S, S) as is: the queries are split into the S positions too."""
        return mask_bias

    def split_heads(self, outputs: tf.Tensor, num_heads: int, groups: int = 1) -> tf.Tensor:
        """(R, k * N * D) -> (k, B, N, S, D), or (B, N, S, D) for `groups` k = 1."""
        return self.packing.unpack_heads(outputs, num_heads, groups)

    def split_query_heads(self, outputs: tf.Tensor, num_heads: int, groups: int = 1) -> tf.Tensor:
        """(R or Q, k * N * D) -> (k, B, N, S, D), or (B, N, S, D) for `groups` k = 1."""
        return (self.query_packing or self.packing).unpack_heads(outputs, num_heads, groups)

    def merge_heads(self, heads: tf.Tensor) -> tf.Tensor:
        """(B, N, S, D) -> the query rows (R or Q, N * D)."""
        return (self.query_packing or self.packing).pack_heads(heads)
