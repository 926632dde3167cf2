"""Static masking: `create_masked_lm_predictions` of google-research/bert in
NumPy over all instances of a block (15 % of positions, 80/10/10 or another
mix, whole words).

Legend for shape comments: N = instances in a block, T = max_seq_length,
P = max_predictions_per_seq.
"""

from __future__ import annotations

import numpy as np

from keras_bert.pretraining_data.options import MaskedLm, PretrainingOptions, VocabInfo


def mask_instances(
    input_ids: np.ndarray,
    lengths: np.ndarray,
    options: PretrainingOptions,
    vocab: VocabInfo,
    rng: np.random.Generator,
) -> MaskedLm:
    """The original's masked-LM choice for every instance at once.

    Per instance, `min(P, max(1, round(length * masked_lm_prob)))` tokens are
    predicted (the original counts [CLS] and [SEP] in the length); [CLS] and
    [SEP] are never chosen. Units (tokens, or whole words: a piece plus the
    `##` pieces after it) are visited in random order and taken while they fit
    in the budget, skipping those that would exceed it, as the original does.
    A chosen unit becomes [MASK] 80 % of the time, stays itself 10 % and each
    of its pieces becomes a random token 10 % (`options.mask_token_rate`,
    `keep_token_rate`, `random_token_rate`).
    """
    num, seq_length = input_ids.shape  # (N, T)
    max_predictions = options.max_predictions_per_seq
    t = np.arange(seq_length)
    candidate = (
        (t[np.newaxis] < lengths[:, np.newaxis])
        & (input_ids != vocab.cls_id)
        & (input_ids != vocab.sep_id)
    )  # (N, T)
    budget = np.minimum(
        max_predictions, np.maximum(1, np.round(lengths * options.masked_lm_prob))
    ).astype(np.int64)

    keys = rng.random((num, seq_length))  # a unit's place in the random visiting order
    if options.do_whole_word_mask:
        chosen, unit_start = _whole_word_choice(input_ids, candidate, budget, keys, vocab)
        # One draw per unit, so a whole word is masked, kept or randomised together.
        action = rng.random((num, seq_length))[np.arange(num)[:, np.newaxis], unit_start]
    else:
        # Every unit is one token, and all fit: the first min(budget, tokens) visited.
        chosen = _first_visited(
            np.where(candidate, keys, 2.0), np.minimum(budget, candidate.sum(axis=1))
        )
        action = rng.random((num, seq_length))
    # [0, mask) -> [MASK], [1 - random, 1) -> random, between -> kept: at the
    # defaults the original's `< 0.8` and `>= 0.9` (1.0 - 0.1 is exactly 0.9).
    to_mask = chosen & (action < options.mask_token_rate)
    to_random = chosen & (action >= 1.0 - options.random_token_rate)
    random_ids = rng.integers(0, vocab.size, (num, seq_length), dtype=np.int32)
    masked_ids = np.where(to_mask, vocab.mask_id, np.where(to_random, random_ids, input_ids))

    width = min(max_predictions, seq_length)
    count = chosen.sum(axis=1)  # (N,)
    row, column = np.nonzero(chosen)  # row by row, ascending columns
    rank = np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count)
    positions = np.zeros((num, width), np.int64)  # chosen positions, ascending, 0-padded
    positions[row, rank] = column
    real = np.arange(width)[np.newaxis] < count[:, np.newaxis]  # (N, P)
    labels = np.where(real, np.take_along_axis(input_ids, positions, axis=1), 0)
    pad = ((0, 0), (0, max_predictions - width))
    return MaskedLm(
        input_ids=masked_ids.astype(np.int32),
        masked_lm_positions=np.pad(positions, pad).astype(np.int32),
        masked_lm_ids=np.pad(labels, pad).astype(np.int32),
        masked_lm_weights=np.pad(real, pad).astype(np.float32),
        candidates=int(candidate.sum()),
        replaced_by_mask=int(to_mask.sum()),
        kept=int((chosen & ~to_mask & ~to_random).sum()),
        replaced_by_random=int(to_random.sum()),
    )


def _first_visited(keys, count):
    """keys (N, T), count (N,) -> (N, T) bool: the `count` smallest keys of each row,
    as a stable argsort would take them (on equal keys, the lower index first)."""
    num, seq_length = keys.shape
    ordered = np.sort(keys, axis=1)
    threshold = np.where(count > 0, ordered[np.arange(num), np.maximum(count - 1, 0)], -1.0)
    chosen = keys <= threshold[:, np.newaxis]
    # Equal keys (about one row in 10**12) can take more: those rows by the stable order.
    tied = chosen.sum(axis=1) != count
    if tied.any():
        order = np.argsort(keys[tied], axis=1, kind="stable")
        exact = np.zeros((int(tied.sum()), seq_length), bool)
        np.put_along_axis(exact, order, np.arange(seq_length) < count[tied][:, np.newaxis], axis=1)
        chosen[tied] = exact
    return chosen


def _whole_word_choice(input_ids, candidate, budget, keys, vocab):
    """Whole-word units visited in key order, each taken if it still fits in the budget.

    Returns the chosen tokens (N, T) bool and each token's unit start (N, T).
    """
    num, seq_length = input_ids.shape
    t = np.arange(seq_length)
    previous = np.zeros_like(candidate)
    previous[:, 1:] = candidate[:, :-1]
    starts = candidate & (~vocab.is_continuation[input_ids] | ~previous)
    # Each token's unit is the latest start at or before it.
    unit_start = np.maximum.accumulate(np.where(starts, t, 0), axis=1)  # (N, T)
    # A unit's size: candidates from its start up to the next start.
    next_start = np.minimum.accumulate(np.where(starts, t, seq_length)[:, ::-1], axis=1)[:, ::-1]
    next_start = np.concatenate([next_start[:, 1:], np.full((num, 1), seq_length)], axis=1)
    cumulative = np.concatenate(
        [np.zeros((num, 1), np.int64), np.cumsum(candidate, axis=1)], axis=1
    )  # (N, T + 1)
    rows = np.arange(num)[:, np.newaxis]
    sizes = np.where(starts, cumulative[rows, next_start] - cumulative[rows, t], 0)

    order = np.argsort(np.where(starts, keys, 2.0), axis=1, kind="stable")  # starts first
    ordered_sizes = np.take_along_axis(sizes, order, axis=1)
    num_units = starts.sum(axis=1)
    taken = np.zeros((num, seq_length), bool)
    total = np.zeros(num, np.int64)
    for j in range(int(num_units.max(initial=0))):
        size = ordered_sizes[:, j]
        fits = (j < num_units) & (total + size <= budget)
        taken[:, j] = fits
        total += np.where(fits, size, 0)
    chosen_start = np.zeros((num, seq_length), bool)
    np.put_along_axis(chosen_start, order, taken, axis=1)
    return candidate & chosen_start[rows, unit_start], unit_start
