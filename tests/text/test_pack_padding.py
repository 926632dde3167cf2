"""`BertTokenizer.pack(..., padding="longest", length_multiple=k)`: the batch's
longest packed row rounded up to a multiple of k (at most seq_length), the same
ids as the fixed-length packing in those columns."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertTokenizer
from keras_bert.assets import VOCAB_FILE


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB_FILE)


TEXTS = ["hello world", "a much longer sentence than the first one is here", ""]
PAIRS = ["yes", "", "one two three four five six seven eight nine ten eleven twelve"]


@pytest.mark.parametrize("multiple, width", [(1, 12), (8, 16), (5, 15), (64, 32)])
def test_longest_pads_to_the_rounded_longest_row(tokenizer, multiple, width):
    # Pieces by hand: [CLS] a much longer sentence than the first one is here [SEP] = 12
    # (every word is one piece of the uncased vocabulary); 64 is cut to seq_length 32.
    packed = tokenizer.pack(
        tf.constant(TEXTS), seq_length=32, padding="longest", length_multiple=multiple
    )
    fixed = tokenizer.pack(tf.constant(TEXTS), seq_length=32)
    for name in ("input_ids", "input_mask", "segment_ids"):
        assert packed[name].shape == (3, width)
        assert packed[name].dtype == tf.int32
        np.testing.assert_array_equal(packed[name].numpy(), fixed[name].numpy()[:, :width])
    assert packed["input_mask"].numpy().sum(1).tolist() == [4, 12, 2]


def test_longest_pairs_and_truncation(tokenizer):
    packed = tokenizer.pack(
        tf.constant(TEXTS), tf.constant(PAIRS), seq_length=16, padding="longest", length_multiple=8
    )
    fixed = tokenizer.pack(tf.constant(TEXTS), tf.constant(PAIRS), seq_length=16)
    # Rows of 6, 13 and 15 pieces (by hand: [CLS] A [SEP] B [SEP]); 15 rounds up to 16,
    # which is seq_length.
    assert packed["input_ids"].shape == (3, 16)
    for name in packed:
        np.testing.assert_array_equal(packed[name].numpy(), fixed[name].numpy())


def test_longest_empty_batch_has_a_valid_shape(tokenizer):
    packed = tokenizer.pack(
        tf.constant([], tf.string), seq_length=32, padding="longest", length_multiple=8
    )
    assert packed["input_ids"].shape == (0, 8)


def test_select_packed_pads_only_to_the_chosen_rows(tokenizer):
    texts = tf.constant(["hello world", "hi"])
    single = tokenizer.pack(texts, seq_length=32, padding="longest")  # widths 4
    paired = tokenizer.pack(
        texts, tf.constant(["", "one two three four five"]), seq_length=32, padding="longest"
    )  # widths 5 and 9
    chosen = tokenizer.select_packed(tf.constant([False, False]), paired, single, 32, "longest")
    assert chosen["input_ids"].shape == (2, 4)
    np.testing.assert_array_equal(chosen["input_ids"].numpy(), single["input_ids"].numpy())
    mixed = tokenizer.select_packed(tf.constant([False, True]), paired, single, 32, "longest")
    assert mixed["input_ids"].shape == (2, 9)
    np.testing.assert_array_equal(mixed["input_ids"].numpy()[0, :4], single["input_ids"][0])
    np.testing.assert_array_equal(mixed["input_ids"].numpy()[1], paired["input_ids"][1])


@pytest.mark.parametrize(
    "options, field",
    [({"padding": "shortest"}, "padding"), ({"length_multiple": 0}, "length_multiple")],
)
def test_bad_padding_options_name_the_field(tokenizer, options, field):
    with pytest.raises(ValueError, match=field):
        tokenizer.pack(tf.constant(TEXTS), seq_length=32, **{"padding": "longest", **options})
