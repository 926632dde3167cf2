"""`keras-bert pretrain` with dynamic masking: the masking rate and mix are
run-config fields (`--set masked_lm_prob=0.4`), and reach the data."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.assets import AUSTEN_DIR, VOCAB_FILE
from keras_bert.pretraining_data import PretrainingOptions, create_pretraining_data
from keras_bert.text import corpus
from keras_bert.training import pretraining

SEQ_LENGTH, MAX_PREDICTIONS = 64, 26  # room for 40 % of 64 tokens


@pytest.fixture(scope="module")
def unmasked_records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("unmasked")
    text = str(folder / "persuasion.txt")
    corpus.prepare_corpus("books", [os.path.join(AUSTEN_DIR, "persuasion.txt")], text)
    options = PretrainingOptions(
        max_seq_length=SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        dupe_factor=1,
        mask=False,
    )
    summary = create_pretraining_data(
        text, str(folder / "train.tfrecord"), VOCAB_FILE, options, num_workers=1
    )
    return ",".join(summary.output_files)


def _config(tmp_path, train_files="train.tfrecord", overrides=(), **fields):
    return pretraining.load_config(
        None,
        overrides,
        model="tiny",
        train_files=train_files,
        model_dir=str(tmp_path / "run"),
        seq_length=SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        batch_size=64,
        train_steps=10,
        warmup_steps=1,
        checkpoint_every=5,
        **fields,
    )


def test_set_masking_fields_reach_the_dynamic_masks(unmasked_records, tmp_path):
    config = _config(
        tmp_path,
        unmasked_records,
        overrides=[
            "dynamic_masking=true",
            f"vocab_file={VOCAB_FILE}",
            "masked_lm_prob=0.4",
            "mask_token_rate=0.6",
            "random_token_rate=0.2",
            "keep_token_rate=0.2",
        ],
    )
    dataset = pretraining.distributed_dataset(
        tf.distribute.get_strategy(), config, config.train_files, is_training=False
    )
    batches = [{k: v.numpy() for k, v in batch.items()} for batch in dataset]
    records = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    lengths = records["input_mask"].sum(axis=1)
    weights = records["masked_lm_weights"] > 0
    # The original's budget at 40 %: min(P, max(1, round(0.4 * length))).
    np.testing.assert_array_equal(
        weights.sum(axis=1), np.minimum(MAX_PREDICTIONS, np.maximum(1, np.round(lengths * 0.4)))
    )
    now = np.take_along_axis(records["input_ids"], records["masked_lm_positions"], axis=1)
    masked = ((now == 103) & weights).sum()  # [MASK]
    kept = ((now == records["masked_lm_ids"]) & weights).sum()
    total = weights.sum()
    assert total > 5000
    assert abs(masked / total - 0.6) <= 0.02
    assert abs(kept / total - 0.2) <= 0.02  # a random draw of the same token counts as kept


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["masked_lm_prob=0.4"], "masked_lm_prob apply to dynamic masking only"),
        (["whole_word_mask=true"], "whole_word_mask apply to dynamic masking only"),
        (["dynamic_masking=true"], "vocab_file is required with dynamic_masking"),
        (
            ["dynamic_masking=true", "vocab_file=v.txt", "mask_token_rate=0.5"],
            "must sum to 1",
        ),
        (["dynamic_masking=true", "vocab_file=v.txt", "masked_lm_prob=1.5"], r"in \[0, 1\]"),
        (
            ["dynamic_masking=true", "vocab_file=v.txt", "objective=lm", "attention=left_to_right"],
            "does not apply to objective lm",
        ),
    ],
)
def test_masking_fields_are_checked(overrides, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        _config(tmp_path, overrides=overrides)
