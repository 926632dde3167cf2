"""Pretraining data as an Apache Beam pipeline, for corpora beyond one machine.

The pure per-block functions of `keras_bert.pretraining_data` (read documents,
group them in blocks, tokenize, create and mask instances, encode tf.Examples)
run as Beam transforms, so Dataflow, Flink or Spark can spread a corpus of many
files over many workers. Needs the `beam` extra (`pip install keras_bert[beam]`):

    keras-bert create-pretraining-data --runner DirectRunner \
        --input-file 'corpus/*.txt' --output-file out/train.tfrecord --num-shards 16 \
        --vocab-file vocab.txt
    keras-bert create-pretraining-data --runner DataflowRunner ... --pipeline-options \
        "--project=P --region=R --temp_location=gs://B/tmp --setup_file=./setup.py"

What differs from the in-process run:

* **Blocks per file.** A file is read by one worker, so split a large corpus
  into many files (as the original BERT's README advises). Blocks are formed
  within each file and seeded from (random seed, file number, block number):
  block `b` of file `f` has index `f * FILE_BLOCKS + b`. For a single input
  file, the blocks, their seeds and so the records are exactly those of the
  in-process run.
* **Shards.** The runner decides which shard receives which record and in
  which order: the same records, arranged differently (shuffle at read time
  anyway). Shard names are the same: `<output>-00000-of-0000N`.
* **Shards appear whole, all together.** Beam writes each shard into a
  `beam-temp-*` folder and renames it into place at the end, but one by one,
  after deleting the older shards of the same names: a failure part way
  would leave a mix. So the pipeline's shards get temporary names beside
  the outputs (`NAME.partial-PID`, `safe_output.Replacement`), renamed to
  their final names only once the pipeline has succeeded; a failed run
  removes them (and Beam's temporary folder) and keeps the older output.
* **Statistics** are combined in the pipeline into the same `Summary`; it
  travels through a small file under the pipeline's `--temp_location` (a
  local temporary folder when none is given, enough for DirectRunner).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

try:
    import apache_beam as beam
except ImportError as e:  # the optional `beam` extra
    raise ImportError(
        "keras_bert.pretraining_data.beam (--runner) needs Apache Beam: "
        "pip install 'keras_bert[beam]'"
    ) from e

from keras_bert import safe_output
from keras_bert.errors import output_error
from keras_bert.pretraining_data.create import (
    Summary,
    _cached_tokenizer,
    _file_key,
    expand_input_files,
    output_file_names,
)
from keras_bert.pretraining_data.options import VocabInfo
from keras_bert.pretraining_data.reading import (
    ReadStats,
    iter_blocks,
    read_documents,
    tokenize_block,
)
from keras_bert.pretraining_data.records import ExampleEncoder
from keras_bert.pretraining_data.workers import COUNTED, process_block

if TYPE_CHECKING:
    from keras_bert.pretraining_data.options import PretrainingOptions

# Block index = file number * FILE_BLOCKS + block number within the file.
FILE_BLOCKS = 1 << 32
STATS = "stats"
_EXAMPLES = 5  # file:line examples of invalid UTF-8 kept in the summary


# === Per-file and per-block steps (plain functions; the DoFns below wrap them) ===


def read_file_blocks(
    numbered_file: tuple[int, str], stats: ReadStats | None = None
) -> Iterator[tuple[int, list[list[str]]]]:
    """(file number, path) -> (block index, documents) for each block of the file."""
    number, path = numbered_file
    for block_number, documents in enumerate(iter_blocks(read_documents([path], stats))):
        yield number * FILE_BLOCKS + block_number, documents


def read_statistics(stats: ReadStats) -> dict[str, Any]:
    return {
        "input_files": stats.files,
        "invalid_utf8_lines": stats.invalid_utf8_lines,
        "invalid_utf8_examples": stats.invalid_utf8_examples,
        "empty_files": stats.empty_files,
    }


def merge_statistics(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Sums counts, concatenates lists (of invalid UTF-8 examples, the first few, sorted)."""
    merged = dict(a)
    for name, value in b.items():
        merged[name] = merged.get(name, [] if isinstance(value, list) else 0) + value
    if "invalid_utf8_examples" in merged:
        merged["invalid_utf8_examples"] = sorted(merged["invalid_utf8_examples"])[:_EXAMPLES]
    return merged


# === Beam transforms ===


class ReadFileBlocks(beam.DoFn):
    """(file number, path) -> blocks; the file's read statistics to the STATS output."""

    def process(self, numbered_file):
        stats = ReadStats()
        yield from read_file_blocks(numbered_file, stats)
        yield beam.pvalue.TaggedOutput(STATS, read_statistics(stats))


class CreateRecords(beam.DoFn):
    """(block index, documents) -> serialized tf.Examples; counts to the STATS output."""

    def __init__(self, vocab_file: str, do_lower_case: bool, options: PretrainingOptions) -> None:
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.options = options

    def setup(self) -> None:  # once per worker: the tokenizer takes seconds to build and trace
        tokenizer, self._tokenize = _cached_tokenizer(
            self.vocab_file, self.do_lower_case, _file_key(self.vocab_file)
        )
        self._vocab = VocabInfo.from_tokens(tokenizer.vocab)
        self._encoder = ExampleEncoder(max(self._vocab.size, self.options.max_seq_length) + 1)

    def process(self, indexed_block):
        index, documents = indexed_block
        block = tokenize_block(index, documents, self._tokenize)
        if block.num_documents == 0:
            return
        result = process_block(block, self.options, self._vocab, self._encoder)
        yield from result.records
        yield beam.pvalue.TaggedOutput(STATS, dict(result.counts))  # named as in `Summary`


class MergeStatistics(beam.CombineFn):
    def create_accumulator(self):
        return {}

    def add_input(self, accumulator, stats):
        return merge_statistics(accumulator, stats)

    def merge_accumulators(self, accumulators):
        merged = {}
        for accumulator in accumulators:
            merged = merge_statistics(merged, accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


def build_pipeline(
    pipeline: beam.Pipeline,
    files: Sequence[str],
    outputs: Sequence[str],
    vocab_file: str,
    options: PretrainingOptions,
    do_lower_case: bool = True,
    gzip: bool = False,
    summary_path: str | None = None,
    suffix: str = "",
) -> None:
    """Adds the transforms to `pipeline`: files -> TFRecord shards `outputs`
    (each written as its name + `suffix`), and the combined statistics as one
    JSON line to `summary_path` (if given)."""
    from apache_beam.io.filesystem import CompressionTypes

    read = (
        pipeline
        | "Files" >> beam.Create(list(enumerate(files)))
        | "ReadBlocks" >> beam.ParDo(ReadFileBlocks()).with_outputs(STATS, main="blocks")
    )
    created = (
        read.blocks
        | "Spread" >> beam.Reshuffle()  # a file's blocks over all workers
        | "CreateRecords"
        >> beam.ParDo(CreateRecords(vocab_file, do_lower_case, options)).with_outputs(
            STATS, main="records"
        )
    )
    # `outputs` are `output_file_names(prefix, n)`: the prefix alone, or -SSSSS-of-NNNNN.
    num_shards = len(outputs)
    prefix = outputs[0] if num_shards == 1 else outputs[0][: -len("-00000-of-00000")]
    _ = created.records | "Write" >> beam.io.WriteToTFRecord(
        prefix,
        num_shards=num_shards,
        shard_name_template="" if num_shards == 1 else "-SSSSS-of-NNNNN",
        file_name_suffix=suffix,
        compression_type=CompressionTypes.GZIP if gzip else CompressionTypes.UNCOMPRESSED,
    )
    if summary_path:
        _ = (
            (read[STATS], created[STATS])
            | "AllStatistics" >> beam.Flatten()
            | "Combine" >> beam.CombineGlobally(MergeStatistics())
            | "Json" >> beam.Map(json.dumps)
            | "WriteStatistics"
            >> beam.io.WriteToText(summary_path, shard_name_template="", num_shards=1)
        )


# === The whole run ===


def _beam_temp_folders(output: str) -> set[str]:
    """Beam's temporary folders for the shards of the prefix `output`
    (`beam-temp-NAME-UUID`, beside it), which a failed pipeline leaves
    (on remote storage: the objects inside them)."""
    from apache_beam.io.filesystems import FileSystems

    directory, name = os.path.split(output)
    pattern = f"{directory or '.'}/beam-temp-{name}-*"
    if "://" not in pattern:
        import glob

        return set(glob.glob(pattern))
    return {
        metadata.path
        for match in FileSystems.match([pattern + "/*"])
        for metadata in match.metadata_list
    }


def _refused_write(error: BaseException, path: str) -> Exception | None:
    """A disk-full / read-only / permission failure inside the pipeline as one
    OutputError naming `path`. Beam re-raises a worker's exception as a
    RuntimeError raised while handling it: the refusal is in its context."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        converted = output_error(error, path)
        if converted is not None:
            return converted
        error = error.__cause__ or error.__context__
    return None


def _commit_together(shards: Sequence[safe_output.Replacement]) -> None:
    """Every shard renamed to its final name, or (a rename failed) none: the
    ones already renamed are removed, so no partial set looks complete."""
    done = []
    try:
        for shard in shards:
            shard.commit()
            done.append(shard.path)
    except BaseException:
        from apache_beam.io.filesystems import FileSystems

        with contextlib.suppress(Exception):  # the error being raised says more
            FileSystems.delete(done)
        raise


def create_pretraining_data_beam(
    input_file: str,
    output_file: str,
    vocab_file: str,
    options: PretrainingOptions | None = None,
    do_lower_case: bool = True,
    num_shards: int = 1,
    gzip: bool = False,
    runner: str = "DirectRunner",
    pipeline_args: Sequence[str] = (),
) -> Summary:
    """`create_pretraining_data` as a Beam pipeline on `runner`; returns a `Summary`.

    Args as `keras_bert.pretraining_data.create_pretraining_data`, plus:
      runner: a Beam runner name: DirectRunner, DataflowRunner, FlinkRunner, SparkRunner...
      pipeline_args: further Beam pipeline options, e.g. ["--project=P", "--region=R",
        "--temp_location=gs://B/tmp", "--setup_file=./setup.py"] for Dataflow, or
        ["--direct_num_workers=2", "--direct_running_mode=multi_processing"].
    """
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

    from keras_bert.pretraining_data.options import PretrainingOptions

    options = options or PretrainingOptions()
    started = time.monotonic()
    files = expand_input_files(input_file)
    if "," in output_file:
        raise ValueError(
            "--runner writes one file or --num-shards shards of one prefix, "
            f"not a list of files: {output_file}"
        )
    outputs = output_file_names(output_file, num_shards)
    directory = os.path.dirname(outputs[0])
    if directory and "://" not in directory and not os.path.isdir(directory):
        raise FileNotFoundError(f"output directory does not exist: {directory} (for {outputs[0]})")
    _file_key(vocab_file)  # a missing vocabulary fails here, not on a worker

    pipeline_options = PipelineOptions(["--runner", runner, *pipeline_args])
    temp_location = pipeline_options.view_as(GoogleCloudOptions).temp_location
    local_temp = None if temp_location else tempfile.mkdtemp(prefix="keras_bert_beam_")
    summary_path = FileSystems.join(
        temp_location or local_temp, f"keras_bert_statistics_{uuid.uuid4().hex}.json"
    )
    # Each shard under its temporary name `Replacement(path).temporary`, the
    # final name + ".partial-PID": Beam's `file_name_suffix`.
    shards = [safe_output.Replacement(path, make_parents=False) for path in outputs]
    suffix = shards[0].temporary[len(shards[0].path) :]
    beam_temp_before = _beam_temp_folders(output_file)
    committed = False
    try:
        try:
            with beam.Pipeline(options=pipeline_options) as pipeline:
                build_pipeline(
                    pipeline,
                    files,
                    outputs,
                    vocab_file,
                    options,
                    do_lower_case,
                    gzip,
                    summary_path,
                    suffix,
                )
        except Exception as e:
            converted = _refused_write(e, output_file)
            if converted is None:
                raise
            raise converted from e
        with FileSystems.open(summary_path) as f:
            stats = json.loads(f.read().decode("utf-8") or "{}")
        FileSystems.delete([summary_path])
        if stats.get("instances", 0) == 0:
            raise ValueError(f"no text to make instances from in {', '.join(files)}")
        _commit_together(shards)
        committed = True
    finally:
        if not committed:
            for shard in shards:
                shard.abort()
            for folder in _beam_temp_folders(output_file) - beam_temp_before:
                with contextlib.suppress(Exception):  # the error being raised says more
                    FileSystems.delete([folder])
        if local_temp:
            import shutil

            shutil.rmtree(local_temp, ignore_errors=True)

    counts = ("input_files", *COUNTED, "invalid_utf8_lines")
    lists = ("invalid_utf8_examples", "empty_files")
    summary = Summary(
        output_files=outputs,
        **{name: stats.get(name, 0) for name in counts},
        **{name: stats.get(name, []) for name in lists},
    )
    summary.seconds = time.monotonic() - started
    return summary
