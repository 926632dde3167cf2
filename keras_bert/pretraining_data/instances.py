"""Instances from a block of documents: `create_instances_from_document` of
google-research/bert, vectorised over a block's flat token array (NSP / SOP
pairs, or packed sequences without NSP).

Legend for shape comments: N = instances in a block, T = max_seq_length.
"""

from __future__ import annotations

import random

import numpy as np

from keras_bert.pretraining_data.options import Block, Instances, PretrainingOptions, VocabInfo


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
                dupe_spans.append(
                    (
                        a_lo + front_a,
                        a_hi - (cut_a - front_a),
                        b_lo + front_b,
                        b_hi - (cut_b - front_b),
                        label,
                        cut_a + cut_b > 0,
                    )
                )
                chunk_start = i + 1
                current_length = 0
            i += 1


def _pair_arrays(block, spans, options, vocab):
    """Token spans -> [CLS] A [SEP] B [SEP] arrays, all instances at once."""
    t = np.arange(options.max_seq_length)[np.newaxis]  # (1, T)
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 6)
    a_lo, a_hi, b_lo, b_hi = (spans[:, k : k + 1] for k in range(4))  # (N, 1) each
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
    return Instances(
        ids, lengths, segment_ids, spans[:, 4].astype(np.int32), int(spans[:, 5].sum())
    )


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
        pieces += [sep if p is None else block.token_ids[p[0] : p[1]] for p in parts]
        pieces.append(sep)
        row = np.concatenate(pieces)
        ids[n, : len(row)] = row
        lengths[n] = len(row)
    return Instances(ids, lengths, np.zeros_like(ids), np.zeros(len(sequences), np.int32))


def create_instances(
    block: Block, options: PretrainingOptions, vocab: VocabInfo, rng: random.Random
) -> Instances:
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
        truncated=sum(p.truncated for p in parts),
    )
