"""The settings of a pretraining-data run and the arrays passed between its stages.

Legend for shape comments: N = instances in a block, T = max_seq_length,
P = max_predictions_per_seq.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Sequence

import numpy as np

from keras_bert import features

# A block ends after this many documents, or once it holds this many characters
# and at least `BLOCK_MIN_DOCUMENTS` documents (so random next segments always
# have other documents to come from, even when documents are whole books).
BLOCK_DOCUMENTS = 1000
BLOCK_CHARS = 1 << 20
BLOCK_MIN_DOCUMENTS = 8


MASKING_MIX_FIELDS = ("mask_token_rate", "random_token_rate", "keep_token_rate")


def check_masking_mix(
    mask_token_rate: float, random_token_rate: float, keep_token_rate: float
) -> None:
    """What becomes of a chosen token: [MASK], a random token or itself (the
    paper's 80 / 10 / 10, and its ablation's mixes); the three must sum to 1."""
    rates = dict(zip(MASKING_MIX_FIELDS, (mask_token_rate, random_token_rate, keep_token_rate)))
    for name, rate in rates.items():
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {rate!r}")
    if abs(sum(rates.values()) - 1.0) > 1e-6:
        raise ValueError(
            f"{' + '.join(MASKING_MIX_FIELDS)} must sum to 1, got "
            + " + ".join(f"{rate:g}" for rate in rates.values())
            + f" = {sum(rates.values()):g}"
        )


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """What `create-pretraining-data` makes; names and defaults of the original flags."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    random_seed: int = 12345
    do_whole_word_mask: bool = False
    objective: str = "nsp"  # nsp (BERT) | sop (ALBERT sentence order) | none (RoBERTa packing)
    mask: bool = True  # False: unmasked records for dynamic masking at read time
    # A chosen token becomes [MASK], a random token or stays: the original's 80 / 10 / 10.
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1
    keep_token_rate: float = 0.1

    def __post_init__(self):
        if self.objective not in features.OBJECTIVES:
            raise ValueError(
                f"objective must be one of {features.OBJECTIVES}, got {self.objective!r}"
            )
        smallest = 3 if self.objective == "none" else 5  # specials + at least 2 tokens
        if self.max_seq_length < smallest:
            raise ValueError(
                f"max_seq_length must be at least {smallest} for objective "
                f"{self.objective!r}, got {self.max_seq_length}"
            )
        if self.max_predictions_per_seq < 1:
            raise ValueError("max_predictions_per_seq must be at least 1")
        # Every record holds max_predictions_per_seq slots, padded: more than
        # the maskable tokens (all but [CLS] and the [SEP]s) only adds padding.
        maskable = self.max_seq_length - (3 if self.with_next_sentence else 2)
        if self.max_predictions_per_seq > maskable:
            raise ValueError(
                f"max_predictions_per_seq {self.max_predictions_per_seq} exceeds "
                f"the {maskable} maskable tokens of max_seq_length "
                f"{self.max_seq_length}; use at most {maskable} (about "
                f"max_seq_length * masked_lm_prob: the paper's 20 for 128)"
            )
        if not 0.0 <= self.masked_lm_prob <= 1.0 or not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError("masked_lm_prob and short_seq_prob must lie in [0, 1]")
        if self.dupe_factor < 1:
            raise ValueError("dupe_factor must be at least 1")
        check_masking_mix(self.mask_token_rate, self.random_token_rate, self.keep_token_rate)

    @property
    def with_next_sentence(self) -> bool:
        return self.objective != "none"


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """What the workers need to know about the vocabulary (no TensorFlow)."""

    size: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_continuation: np.ndarray  # (V,) bool: the piece starts with "##"

    @classmethod
    def from_tokens(cls, vocab: Sequence[str]) -> VocabInfo:
        ids = {token: i for i, token in enumerate(vocab)}
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in ids]
        if missing:
            raise ValueError(f"the vocabulary lacks the special token(s) {missing}")
        return cls(
            size=len(vocab),
            cls_id=ids["[CLS]"],
            sep_id=ids["[SEP]"],
            mask_id=ids["[MASK]"],
            is_continuation=np.array([t.startswith("##") for t in vocab], dtype=bool),
        )


@dataclasses.dataclass
class Block:
    """Tokenised documents: the unit of work and of determinism.

    Sentence s is `token_ids[sentence_splits[s]:sentence_splits[s + 1]]`;
    document d is sentences `document_splits[d]` to `document_splits[d + 1]`.
    Every sentence and every document is non-empty.
    """

    index: int
    token_ids: np.ndarray  # (tokens,) int32
    sentence_splits: np.ndarray  # (sentences + 1,) int64
    document_splits: np.ndarray  # (documents + 1,) int64

    @property
    def num_documents(self) -> int:
        return len(self.document_splits) - 1


@dataclasses.dataclass
class Instances:
    """Instances of one block as fixed-size arrays, ready to mask and encode."""

    input_ids: np.ndarray  # (N, T) int32, 0-padded
    lengths: np.ndarray  # (N,) int64: tokens before the padding
    segment_ids: np.ndarray  # (N, T) int32
    next_sentence_labels: np.ndarray  # (N,) int32: 1 = random next (nsp) / swapped (sop)
    truncated: int = 0  # instances that lost tokens to truncate_seq_pair


@dataclasses.dataclass
class MaskedLm:
    input_ids: np.ndarray  # (N, T) int32, with [MASK] / random / kept tokens
    masked_lm_positions: np.ndarray  # (N, P) int32, ascending, 0-padded
    masked_lm_ids: np.ndarray  # (N, P) int32, the original tokens, 0-padded
    masked_lm_weights: np.ndarray  # (N, P) float32, 1.0 for real predictions
    candidates: int = 0  # maskable (non-special) tokens
    replaced_by_mask: int = 0
    kept: int = 0
    replaced_by_random: int = 0


def block_seed(random_seed: int, block_index: int) -> int:
    """A 64-bit seed that depends only on the run's seed and the block's index."""
    digest = hashlib.sha256(f"keras_bert:{random_seed}:{block_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")
