"""The row layouts a Transformer block call runs on (`keras_bert.layers.packing`),
against NumPy's reshapes, transposes and gathers.

Legend: B = batch (3), T = sequence length (5), N = heads (2), D = head size (3),
k = projections side by side, Q = query positions.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.packing import PackedRows, PaddedRows, TokenPacking, row_layout

B, T, N, D = 3, 5, 2, 3
RNG = np.random.default_rng(0)
MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], np.int32)  # (B, T)


def test_the_call_arguments_pick_the_layout():
    packing = TokenPacking(tf.constant(MASK))
    assert isinstance(row_layout(), PaddedRows) and not row_layout().selects_queries
    assert row_layout(query_positions=tf.constant([[0]] * B)).selects_queries
    assert isinstance(row_layout(packing), PackedRows) and not row_layout(packing).selects_queries
    assert row_layout(packing, TokenPacking(tf.constant(MASK), span=packing.span)).selects_queries
    with pytest.raises(ValueError, match="query_packing needs packing"):
        row_layout(query_packing=packing)
    with pytest.raises(ValueError, match="query_positions and packing: one or the other"):
        row_layout(packing, query_positions=tf.constant([[0]] * B))


@pytest.mark.parametrize("groups", [1, 3])
def test_padded_heads_split_and_merge_as_reshape_and_transpose(groups):
    outputs = RNG.normal(size=(B, T, groups * N * D)).astype("float32")
    expected = outputs.reshape(B, T, groups, N, D).transpose(2, 0, 3, 1, 4)  # (k, B, N, T, D)
    split = np.asarray(PaddedRows().split_heads(tf.constant(outputs), N, groups))
    np.testing.assert_array_equal(split if groups > 1 else split[None], expected)
    merged = PaddedRows().merge_heads(tf.constant(expected[0]))  # (B, T, N * D)
    np.testing.assert_array_equal(merged, outputs[..., : N * D])


def test_padded_queries_and_their_bias_rows_are_gathered():
    hidden = RNG.normal(size=(B, T, N * D)).astype("float32")
    positions = np.array([[0, 2], [0, 4], [0, 1]], np.int32)  # (B, Q)
    rows = PaddedRows(tf.constant(positions))
    np.testing.assert_array_equal(
        rows.queries(tf.constant(hidden)), np.take_along_axis(hidden, positions[..., None], axis=1)
    )
    padding_bias = RNG.normal(size=(B, 1, 1, T)).astype("float32")
    np.testing.assert_array_equal(rows.query_mask_bias(tf.constant(padding_bias)), padding_bias)
    causal_bias = RNG.normal(size=(B, 1, T, T)).astype("float32")  # a row per query
    np.testing.assert_array_equal(
        rows.query_mask_bias(tf.constant(causal_bias)),
        np.take_along_axis(causal_bias[:, 0], positions[..., None], axis=1)[:, None],
    )


def test_packed_queries_are_the_query_packings_rows():
    hidden = RNG.normal(size=(B, T, N * D)).astype("float32")
    packing = TokenPacking(tf.constant(MASK))
    read = np.zeros_like(MASK)
    read[:, 0], read[1, 3] = 1, 1  # [CLS] of each row and one more position
    query_packing = TokenPacking(tf.constant(read), span=packing.span)
    rows = PackedRows(packing, query_packing)
    np.testing.assert_array_equal(
        rows.queries(packing.pack(tf.constant(hidden))), hidden[read.astype(bool)]
    )
    heads = rows.split_query_heads(query_packing.pack(tf.constant(hidden)), N)  # (B, N, S, D)
    np.testing.assert_array_equal(rows.merge_heads(heads), hidden[read.astype(bool)])
