"""One block, end to end (what a worker process runs), and the worker pool."""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING

import numpy as np

from keras_bert.pretraining_data.instances import create_instances
from keras_bert.pretraining_data.options import Block, PretrainingOptions, VocabInfo, block_seed
from keras_bert.pretraining_data.records import ExampleEncoder, encode_instances
from keras_bert.pretraining_data.static_masking import mask_instances

if TYPE_CHECKING:
    import multiprocessing.pool


# The counts of a `BlockResult`, named as the fields of a run's `Summary`.
COUNTED = (
    "documents",
    "instances",
    "tokens",  # word pieces in the instances
    "candidates",
    "masked",
    "replaced_by_mask",
    "kept",
    "replaced_by_random",
    "next_sentence_positive",
    "truncated_instances",
)


@dataclasses.dataclass
class BlockResult:
    index: int
    records: list
    counts: dict[str, int]  # by `COUNTED`'s names


def process_block(
    block: Block, options: PretrainingOptions, vocab: VocabInfo, encoder: ExampleEncoder
) -> BlockResult:
    """Block -> shuffled, masked, serialized records, with their statistics."""
    seed = block_seed(options.random_seed, block.index)
    rng = random.Random(seed)
    np_rng = np.random.Generator(np.random.PCG64(seed))
    instances = create_instances(block, options, vocab, rng)
    counts = dict.fromkeys(COUNTED, 0)
    counts.update(
        documents=block.num_documents,
        instances=len(instances.lengths),
        tokens=int(instances.lengths.sum()),
        next_sentence_positive=int(instances.next_sentence_labels.sum()),
        truncated_instances=instances.truncated,
    )
    masked = None
    if options.mask and len(instances.lengths):
        masked = mask_instances(instances.input_ids, instances.lengths, options, vocab, np_rng)
        counts.update(
            candidates=masked.candidates,
            masked=int(masked.masked_lm_weights.sum()),
            replaced_by_mask=masked.replaced_by_mask,
            kept=masked.kept,
            replaced_by_random=masked.replaced_by_random,
        )
    else:
        ids = instances.input_ids
        real = np.arange(ids.shape[1])[np.newaxis] < instances.lengths[:, np.newaxis]
        counts["candidates"] = int((real & (ids != vocab.cls_id) & (ids != vocab.sep_id)).sum())
    records = encode_instances(instances, masked, options, encoder)
    return BlockResult(block.index, records, counts)


def _ignore_interrupts():
    # Ctrl-C goes to the whole process group; only the parent handles it (it
    # terminates the pool and removes the unfinished shards).
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The command's SIGTERM handler (an exception, to unwind the parent) is
    # inherited by the fork; the pool ends its workers with SIGTERM: they just go.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
