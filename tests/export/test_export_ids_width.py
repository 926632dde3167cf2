"""`serve_ids` on sequences of width 0, or with no real token (found by
tests/fuzz): an InvalidArgumentError naming the input, not "slice index 0 of
dimension 1 out of bounds" from inside the encoder, nor logits that differ
from the Keras model's (the unpadded path has no token to attend to)."""

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import call


@pytest.mark.parametrize("batch", [0, 2])
def test_width_zero_is_refused_naming_input_ids(batch):
    empty = np.zeros((batch, 0), np.int32)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"input_ids must hold at least one id per sequence \(\[CLS\]\)",
    ):
        call("classifier", "serve_ids", input_ids=empty, input_mask=empty, segment_ids=empty)


def test_width_one_is_answered():
    one = np.array([[2], [2]], np.int32)
    outputs = call(
        "classifier",
        "serve_ids",
        input_ids=one,
        input_mask=np.ones_like(one),
        segment_ids=np.zeros_like(one),
    )
    assert outputs["logits"].shape == (2, 3) and np.isfinite(outputs["logits"]).all()


def test_a_row_without_a_real_token_is_refused_naming_input_mask():
    ids = np.array([[2, 5, 3], [2, 6, 3]], np.int32)
    mask = np.array([[1, 1, 1], [0, 0, 0]], np.int32)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"input_mask must mark at least one real token \(1\) in every "
        r"sequence; rows without:.*\[1\]",
    ):
        call(
            "classifier",
            "serve_ids",
            input_ids=ids,
            input_mask=mask,
            segment_ids=np.zeros_like(ids),
        )
