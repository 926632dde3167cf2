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
from typing import TYPE_CHECKING

from keras_bert import safe_output
from keras_bert.pretraining_data.options import PretrainingOptions, VocabInfo
from keras_bert.pretraining_data.reading import (
    ReadStats,
    iter_blocks,
    make_tokenize_fn,
    read_documents,
    tokenize_block,
)
from keras_bert.pretraining_data.workers import (
    COUNTED,
    BlockResult,
    _process_block_with_cached_encoder,
    start_workers,
)
from keras_bert.progress import Progress
from keras_bert.text.unknown_rate import UnknownCount, count_ids

if TYPE_CHECKING:
    import multiprocessing.pool


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
    # The input's word pieces as tokenized, before instances are cut from them.
    unknown: UnknownCount = dataclasses.field(default_factory=UnknownCount)

    def add(self, result: BlockResult) -> None:
        for name in COUNTED:
            setattr(self, name, getattr(self, name) + result.counts[name])

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
            lines.append(
                f"masked: {self.masked} of {self.candidates} maskable tokens "
                f"({share(self.masked, self.candidates)}); [MASK] "
                f"{share(self.replaced_by_mask, self.masked)}, kept "
                f"{share(self.kept, self.masked)}, random "
                f"{share(self.replaced_by_random, self.masked)}"
            )
        else:
            lines.append("masked: none (unmasked records for dynamic masking)")
        if options.objective == "nsp":
            lines.append(f"NotNext: {share(self.next_sentence_positive, self.instances)}")
        elif options.objective == "sop":
            lines.append(f"swapped: {share(self.next_sentence_positive, self.instances)}")
        lines.append(f"truncated instances: {self.truncated_instances}")
        if self.unknown.pieces:
            lines.append(self.unknown.line("the input text"))
        if self.invalid_utf8_lines:
            lines.append(
                f"lines with invalid UTF-8 (bytes dropped): {self.invalid_utf8_lines}, "
                f"first at {', '.join(self.invalid_utf8_examples)}"
            )
        if self.empty_files:
            lines.append(
                f"files without text (skipped): {len(self.empty_files)}: "
                f"{', '.join(self.empty_files[:5])}"
            )
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
                raise ValueError(
                    f"input {path} is a directory; give files or a glob such as "
                    f"{path.rstrip('/')}/*.txt"
                )
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


def create_pretraining_data(
    input_file: str,
    output_file: str,
    vocab_file: str,
    options: PretrainingOptions | None = None,
    do_lower_case: bool = True,
    num_shards: int = 1,
    num_workers: int | None = None,
    gzip: bool = False,
    progress: bool = False,
    pool: multiprocessing.pool.Pool | None = None,
) -> Summary:
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
        safe_output.check_not_input(path, files, "the output file")
        directory = os.path.dirname(path)
        if directory and "://" not in path and not os.path.isdir(directory):
            raise FileNotFoundError(f"output directory does not exist: {directory} (for {path})")
    num_workers = os.cpu_count() if num_workers is None else num_workers

    tokenizer, tokenize_fn = _cached_tokenizer(vocab_file, do_lower_case, _file_key(vocab_file))
    vocab = VocabInfo.from_tokens(tokenizer.vocab)

    summary = Summary(input_files=len(files), output_files=outputs)
    stats = ReadStats()
    total_bytes = sum(tf.io.gfile.stat(f).length for f in files)
    bar = Progress(total_bytes, "bytes", enabled=progress)
    # Only complete shards get their final names: an interrupted or failed
    # run leaves no truncated shard that looks finished.
    shards = [safe_output.Replacement(path, make_parents=False) for path in outputs]
    writers: list = []
    # Workers only run NumPy / Python (process_block), never TensorFlow, so
    # forking this process (which has TensorFlow loaded) is safe.
    own_pool = pool is None and num_workers > 1
    shard = 0

    def write(result, bytes_done):
        nonlocal shard
        for record in result.records:
            writers[shard].write(record)
            shard = (shard + 1) % len(writers)
        result.records = None
        summary.add(result)
        bar.update(bytes_done, f"{summary.documents} documents, {summary.instances} instances")

    completed = False
    try:
        # Inside the try: a signal that comes once a partial shard exists removes it.
        with safe_output.reporting_write_errors(output_file):
            for each in shards:
                writers.append(tf.io.TFRecordWriter(each.temporary, options="GZIP" if gzip else ""))
        if own_pool:
            pool = start_workers(num_workers)
        pending = collections.deque()
        blocks = iter_blocks(read_documents(files, stats))
        for index, documents in enumerate(blocks):
            block = tokenize_block(index, documents, tokenize_fn)
            summary.unknown.add(count_ids(block.token_ids, tokenizer))
            if block.num_documents == 0:
                continue
            if pool is None:
                write(_process_block_with_cached_encoder(block, options, vocab), stats.bytes_read)
                continue
            pending.append(
                (
                    pool.apply_async(_process_block_with_cached_encoder, (block, options, vocab)),
                    stats.bytes_read,
                )
            )
            # Bounded look-ahead keeps memory flat; results are written in block order.
            while len(pending) > 2 * num_workers or (pending and pending[0][0].ready()):
                result, bytes_done = pending.popleft()
                write(result.get(), bytes_done)
        while pending:
            result, bytes_done = pending.popleft()
            write(result.get(), bytes_done)
        for writer in writers:
            writer.close()  # flushes: a full disk shows here at the latest
        completed = True
    except Exception as e:
        converted = safe_output.output_error(e, output_file)
        if converted is None:
            raise
        raise converted from e
    finally:
        if own_pool and pool is not None:
            # Every result is in (or the run failed): no need to wait for the
            # workers to wind down their interpreters.
            pool.terminate()
            pool.join()
        if not completed:
            for writer in writers:
                try:
                    writer.close()
                except Exception:  # the error being raised says more
                    pass
            for shard in shards:
                shard.abort()
    if stats.bytes_read:
        bar.update(stats.bytes_read, final=True)
    if summary.instances == 0:
        for shard in shards:
            shard.abort()
        raise ValueError(f"no text to make instances from in {', '.join(files)}")
    for shard in shards:
        shard.commit()
    summary.invalid_utf8_lines = stats.invalid_utf8_lines
    summary.invalid_utf8_examples = stats.invalid_utf8_examples
    summary.empty_files = stats.empty_files
    summary.seconds = time.monotonic() - started
    return summary
