"""Pretraining data: documents -> instances -> masked TFRecord shards.

The algorithm is google-research/bert's `create_pretraining_data.py` (Model
Garden keeps a copy in `official/nlp/data/`): the same target lengths, chunks of
sentences split into A and B, random next segments, truncation and 80/10/10
masking, so the statistics of our output match the original's. What differs is
how it runs:

* **Streaming.** The original loads the whole corpus, picks random "next"
  segments from any document and shuffles all instances globally. Here the
  documents flow through in *blocks* (at most `BLOCK_DOCUMENTS` documents or
  about `BLOCK_CHARS` characters); a random next segment comes from another
  document of the same block, and the instances of a block (all dupe passes)
  are shuffled together. Memory is bounded by the block size, not by the
  corpus; shuffle the rest at read time (`inputs.pretraining_dataset` shuffles
  shards and a buffer of records).
* **Deterministic and parallel.** Each block is processed by a pure function
  whose random generators are seeded from `(random_seed, block index)` only,
  and records are written in block order, round-robin over the shards. The
  output is therefore byte-identical for any number of worker processes.
* **Vectorised.** Instances are spans of a block's flat token array; masking
  is NumPy over all instances of a block at once; tf.Examples are encoded
  directly (no TensorFlow in the workers).

Legend for shape comments: N = instances in a block, T = max_seq_length,
P = max_predictions_per_seq.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
import struct
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import numpy as np

from keras_bert import features

if TYPE_CHECKING:
    import multiprocessing.pool

    from keras_bert.text.tokenizer import BertTokenizer

# A block ends after this many documents, or once it holds this many characters
# and at least `BLOCK_MIN_DOCUMENTS` documents (so random next segments always
# have other documents to come from, even when documents are whole books).
BLOCK_DOCUMENTS = 1000
BLOCK_CHARS = 1 << 20
BLOCK_MIN_DOCUMENTS = 8


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

    def __post_init__(self):
        if self.objective not in features.OBJECTIVES:
            raise ValueError(f"objective must be one of {features.OBJECTIVES}, "
                             f"got {self.objective!r}")
        smallest = 3 if self.objective == "none" else 5  # specials + at least 2 tokens
        if self.max_seq_length < smallest:
            raise ValueError(f"max_seq_length must be at least {smallest} for objective "
                             f"{self.objective!r}, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError("max_predictions_per_seq must be at least 1")
        # Every record holds max_predictions_per_seq slots, padded: more than
        # the maskable tokens (all but [CLS] and the [SEP]s) only adds padding.
        maskable = self.max_seq_length - (3 if self.with_next_sentence else 2)
        if self.max_predictions_per_seq > maskable:
            raise ValueError(f"max_predictions_per_seq {self.max_predictions_per_seq} exceeds "
                             f"the {maskable} maskable tokens of max_seq_length "
                             f"{self.max_seq_length}; use at most {maskable} (about "
                             f"max_seq_length * masked_lm_prob: the paper's 20 for 128)")
        if not 0.0 <= self.masked_lm_prob <= 1.0 or not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError("masked_lm_prob and short_seq_prob must lie in [0, 1]")
        if self.dupe_factor < 1:
            raise ValueError("dupe_factor must be at least 1")

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
        for token in ("[CLS]", "[SEP]", "[MASK]"):
            if token not in ids:
                raise ValueError(f"the vocabulary lacks the special token {token}")
        return cls(size=len(vocab), cls_id=ids["[CLS]"], sep_id=ids["[SEP]"],
                   mask_id=ids["[MASK]"],
                   is_continuation=np.array([t.startswith("##") for t in vocab], dtype=bool))


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


# === Instances (create_instances_from_document) ===

def _truncate_counts(len_a, len_b, max_num_tokens):
    """How many tokens `truncate_seq_pair` removes from A and from B.

    The original removes one token at a time from the longer list (B on ties)
    until the pair fits; which list loses a token never depends on the random
    numbers, so the counts have a closed form.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0
    cut_a = cut_b = 0
    if len_a > len_b:
        cut_a = min(excess, len_a - len_b)
    else:
        cut_b = min(excess, len_b - len_a)
    excess -= cut_a + cut_b
    # Now equal lengths: B, A, B, A, ... (B first because ties cut B).
    return cut_a + excess // 2, cut_b + (excess + 1) // 2


def _front_cuts(count, rng):
    """Of `count` removals, how many come off the front (each one is a coin flip)."""
    return bin(rng.getrandbits(count)).count("1") if count > 0 else 0


def _pair_instances(block, options, rng, dupe_spans):
    """NSP / SOP pairs of every document of the block (one dupe pass).

    Appends `(a_lo, a_hi, b_lo, b_hi, label, truncated)` token spans to `dupe_spans`.
    """
    splits = block.sentence_splits.tolist()
    docs = block.document_splits.tolist()
    num_docs = block.num_documents
    max_num_tokens = options.max_seq_length - 3  # [CLS] A [SEP] B [SEP]
    sop = options.objective == "sop"
    for doc in range(num_docs):
        first, end = docs[doc], docs[doc + 1]
        # Usually fill the sequence; with short_seq_prob aim shorter, to lessen
        # the mismatch with short fine-tuning inputs.
        target = max_num_tokens
        if rng.random() < options.short_seq_prob:
            target = rng.randint(2, max_num_tokens)
        chunk_start = i = first
        current_length = 0
        while i < end:
            current_length += splits[i + 1] - splits[i]
            if i == end - 1 or current_length >= target:
                chunk_size = i - chunk_start + 1
                a_end = 1 if chunk_size < 2 else rng.randint(1, chunk_size - 1)
                a_lo, a_hi = splits[chunk_start], splits[chunk_start + a_end]
                if chunk_size == 1 or (not sop and rng.random() < 0.5):
                    # Random next: B from another document of the block.
                    label = 1
                    target_b = target - (a_hi - a_lo)
                    for _ in range(10):
                        other = rng.randint(0, num_docs - 1)
                        if other != doc:
                            break
                    start = rng.randint(docs[other], docs[other + 1] - 1)
                    b_lo = b_hi = splits[start]
                    for j in range(start, docs[other + 1]):
                        b_hi = splits[j + 1]
                        if b_hi - b_lo >= target_b:
                            break
                    # The chunk's unused sentences go back for the next chunk.
                    i -= chunk_size - a_end
                elif sop and rng.random() < 0.5:
                    # ALBERT sentence order: the actual next segment, swapped.
                    label = 1
                    b_lo, b_hi = a_lo, a_hi
                    a_lo, a_hi = a_hi, splits[i + 1]
                else:
                    label = 0
                    b_lo, b_hi = a_hi, splits[i + 1]
                cut_a, cut_b = _truncate_counts(a_hi - a_lo, b_hi - b_lo, max_num_tokens)
                front_a, front_b = _front_cuts(cut_a, rng), _front_cuts(cut_b, rng)
                dupe_spans.append((a_lo + front_a, a_hi - (cut_a - front_a),
                                   b_lo + front_b, b_hi - (cut_b - front_b),
                                   label, cut_a + cut_b > 0))
                chunk_start = i + 1
                current_length = 0
            i += 1


def _pair_arrays(block, spans, options, vocab):
    """Token spans -> [CLS] A [SEP] B [SEP] arrays, all instances at once."""
    t = np.arange(options.max_seq_length)[np.newaxis]  # (1, T)
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 6)
    a_lo, a_hi, b_lo, b_hi = (spans[:, k:k + 1] for k in range(4))  # (N, 1) each
    len_a, len_b = a_hi - a_lo, b_hi - b_lo
    in_a = (t >= 1) & (t < 1 + len_a)
    in_b = (t >= 2 + len_a) & (t < 2 + len_a + len_b)
    source = np.where(in_a, a_lo + t - 1, np.where(in_b, b_lo + t - 2 - len_a, 0))
    ids = np.where(in_a | in_b, block.token_ids[source], 0).astype(np.int32)  # (N, T)
    ids[:, 0] = vocab.cls_id
    ids[t == 1 + len_a] = vocab.sep_id
    ids[t == 2 + len_a + len_b] = vocab.sep_id
    lengths = (3 + len_a + len_b)[:, 0]
    segment_ids = ((t >= 2 + len_a) & (t < lengths[:, np.newaxis])).astype(np.int32)
    return Instances(ids, lengths, segment_ids, spans[:, 4].astype(np.int32),
                     int(spans[:, 5].sum()))


def _packed_instances(block, options, rng, vocab):
    """RoBERTa FULL-SENTENCES: contiguous whole sentences up to the target length.

    Sequences may cross documents (inside the block, in a shuffled document
    order); a [SEP] separates documents. A sentence longer than the sequence is
    cut into sequence-sized pieces. One segment, no pair label.
    """
    splits = block.sentence_splits.tolist()
    docs = block.document_splits.tolist()
    max_num_tokens = options.max_seq_length - 2  # [CLS] ... [SEP]
    sequences = []

    def new_target():
        if rng.random() < options.short_seq_prob:
            return rng.randint(1, max_num_tokens)
        return max_num_tokens

    current, length, target = [], 0, new_target()
    order = list(range(block.num_documents))
    rng.shuffle(order)
    for doc in order:
        if current:
            if length + 1 >= target:
                sequences.append(current)
                current, length, target = [], 0, new_target()
            else:
                current.append(None)  # document separator
                length += 1
        for s in range(docs[doc], docs[doc + 1]):
            lo, hi = splits[s], splits[s + 1]
            if current and length + hi - lo > target:
                sequences.append(current)
                current, length, target = [], 0, new_target()
            while hi - lo > target:  # longer than a whole sequence
                sequences.append([(lo, lo + target)])
                lo += target
                target = new_target()
            current.append((lo, hi))
            length += hi - lo
    if current:
        sequences.append(current)

    ids = np.zeros((len(sequences), options.max_seq_length), np.int32)
    lengths = np.zeros(len(sequences), np.int64)
    sep = np.array([vocab.sep_id], np.int32)
    for n, parts in enumerate(sequences):
        if parts[-1] is None:
            parts.pop()
        pieces = [np.array([vocab.cls_id], np.int32)]
        pieces += [sep if p is None else block.token_ids[p[0]:p[1]] for p in parts]
        pieces.append(sep)
        row = np.concatenate(pieces)
        ids[n, :len(row)] = row
        lengths[n] = len(row)
    return Instances(ids, lengths, np.zeros_like(ids), np.zeros(len(sequences), np.int32))


def create_instances(block: Block, options: PretrainingOptions, vocab: VocabInfo,
                     rng: random.Random) -> Instances:
    """All dupe passes of one block, shuffled together (the original shuffles globally)."""
    parts = []
    for _ in range(options.dupe_factor):
        if options.objective == "none":
            parts.append(_packed_instances(block, options, rng, vocab))
        else:
            spans = []
            _pair_instances(block, options, rng, spans)
            parts.append(_pair_arrays(block, spans, options, vocab))
    order = list(range(sum(len(p.lengths) for p in parts)))
    rng.shuffle(order)
    return Instances(
        input_ids=np.concatenate([p.input_ids for p in parts])[order],
        lengths=np.concatenate([p.lengths for p in parts])[order],
        segment_ids=np.concatenate([p.segment_ids for p in parts])[order],
        next_sentence_labels=np.concatenate([p.next_sentence_labels for p in parts])[order],
        truncated=sum(p.truncated for p in parts))


# === Masking (create_masked_lm_predictions) ===

def mask_instances(input_ids: np.ndarray, lengths: np.ndarray, options: PretrainingOptions,
                   vocab: VocabInfo, rng: np.random.Generator) -> MaskedLm:
    """The original's masked-LM choice for every instance at once.

    Per instance, `min(P, max(1, round(length * masked_lm_prob)))` tokens are
    predicted (the original counts [CLS] and [SEP] in the length); [CLS] and
    [SEP] are never chosen. Units (tokens, or whole words: a piece plus the
    `##` pieces after it) are visited in random order and taken while they fit
    in the budget, skipping those that would exceed it, as the original does.
    A chosen unit becomes [MASK] 80 % of the time, stays itself 10 % and each
    of its pieces becomes a random token 10 %.
    """
    num, seq_length = input_ids.shape  # (N, T)
    max_predictions = options.max_predictions_per_seq
    t = np.arange(seq_length)
    candidate = ((t[np.newaxis] < lengths[:, np.newaxis])
                 & (input_ids != vocab.cls_id) & (input_ids != vocab.sep_id))  # (N, T)
    budget = np.minimum(max_predictions,
                        np.maximum(1, np.round(lengths * options.masked_lm_prob))).astype(np.int64)

    keys = rng.random((num, seq_length))  # a unit's place in the random visiting order
    if options.do_whole_word_mask:
        chosen, unit_start = _whole_word_choice(input_ids, candidate, budget, keys, vocab)
        # One draw per unit, so a whole word is masked, kept or randomised together.
        action = rng.random((num, seq_length))[np.arange(num)[:, np.newaxis], unit_start]
    else:
        # Every unit is one token, and all fit: the first min(budget, tokens) visited.
        chosen = _first_visited(np.where(candidate, keys, 2.0),
                                np.minimum(budget, candidate.sum(axis=1)))
        action = rng.random((num, seq_length))
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.9)
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
        candidates=int(candidate.sum()), replaced_by_mask=int(to_mask.sum()),
        kept=int((chosen & ~to_mask & ~to_random).sum()),
        replaced_by_random=int(to_random.sum()))


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
        np.put_along_axis(exact, order, np.arange(seq_length) < count[tied][:, np.newaxis],
                          axis=1)
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
    cumulative = np.concatenate([np.zeros((num, 1), np.int64),
                                 np.cumsum(candidate, axis=1)], axis=1)  # (N, T + 1)
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


# === tf.Example encoding ===
#
# A tf.train.Example is a small protobuf; encoding it here keeps TensorFlow out of
# the worker processes. Example{features=1: Features{feature=1: map<string,
# Feature>}}, Feature{float_list=2 | int64_list=3}, lists are packed field 1.

def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_TABLE_LIMIT = 1 << 21  # values below this take at most 3 varint bytes


def _varint_groups(values, groups_needed):
    """Varint bytes of `values` (..., ) as (..., G) uint8 and their sizes (...,)."""
    shifts = 7 * np.arange(groups_needed)
    groups = ((values[..., np.newaxis] >> shifts) & 0x7F).astype(np.uint8)
    size = np.ones(values.shape, np.int64)
    for k in range(1, groups_needed):
        size += values >= (1 << (7 * k))
    groups |= ((np.arange(groups_needed) < size[..., np.newaxis] - 1) * 0x80).astype(np.uint8)
    return groups, size


def varint_rows(values: np.ndarray, table: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(N, K) non-negative ints -> (uint8 array of all rows' packed varints, (N + 1,) row offsets).

    `table`: optional precomputed (bytes (M, 3), sizes (M,)) for values below M.
    """
    values = np.asarray(values, np.int64)
    num, width = values.shape
    largest = int(values.max(initial=0))
    if values.size and values.min() < 0:
        raise ValueError("varint_rows encodes non-negative integers")
    if largest < 0x80:  # one byte each: masks, segment ids, short positions, labels
        return values.astype(np.uint8).reshape(-1), np.arange(num + 1) * width
    if table is not None and largest < len(table[1]):
        groups, size = table[0][values], table[1][values]  # (N, K, 3), (N, K)
    else:
        groups, size = _varint_groups(values, (largest.bit_length() + 6) // 7)
    used = np.arange(groups.shape[-1]) < size[..., np.newaxis]
    offsets = np.concatenate([[0], np.cumsum(size.sum(axis=1))])
    return groups[used], offsets


class ExampleEncoder:
    """Encodes rows of non-negative ints / floats as serialized tf.train.Examples.

    The varints of whole (N, K) arrays are computed with NumPy at once. Per
    feature, a record holds a header (it depends only on the payload's length,
    so the few distinct ones are cached) and the payload. Features whose
    payloads have one length in every row become one (N, bytes) array with the
    header in each row, and runs of such features one array; a record is then
    a join of a few slices.
    """

    def __init__(self, table_size: int = 1 << 16) -> None:
        self._headers = {}
        self._table = _varint_groups(np.arange(min(table_size, _TABLE_LIMIT)), 3)

    def _header(self, name, kind, payload_length):
        """Bytes of a map entry up to its packed payload of `payload_length` bytes."""
        key = (name, kind, payload_length)
        header = self._headers.get(key)
        if header is None:
            name_field = b"\x0a" + _varint(len(name)) + name.encode()
            value_list = 1 + len(_varint(payload_length)) + payload_length
            feature = 1 + len(_varint(value_list)) + value_list
            entry = len(name_field) + 1 + len(_varint(feature)) + feature
            header = (b"\x0a" + _varint(entry) + name_field + b"\x12" + _varint(feature) + kind
                      + _varint(value_list) + b"\x0a" + _varint(payload_length))
            self._headers[key] = header
        return header

    def encode_rows(self, features: Sequence[tuple[str, np.ndarray]]) -> list[bytes]:
        """features: (name, (N, K) array) pairs; float32 arrays become float lists -> N records."""
        num = len(features[0][1]) if features else 0
        columns = []  # per run of features: N byte strings
        fixed = None  # (N, bytes) uint8: the current run of same-length features
        body = np.zeros(num, np.int64)  # (N,) bytes of each record after its prefix
        for name, values in features:
            values = np.asarray(values)
            if values.dtype == np.float32:
                payload = np.ascontiguousarray(values, "<f4").view(np.uint8).reshape(-1)
                offsets = np.arange(num + 1) * values.shape[1] * 4
                kind = b"\x12"
            else:
                payload, offsets = varint_rows(values, self._table)
                kind = b"\x1a"
            lengths = np.diff(offsets)
            if num and (lengths == lengths[0]).all():
                header = np.frombuffer(self._header(name, kind, int(lengths[0])), np.uint8)
                rows = np.concatenate([np.broadcast_to(header, (num, len(header))),
                                       payload.reshape(num, -1)], axis=1)
                fixed = rows if fixed is None else np.concatenate([fixed, rows], axis=1)
                body += rows.shape[1]
                continue
            if fixed is not None:
                columns.append(_rows_as_bytes(fixed))
                fixed = None
            distinct, which = np.unique(lengths, return_inverse=True)
            headers = [self._header(name, kind, int(n)) for n in distinct]
            body += np.array([len(h) for h in headers], np.int64)[which] + lengths
            data, offsets = payload.tobytes(), offsets.tolist()
            columns.append([headers[h] + data[a:b] for h, a, b in
                            zip(which.tolist(), offsets[:-1], offsets[1:])])
        if fixed is not None:
            columns.append(_rows_as_bytes(fixed))
        # Each record: the Example's field 1 tag, the body's length, the body.
        prefixes = {n: b"\x0a" + _varint(n) for n in np.unique(body).tolist()}
        return [b"".join(parts) for parts in zip([prefixes[n] for n in body.tolist()], *columns)]


def _rows_as_bytes(rows):
    """(N, W) uint8 -> N byte strings of W bytes."""
    width = rows.shape[1]
    data = rows.tobytes()
    return [data[i:i + width] for i in range(0, len(data), width)]


def encode_instances(instances: Instances, masked: MaskedLm | None, options: PretrainingOptions,
                     encoder: ExampleEncoder) -> list[bytes]:
    """Instances (and their masks, unless unmasked output) -> serialized tf.Examples.

    Features in the original writer's order; `masked=None` writes unmasked
    records (no masked_lm_* features) for dynamic masking at read time.
    """
    seq_length = options.max_seq_length
    input_mask = np.arange(seq_length)[np.newaxis] < instances.lengths[:, np.newaxis]
    columns = [masked.input_ids if masked is not None else instances.input_ids, input_mask,
               instances.segment_ids]
    if masked is not None:
        columns += [masked.masked_lm_positions, masked.masked_lm_ids, masked.masked_lm_weights]
    names = features.ENCODER_INPUTS + (features.MASKED_LM_FEATURES if masked is not None else ())
    rows = list(zip(names, columns))
    if options.with_next_sentence:
        rows.append((features.NEXT_SENTENCE_LABELS, instances.next_sentence_labels[:, np.newaxis]))
    return encoder.encode_rows(rows)


# === One block, end to end (what a worker runs) ===

@dataclasses.dataclass
class BlockResult:
    index: int
    records: list
    documents: int = 0
    instances: int = 0
    instance_tokens: int = 0
    candidates: int = 0
    masked: int = 0
    replaced_by_mask: int = 0
    kept: int = 0
    replaced_by_random: int = 0
    next_sentence_positive: int = 0
    truncated: int = 0


def process_block(block: Block, options: PretrainingOptions, vocab: VocabInfo,
                  encoder: ExampleEncoder) -> BlockResult:
    """Block -> shuffled, masked, serialized records, with their statistics."""
    seed = block_seed(options.random_seed, block.index)
    rng = random.Random(seed)
    np_rng = np.random.Generator(np.random.PCG64(seed))
    instances = create_instances(block, options, vocab, rng)
    result = BlockResult(index=block.index, records=[], documents=block.num_documents,
                         instances=len(instances.lengths),
                         instance_tokens=int(instances.lengths.sum()),
                         next_sentence_positive=int(instances.next_sentence_labels.sum()),
                         truncated=instances.truncated)
    masked = None
    if options.mask and len(instances.lengths):
        masked = mask_instances(instances.input_ids, instances.lengths, options, vocab, np_rng)
        result.candidates = masked.candidates
        result.masked = int(masked.masked_lm_weights.sum())
        result.replaced_by_mask = masked.replaced_by_mask
        result.kept = masked.kept
        result.replaced_by_random = masked.replaced_by_random
    else:
        ids = instances.input_ids
        real = np.arange(ids.shape[1])[np.newaxis] < instances.lengths[:, np.newaxis]
        result.candidates = int((real & (ids != vocab.cls_id) & (ids != vocab.sep_id)).sum())
    result.records = encode_instances(instances, masked, options, encoder)
    return result



def _ignore_interrupts():
    # Ctrl-C goes to the whole process group; only the parent handles it (it
    # terminates the pool and removes the unfinished shards).
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start_workers(num_workers: int) -> multiprocessing.pool.Pool:
    """A pool of `num_workers` processes for `create_pretraining_data(pool=...)`.

    The workers run only NumPy and Python (`process_block`). Started before
    the parent imports TensorFlow (as the command line does), they are small
    forks of a small process that overlap with that import, instead of forks
    of a 600 MB one whose pages they would copy on write.
    """
    import multiprocessing
    return multiprocessing.get_context("fork").Pool(num_workers, initializer=_ignore_interrupts)


_ENCODERS = {}  # per process: ExampleEncoder by table size


def _process_block_with_cached_encoder(block, options, vocab):
    table_size = max(vocab.size, options.max_seq_length) + 1
    encoder = _ENCODERS.get(table_size)
    if encoder is None:
        encoder = _ENCODERS[table_size] = ExampleEncoder(table_size)
    return process_block(block, options, vocab, encoder)


# === Reading text: one sentence per line, a blank line between documents ===

@dataclasses.dataclass
class ReadStats:
    files: int = 0
    bytes_read: int = 0
    lines: int = 0
    invalid_utf8_lines: int = 0
    invalid_utf8_examples: list = dataclasses.field(default_factory=list)  # "file:line"
    empty_files: list = dataclasses.field(default_factory=list)


def _open_binary(path):
    if "://" in path:
        import tensorflow as tf
        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def read_documents(files: Iterable[str], stats: ReadStats | None = None
                   ) -> Iterator[list[str]]:
    """Yields documents, each a list of sentences (stripped, non-empty lines).

    A blank line or the end of a file ends a document. Bytes that are not UTF-8
    are dropped, as the original's `convert_to_unicode(..., "ignore")` does;
    such lines are counted and the first few named in `stats`.
    """
    stats = stats if stats is not None else ReadStats()
    for path in files:
        stats.files += 1
        has_text = False
        document = []
        with _open_binary(path) as f:
            for line_number, raw in enumerate(f, 1):
                stats.bytes_read += len(raw)
                stats.lines += 1
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    line = raw.decode("utf-8", "ignore")
                    stats.invalid_utf8_lines += 1
                    if len(stats.invalid_utf8_examples) < 5:
                        stats.invalid_utf8_examples.append(f"{path}:{line_number}")
                line = line.strip()
                if line:
                    document.append(line)
                    has_text = True
                elif document:
                    yield document
                    document = []
        if document:
            yield document
        if not has_text:
            stats.empty_files.append(path)


def iter_blocks(documents: Iterable[list[str]], block_documents: int | None = None,
                block_chars: int | None = None, block_min_documents: int | None = None
                ) -> Iterator[list[list[str]]]:
    """Groups documents into blocks; the boundaries depend on the text only."""
    block_documents = block_documents or BLOCK_DOCUMENTS
    block_chars = block_chars or BLOCK_CHARS
    block_min_documents = block_min_documents or BLOCK_MIN_DOCUMENTS
    block, chars = [], 0
    for document in documents:
        block.append(document)
        chars += sum(len(s) for s in document)
        if len(block) >= block_documents or (chars >= block_chars
                                             and len(block) >= block_min_documents):
            yield block
            block, chars = [], 0
    if block:
        yield block


def make_tokenize_fn(tokenizer: BertTokenizer, batch_size: int = 4096
                     ) -> Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]:
    """strings -> (flat int32 ids, per-string lengths), batched through the in-graph tokenizer."""
    import tensorflow as tf

    strings_spec = [tf.TensorSpec([None], tf.string)]

    @tf.function(input_signature=strings_spec, autograph=False)
    def tokenize_common(strings):
        ids, may_have_long_words = tokenizer.tokenize_unless_long_words(strings)
        return ids.flat_values, ids.row_lengths(), may_have_long_words

    # Traced only if some batch may hold a word of over `max_chars_per_word`.
    @tf.function(input_signature=strings_spec, autograph=False)
    def tokenize_exact(strings):
        ids = tokenizer.tokenize(strings)
        return ids.flat_values, ids.row_lengths()

    def run(strings):
        flats, lengths = [], []
        for start in range(0, len(strings), batch_size):
            batch = tf.constant(strings[start:start + batch_size])
            flat, length, may_have_long_words = tokenize_common(batch)
            if may_have_long_words:
                flat, length = tokenize_exact(batch)
            flats.append(flat.numpy())
            lengths.append(length.numpy())
        if not flats:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        return np.concatenate(flats).astype(np.int32), np.concatenate(lengths).astype(np.int64)

    return run


def tokenize_block(index: int, documents: Sequence[Sequence[str]],
                   tokenize_fn: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]) -> Block:
    """Documents of strings -> Block; sentences without tokens and then empty documents drop out."""
    sentences = [s for document in documents for s in document]
    token_ids, lengths = tokenize_fn(sentences)
    per_document = np.array([len(d) for d in documents], np.int64)
    keep = lengths > 0
    # Sentences kept per document, then documents that kept any.
    kept_per_document = np.add.reduceat(keep.astype(np.int64), np.concatenate(
        [[0], np.cumsum(per_document)[:-1]])) if len(per_document) else per_document
    kept_per_document = kept_per_document[kept_per_document > 0]
    return Block(index=index, token_ids=token_ids,
                 sentence_splits=np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64),
                 document_splits=np.concatenate([[0], np.cumsum(kept_per_document)]).astype(np.int64))


# === The whole run: read, tokenize, create in parallel, write shards ===

@dataclasses.dataclass
class Summary:
    input_files: int = 0
    documents: int = 0
    instances: int = 0
    tokens: int = 0  # word pieces in the instances, [CLS] / [SEP] included
    candidates: int = 0  # maskable tokens: everything but [CLS] / [SEP]
    masked: int = 0
    replaced_by_mask: int = 0
    kept: int = 0
    replaced_by_random: int = 0
    next_sentence_positive: int = 0  # NotNext (nsp) / swapped (sop)
    truncated_instances: int = 0
    invalid_utf8_lines: int = 0
    invalid_utf8_examples: list = dataclasses.field(default_factory=list)
    empty_files: list = dataclasses.field(default_factory=list)
    output_files: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def add(self, result: BlockResult) -> None:
        for name in ("documents", "instances", "candidates", "masked", "replaced_by_mask",
                     "kept", "replaced_by_random", "next_sentence_positive"):
            setattr(self, name, getattr(self, name) + getattr(result, name))
        self.tokens += result.instance_tokens
        self.truncated_instances += result.truncated

    def to_text(self, options: PretrainingOptions) -> str:
        def share(part, whole):
            return f"{100.0 * part / whole:.2f} %" if whole else "n/a"
        lines = [
            f"input files: {self.input_files}",
            f"documents: {self.documents}",
            f"instances: {self.instances} ({self.instances / max(self.seconds, 1e-9):.0f}/s)",
            f"tokens: {self.tokens}",
        ]
        if options.mask:
            lines.append(f"masked: {self.masked} of {self.candidates} maskable tokens "
                         f"({share(self.masked, self.candidates)}); [MASK] "
                         f"{share(self.replaced_by_mask, self.masked)}, kept "
                         f"{share(self.kept, self.masked)}, random "
                         f"{share(self.replaced_by_random, self.masked)}")
        else:
            lines.append("masked: none (unmasked records for dynamic masking)")
        if options.objective == "nsp":
            lines.append(f"NotNext: {share(self.next_sentence_positive, self.instances)}")
        elif options.objective == "sop":
            lines.append(f"swapped: {share(self.next_sentence_positive, self.instances)}")
        lines.append(f"truncated instances: {self.truncated_instances}")
        if self.invalid_utf8_lines:
            lines.append(f"lines with invalid UTF-8 (bytes dropped): {self.invalid_utf8_lines}, "
                         f"first at {', '.join(self.invalid_utf8_examples)}")
        if self.empty_files:
            lines.append(f"files without text (skipped): {len(self.empty_files)}: "
                         f"{', '.join(self.empty_files[:5])}")
        lines.append(f"output: {', '.join(self.output_files)}")
        lines.append(f"seconds: {self.seconds:.1f}")
        return "\n".join(lines)


def expand_input_files(input_file: str) -> list[str]:
    """Comma-separated files or globs (local or gs://) -> files, in the given order."""
    import tensorflow as tf
    files = []
    for pattern in str(input_file).split(","):
        pattern = pattern.strip()
        if not pattern:
            continue
        matched = sorted(tf.io.gfile.glob(pattern))
        if not matched:
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        for path in matched:
            if tf.io.gfile.isdir(path):
                raise ValueError(f"input {path} is a directory; give files or a glob such as "
                                 f"{path.rstrip('/')}/*.txt")
        files.extend(matched)
    if not files:
        raise FileNotFoundError("no input files given")
    return files


def output_file_names(output_file: str, num_shards: int) -> list[str]:
    """`a,b,c` -> those files; else one file, or `<name>-00000-of-0000N` shards."""
    if "," in output_file:
        return [name.strip() for name in output_file.split(",") if name.strip()]
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    if num_shards == 1:
        return [output_file]
    return [f"{output_file}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]


class _Progress:
    """One self-updating line on stderr: input read, documents, instances, speed."""

    def __init__(self, total_bytes, enabled):
        import sys
        import time
        self._time, self._stream = time.monotonic, sys.stderr
        self.enabled = enabled and total_bytes > 0
        self.total = total_bytes
        self.start = self._last = self._time()

    def update(self, bytes_read, summary, final=False):
        now = self._time()
        if not self.enabled or (not final and now - self._last < 0.5):
            return
        self._last = now
        fraction = min(1.0, bytes_read / self.total)
        bar = "#" * int(30 * fraction)
        rate = summary.instances / max(now - self.start, 1e-9)
        self._stream.write(f"\r[{bar:<30}] {100 * fraction:5.1f} % {summary.documents} documents, "
                           f"{summary.instances} instances, {rate:.0f}/s")
        if final:
            self._stream.write("\n")
        self._stream.flush()


def _file_key(path):
    import tensorflow as tf
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    stat = tf.io.gfile.stat(path)
    return stat.length, stat.mtime_nsec


@functools.lru_cache(maxsize=4)
def _cached_tokenizer(vocab_file, do_lower_case, file_key):
    """One tokenizer and one traced tokenize function per vocabulary (tracing takes seconds)."""
    from keras_bert.text.tokenizer import BertTokenizer
    tokenizer = BertTokenizer(vocab_file, lowercase=do_lower_case)
    return tokenizer, make_tokenize_fn(tokenizer)


def create_pretraining_data(input_file: str, output_file: str, vocab_file: str,
                            options: PretrainingOptions | None = None, do_lower_case: bool = True,
                            num_shards: int = 1, num_workers: int | None = None,
                            gzip: bool = False, progress: bool = False,
                            pool: multiprocessing.pool.Pool | None = None) -> Summary:
    """Text files -> TFRecord shards of pretraining instances; returns a `Summary`.

    Args:
      input_file: comma-separated files or globs; one sentence per line, a blank
        line between documents.
      output_file: one file, a comma-separated list of files, or the prefix of
        `num_shards` shards.
      vocab_file: WordPiece vocabulary (one token per line).
      options: `PretrainingOptions`.
      num_workers: processes creating instances; default all cores. Any value
        gives the same bytes.
      pool: `start_workers(num_workers)`'s pool to use (and leave running)
        instead of starting one here.
    """
    import collections
    import os
    import time

    import tensorflow as tf

    options = options or PretrainingOptions()
    started = time.monotonic()
    files = expand_input_files(input_file)
    outputs = output_file_names(output_file, num_shards)
    for path in outputs:
        directory = os.path.dirname(path)
        if directory and "://" not in path and not os.path.isdir(directory):
            raise FileNotFoundError(f"output directory does not exist: {directory} "
                                    f"(for {path})")
    num_workers = os.cpu_count() if num_workers is None else num_workers

    tokenizer, tokenize_fn = _cached_tokenizer(vocab_file, do_lower_case, _file_key(vocab_file))
    vocab = VocabInfo.from_tokens(tokenizer.vocab)

    summary = Summary(input_files=len(files), output_files=outputs)
    stats = ReadStats()
    bar = _Progress(sum(tf.io.gfile.stat(f).length for f in files), progress)
    temporary = [f"{path}.incomplete" for path in outputs]
    writers = [tf.io.TFRecordWriter(path, options="GZIP" if gzip else "") for path in temporary]
    # Workers only run NumPy / Python (process_block), never TensorFlow, so
    # forking this process (which has TensorFlow loaded) is safe.
    own_pool = pool is None and num_workers > 1
    if own_pool:
        pool = start_workers(num_workers)
    shard = 0

    def write(result, bytes_done):
        nonlocal shard
        for record in result.records:
            writers[shard].write(record)
            shard = (shard + 1) % len(writers)
        result.records = None
        summary.add(result)
        bar.update(bytes_done, summary)

    completed = False
    try:
        pending = collections.deque()
        blocks = iter_blocks(read_documents(files, stats))
        for index, documents in enumerate(blocks):
            block = tokenize_block(index, documents, tokenize_fn)
            if block.num_documents == 0:
                continue
            if pool is None:
                write(_process_block_with_cached_encoder(block, options, vocab), stats.bytes_read)
                continue
            pending.append((pool.apply_async(_process_block_with_cached_encoder, (block, options, vocab)),
                            stats.bytes_read))
            # Bounded look-ahead keeps memory flat; results are written in block order.
            while len(pending) > 2 * num_workers or (pending and pending[0][0].ready()):
                result, bytes_done = pending.popleft()
                write(result.get(), bytes_done)
        while pending:
            result, bytes_done = pending.popleft()
            write(result.get(), bytes_done)
        completed = True
    finally:
        if own_pool:
            # Every result is in (or the run failed): no need to wait for the
            # workers to wind down their interpreters.
            pool.terminate()
            pool.join()
        for writer in writers:
            writer.close()
        if not completed:
            for path in temporary:
                if tf.io.gfile.exists(path):
                    tf.io.gfile.remove(path)
    bar.update(stats.bytes_read, summary, final=True)
    if summary.instances == 0:
        for path in temporary:
            tf.io.gfile.remove(path)
        raise ValueError(f"no text to make instances from in {', '.join(files)}")
    # Only complete shards get their final names: an interrupted run leaves
    # `.incomplete` files, never a truncated shard that looks finished.
    for path, final in zip(temporary, outputs):
        tf.io.gfile.rename(path, final, overwrite=True)
    summary.invalid_utf8_lines = stats.invalid_utf8_lines
    summary.invalid_utf8_examples = stats.invalid_utf8_examples
    summary.empty_files = stats.empty_files
    summary.seconds = time.monotonic() - started
    return summary
