"""Dynamic masking inside `tf.data`: new masks each time a record is read.

RoBERTa showed that drawing the masks anew every epoch (instead of the
original's `dupe_factor` fixed copies) is at least as good and needs one copy of
the data. The rules are the original's (`create_masked_lm_predictions`), so
dynamic and static masking have the same statistics:

* per sequence, `min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))`
  tokens are predicted, `length` counting [CLS] and [SEP];
* [CLS], [SEP] and padding are never chosen;
* units (tokens, or whole words: a piece and the `##` pieces after it) are
  taken in random order while they fit in that budget, skipping a unit that
  would exceed it;
* a chosen unit becomes [MASK] 80 % of the time, stays 10 %, and each of its
  pieces becomes a random token 10 % (or another mix: `mask_token_rate`,
  `random_token_rate`, `keep_token_rate`).

tensorflow-text's `mask_language_model` does the gathering and scattering; the
selection (its `RandomItemSelector` budgets `ceil(rate * selectable)` items, not
the original's tokens) and the value choice are the subclasses below. All
randomness is stateless and comes from a per-batch seed, so a seeded pipeline
is reproducible.

Legend for shape comments: B = batch, T = sequence, W = units (words), P =
pieces of a unit, K = max_predictions_per_seq.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import tensorflow as tf
import tensorflow_text as tf_text

# The base class is not exported at the top level of tensorflow_text.
from tensorflow_text.python.ops import item_selector_ops

from keras_bert.pretraining_data.options import VocabInfo, check_masking_mix


@dataclasses.dataclass(frozen=True)
class MaskingVocab:
    """The ids masking needs; `is_continuation` only for whole-word masking."""

    vocab_size: int
    cls_id: int = 101  # the standard BERT vocabularies' ids
    sep_id: int = 102
    mask_id: int = 103
    is_continuation: tuple = None  # per id: the piece starts with "##"

    @classmethod
    def from_vocab_file(cls, vocab_file: str) -> MaskingVocab:
        from keras_bert.text.tokenizer import load_vocabulary

        try:
            info = VocabInfo.from_tokens(load_vocabulary(vocab_file))
        except ValueError as e:
            raise ValueError(f"{vocab_file}: {e}") from None
        return cls(
            vocab_size=info.size,
            cls_id=info.cls_id,
            sep_id=info.sep_id,
            mask_id=info.mask_id,
            is_continuation=tuple(info.is_continuation.tolist()),
        )


class BudgetItemSelector(item_selector_ops.ItemSelector):
    """Chooses units the original's way: random order, greedy under a token budget."""

    def __init__(self, budget: tf.Tensor, selectable: tf.RaggedTensor, seed: tf.Tensor) -> None:
        super().__init__()
        self._budget = budget  # (B,) tokens to predict
        self._selectable = selectable  # ragged (B, W) bool
        self._seed = seed

    def get_selection_mask(self, input_ids: tf.RaggedTensor, axis: int) -> tf.RaggedTensor:
        del axis  # units are always at axis 1
        sizes = tf.cast(input_ids.row_lengths(axis=2), tf.int32)  # ragged (B, W)
        num_units = input_ids.row_lengths()  # (B,)
        selectable = self._selectable.to_tensor(False)  # (B, W)
        dense_sizes = sizes.to_tensor(0)  # (B, W)
        keys = tf.random.stateless_uniform(tf.shape(dense_sizes), self._seed)
        keys = tf.where(selectable, keys, 2.0)
        order = tf.argsort(keys, axis=1, stable=True)  # selectable units first, shuffled
        ordered_sizes = tf.gather(dense_sizes, order, batch_dims=1)  # (B, W)
        ordered_ok = tf.gather(selectable, order, batch_dims=1)
        budget = tf.cast(self._budget, tf.int32)

        def take(state, column):
            total, _ = state
            size, ok = column
            fits = ok & (total + size <= budget)
            return total + tf.where(fits, size, 0), fits

        _, taken = tf.scan(
            take,
            (tf.transpose(ordered_sizes), tf.transpose(ordered_ok)),
            initializer=(tf.zeros_like(budget), tf.zeros_like(budget, tf.bool)),
        )
        taken = tf.transpose(taken)  # (B, W) in shuffled order
        chosen = tf.gather(taken, tf.argsort(order, axis=1), batch_dims=1)  # back in place
        self.chosen = tf.RaggedTensor.from_tensor(chosen, lengths=num_units)  # (B, W)
        return self.chosen


class StatelessMaskValuesChooser(tf_text.MaskValuesChooser):
    """80 / 10 / 10 (or `mask_token_rate` / `random_token_rate` / the rest
    kept) with one draw per unit, so a whole word is treated alike.

    `mask_language_model` hands over the chosen tokens flattened, in order, so
    the unit of each token comes from the selector's choice (`selector.chosen`).
    """

    def __init__(
        self,
        vocab_size: int,
        mask_token: int,
        seed: tf.Tensor,
        selector: BudgetItemSelector,
        token_units: tf.Tensor,
        num_units: tf.Tensor,
        mask_token_rate: float = 0.8,
        random_token_rate: float = 0.1,
    ) -> None:
        super().__init__(
            vocab_size,
            mask_token,
            mask_token_rate=mask_token_rate,
            random_token_rate=random_token_rate,
        )
        self._mask_rate = mask_token_rate
        self._random_rate = random_token_rate
        self._vocab = vocab_size
        self._mask = mask_token
        self._seed = seed
        self._selector = selector
        self._token_units = token_units  # (tokens,) the unit of each token of the batch
        self._num_units = num_units

    def get_mask_values(self, masked_lm_ids: tf.RaggedTensor) -> tf.RaggedTensor:
        flat = masked_lm_ids.flat_values  # chosen tokens, row-major, ascending positions
        seeds = tf.random.experimental.stateless_split(self._seed, 2)
        per_unit = tf.random.stateless_uniform([self._num_units], seeds[0])
        chosen = tf.gather(self._selector.chosen.flat_values, self._token_units)
        action = tf.boolean_mask(tf.gather(per_unit, self._token_units), chosen)
        random_ids = tf.random.stateless_uniform(
            tf.shape(flat), seeds[1], minval=0, maxval=self._vocab, dtype=flat.dtype
        )
        # As static masking: [0, mask) -> [MASK], [1 - random, 1) -> random.
        values = tf.where(
            action < self._mask_rate,
            tf.cast(self._mask, flat.dtype),
            tf.where(action >= 1.0 - self._random_rate, random_ids, flat),
        )
        return masked_lm_ids.with_flat_values(values)


def mask_batch(
    features: Mapping[str, tf.Tensor],
    seed: tf.Tensor,
    vocab: MaskingVocab,
    max_predictions_per_seq: int,
    masked_lm_prob: float = 0.15,
    whole_word_mask: bool = False,
    mask_token_rate: float = 0.8,
    random_token_rate: float = 0.1,
    keep_token_rate: float = 0.1,
) -> dict[str, tf.Tensor]:
    """Adds fresh masks to a batch of unmasked records.

    Args:
      features: dict with dense `input_ids` and `input_mask` (B, T) (int32).
      seed: (2,) int seed of this batch.
      vocab: `MaskingVocab`.
    Returns the dict with `input_ids` masked and `masked_lm_positions`,
    `masked_lm_ids` (B, K) int32 and `masked_lm_weights` (B, K) float32 added.
    """
    check_masking_mix(mask_token_rate, random_token_rate, keep_token_rate)
    input_ids = features["input_ids"]  # (B, T)
    input_mask = features["input_mask"]
    batch = tf.shape(input_ids)[0]
    seq_length = tf.shape(input_ids)[1]
    lengths = tf.reduce_sum(tf.cast(input_mask, tf.int32), axis=1)  # (B,)
    tokens = tf.RaggedTensor.from_tensor(input_ids, lengths=lengths)  # (B, T)
    flat = tokens.flat_values
    special = tf.equal(flat, vocab.cls_id) | tf.equal(flat, vocab.sep_id)
    if whole_word_mask:
        if vocab.is_continuation is None:
            raise ValueError("whole-word masking needs the vocabulary: pass vocab_file")
        continuation = tf.gather(tf.constant(vocab.is_continuation, tf.bool), flat)
        after_special = tf.concat([[True], special[:-1]], axis=0)
        row_start = tf.equal(
            tf.range(tf.size(flat, out_type=tf.int64)),
            tf.gather(tokens.row_splits, tokens.value_rowids()),
        )
        # A unit starts at every special token, at every non-`##` piece and
        # at a `##` piece that follows a special token (as the original).
        unit_start = special | ~continuation | after_special | row_start
    else:
        unit_start = tf.ones_like(special)
    starts = tf.cast(tf.where(unit_start)[:, 0], tf.int64)
    units = tf.RaggedTensor.from_row_starts(flat, starts)  # (units, P)
    unit_rows = tf.gather(tokens.value_rowids(), starts)
    words = tf.RaggedTensor.from_value_rowids(units, unit_rows, nrows=tf.cast(batch, tf.int64))
    selectable = tf.RaggedTensor.from_value_rowids(
        ~tf.gather(special, starts), unit_rows, nrows=tf.cast(batch, tf.int64)
    )  # (B, W)

    budget = tf.minimum(
        max_predictions_per_seq,
        tf.maximum(1, tf.cast(tf.round(tf.cast(lengths, tf.float32) * masked_lm_prob), tf.int32)),
    )
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2)
    selector = BudgetItemSelector(budget, selectable, seeds[0])
    token_units = tf.cumsum(tf.cast(unit_start, tf.int64)) - 1  # (tokens,)
    chooser = StatelessMaskValuesChooser(
        vocab.vocab_size,
        vocab.mask_id,
        seeds[1],
        selector,
        token_units,
        tf.size(starts),
        mask_token_rate,
        random_token_rate,
    )
    masked, positions, labels = tf_text.mask_language_model(words, selector, chooser, axis=1)

    out = dict(features)
    out["input_ids"] = masked.to_tensor(0, shape=[batch, seq_length])
    shape = [batch, max_predictions_per_seq]
    out["masked_lm_positions"] = tf.cast(positions, tf.int32).to_tensor(0, shape=shape)
    out["masked_lm_ids"] = tf.cast(labels, tf.int32).to_tensor(0, shape=shape)
    out["masked_lm_weights"] = tf.ones_like(labels, tf.float32).to_tensor(0.0, shape=shape)
    return out
