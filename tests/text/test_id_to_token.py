"""BertTokenizer.id_to_token: tokens of valid ids everywhere (eager, tf.function,
ragged, tf.data), and an error naming the bad ids and the vocabulary's size
for ids outside it."""

import pytest
import tensorflow as tf

from keras_bert.text.tokenizer import BertTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "fox", "##es"]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB)


def test_valid_ids_eager_traced_ragged_and_in_tf_data(tokenizer):
    assert tokenizer.id_to_token([2, 5, 8]).numpy().tolist() == [b"[CLS]", b"the", b"##es"]
    assert tokenizer.id_to_token(tf.constant(6, tf.int64)).numpy() == b"quick"
    ragged = tf.ragged.constant([[2, 7], [], [8]])
    assert tokenizer.id_to_token(ragged).to_list() == [[b"[CLS]", b"fox"], [], [b"##es"]]
    traced = tf.function(tokenizer.id_to_token, input_signature=[tf.TensorSpec([None], tf.int32)])
    assert traced(tf.constant([0, 8])).numpy().tolist() == [b"[PAD]", b"##es"]
    dataset = tf.data.Dataset.from_tensor_slices([[5, 6], [7, 8]]).map(tokenizer.id_to_token)
    assert [row.tolist() for row in dataset.as_numpy_iterator()] == [
        [b"the", b"quick"],
        [b"fox", b"##es"],
    ]


@pytest.mark.parametrize(
    "ids, named",
    [
        ([3, 9], "9"),
        ([-1, 2], "-1"),
        (tf.constant([[1, 12], [-4, 0]]), "-4, 12"),
        (tf.ragged.constant([[1], [100, 2]]), "100"),
    ],
)
def test_out_of_range_ids_are_a_value_error_naming_them(tokenizer, ids, named):
    with pytest.raises(
        ValueError,
        match=rf"token ids must be in \[0, 9\).* 9 tokens; "
        rf"out of range: {named}$",
    ):
        tokenizer.id_to_token(ids)


def test_out_of_range_ids_in_a_graph_fail_with_the_range(tokenizer):
    traced = tf.function(tokenizer.id_to_token, input_signature=[tf.TensorSpec([None], tf.int32)])
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"(?s)token ids must be in \[0, 9\).*out of range:.*\[9 -3\]",
    ):
        traced(tf.constant([1, 9, -3]))
