"""The masking mix (the paper's Table 8 ablation): what share of the chosen tokens
becomes [MASK], a random token or stays itself, measured over many draws, in
static (create-pretraining-data) and dynamic (tf.data) masking."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.pretraining_data.dynamic_masking import MaskingVocab, mask_batch
from keras_bert.pretraining_data.options import PretrainingOptions, VocabInfo
from keras_bert.pretraining_data.static_masking import mask_instances

# Devlin et al. (2018), Table 8, whose columns are MASK / SAME / RND:
# 80/10/10, 100/0/0, 80/0/20, 80/20/0, 0/20/80, 0/0/100 -> (mask, random, keep).
PAPER_MIXES = [
    (0.8, 0.1, 0.1),
    (1.0, 0.0, 0.0),
    (0.8, 0.2, 0.0),
    (0.8, 0.0, 0.2),
    (0.0, 0.8, 0.2),
    (0.0, 1.0, 0.0),
]
VOCAB_SIZE = 5000  # a random draw equals the original (or [MASK]) 1 time in 5000
CLS, SEP, MASK = 1, 2, 3
TOLERANCE = 0.015  # about 4 standard deviations at ~15,000 predictions


def _sequences(num, length, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(10, VOCAB_SIZE, (num, length)).astype(np.int32)
    ids[:, 0], ids[:, -1] = CLS, SEP
    return ids


def _measured_mix(masked_ids, positions, labels, weights):
    """Shares of the real predictions now [MASK], another token, the original."""
    real = weights > 0
    now = np.take_along_axis(masked_ids, positions, axis=1)[real]
    original = labels[real]
    is_mask = now == MASK
    is_same = (now == original) & ~is_mask
    return (is_mask.mean(), (~is_mask & ~is_same).mean(), is_same.mean()), real.sum()


@pytest.mark.parametrize("mix", PAPER_MIXES, ids=lambda m: "/".join(f"{r:g}" for r in m))
def test_static_masking_mix(mix):
    ids = _sequences(1000, 100)
    options = PretrainingOptions(
        mask_token_rate=mix[0], random_token_rate=mix[1], keep_token_rate=mix[2]
    )
    vocab = VocabInfo(
        size=VOCAB_SIZE,
        cls_id=CLS,
        sep_id=SEP,
        mask_id=MASK,
        is_continuation=np.zeros(VOCAB_SIZE, bool),
    )
    masked = mask_instances(ids, np.full(1000, 100), options, vocab, np.random.default_rng(1))
    measured, count = _measured_mix(
        masked.input_ids, masked.masked_lm_positions, masked.masked_lm_ids, masked.masked_lm_weights
    )
    assert count == 1000 * 15
    np.testing.assert_allclose(measured, mix, atol=TOLERANCE)


@pytest.mark.parametrize("mix", PAPER_MIXES, ids=lambda m: "/".join(f"{r:g}" for r in m))
def test_dynamic_masking_mix(mix):
    ids = _sequences(1000, 100, seed=2)
    batch = {"input_ids": tf.constant(ids), "input_mask": tf.ones_like(ids)}
    out = mask_batch(
        batch,
        tf.constant([3, 4]),
        MaskingVocab(VOCAB_SIZE, CLS, SEP, MASK),
        20,
        mask_token_rate=mix[0],
        random_token_rate=mix[1],
        keep_token_rate=mix[2],
    )
    measured, count = _measured_mix(
        *(
            out[name].numpy()
            for name in ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
        )
    )
    assert count == 1000 * 15
    np.testing.assert_allclose(measured, mix, atol=TOLERANCE)


def test_a_mix_that_does_not_sum_to_one_names_the_fields():
    with pytest.raises(
        ValueError, match="mask_token_rate \\+ random_token_rate \\+ keep_token_rate must sum to 1"
    ):
        PretrainingOptions(mask_token_rate=0.8, random_token_rate=0.1, keep_token_rate=0.2)
    with pytest.raises(ValueError, match="random_token_rate must lie in"):
        PretrainingOptions(mask_token_rate=1.0, random_token_rate=-0.2, keep_token_rate=0.2)
    batch = {"input_ids": tf.constant(_sequences(2, 10)), "input_mask": tf.ones((2, 10), tf.int32)}
    with pytest.raises(ValueError, match="must sum to 1"):
        mask_batch(
            batch,
            tf.constant([0, 0]),
            MaskingVocab(VOCAB_SIZE, CLS, SEP, MASK),
            2,
            mask_token_rate=0.5,
            random_token_rate=0.0,
            keep_token_rate=0.0,
        )
