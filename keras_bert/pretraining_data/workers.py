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


# The counts a `BlockResult` and a run's `Summary` both keep, by the same names.
COUNTED = (
    "documents",
    "instances",
    "candidates",
    "masked",
    "replaced_by_mask",
    "kept",
    "replaced_by_random",
    "next_sentence_positive",
)


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


def process_block(
    block: Block, options: PretrainingOptions, vocab: VocabInfo, encoder: ExampleEncoder
) -> BlockResult:
    """Block -> shuffled, masked, serialized records, with their statistics."""
    seed = block_seed(options.random_seed, block.index)
    rng = random.Random(seed)
    np_rng = np.random.Generator(np.random.PCG64(seed))
    instances = create_instances(block, options, vocab, rng)
    result = BlockResult(
        index=block.index,
        records=[],
        documents=block.num_documents,
        instances=len(instances.lengths),
        instance_tokens=int(instances.lengths.sum()),
        next_sentence_positive=int(instances.next_sentence_labels.sum()),
        truncated=instances.truncated,
    )
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
