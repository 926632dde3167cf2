"""create-pretraining-data as an Apache Beam pipeline (DirectRunner) against the in-process run.

Needs the `beam` extra (CI installs it); skipped without Apache Beam.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("apache_beam")

from pretraining_reference import mask_actions, read_records  # noqa: E402

from keras_bert.assets import AUSTEN_DIR  # noqa: E402
from keras_bert.pretraining_data import PretrainingOptions, create_pretraining_data  # noqa: E402
from keras_bert.pretraining_data.beam import create_pretraining_data_beam  # noqa: E402
from keras_bert.text import corpus  # noqa: E402

COUNTS = (
    "input_files",
    "documents",
    "instances",
    "tokens",
    "candidates",
    "masked",
    "replaced_by_mask",
    "kept",
    "replaced_by_random",
    "next_sentence_positive",
    "truncated_instances",
)


@pytest.fixture(scope="module")
def vocab_file(minilm_path):
    return os.path.join(minilm_path, "vocab.txt")


def _novel(folder, book):
    path = str(folder / book)
    corpus.prepare_corpus("books", [os.path.join(AUSTEN_DIR, book)], path)
    return path


def _raw_records(files):
    return sorted(record.numpy() for record in tf.data.TFRecordDataset(files))


def _check_statistics(records, summary):
    """The original's rules: 15 % of maskable tokens predicted, 80/10/10, half NotNext."""
    lengths = records["input_mask"].sum(axis=1)
    assert summary.instances == len(lengths) and summary.tokens == lengths.sum()
    assert 0.15 <= summary.masked / summary.candidates <= 0.16
    masked, kept, randomised = mask_actions(records)
    total = masked + kept + randomised
    assert total == summary.masked
    assert abs(masked / total - 0.8) <= 0.01
    assert abs(kept / total - 0.1) <= 0.01
    assert abs(randomised / total - 0.1) <= 0.01
    assert abs(records["next_sentence_labels"].mean() - 0.5) <= 0.05


def test_direct_runner_writes_the_in_process_records(vocab_file, tmp_path):
    novel = _novel(tmp_path, "persuasion.txt")
    options = PretrainingOptions(dupe_factor=1)
    ours = create_pretraining_data(
        novel, str(tmp_path / "a.tfrecord"), vocab_file, options, num_shards=2
    )
    beam = create_pretraining_data_beam(
        novel,
        str(tmp_path / "b.tfrecord"),
        vocab_file,
        options,
        num_shards=3,
        runner="DirectRunner",
    )
    assert beam.output_files == [str(tmp_path / f"b.tfrecord-0000{i}-of-00003") for i in range(3)]
    assert all(os.path.getsize(path) > 0 for path in beam.output_files)
    # One input file: the same blocks and seeds, hence the same records (in other shards).
    assert _raw_records(beam.output_files) == _raw_records(ours.output_files)
    assert {n: getattr(beam, n) for n in COUNTS} == {n: getattr(ours, n) for n in COUNTS}
    _check_statistics(read_records(beam.output_files), beam)
    # Beam leaves no temporary files next to the output.
    assert sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(p) for p in ours.output_files + beam.output_files] + ["persuasion.txt"]
    )


@pytest.mark.slow
def test_direct_runner_command_over_several_files(vocab_file, tmp_path, capsys):
    from keras_bert.cli import main

    books = ("persuasion.txt", "northangerabbey.txt")
    for book in books:
        _novel(tmp_path, book)
    (tmp_path / "blank.txt").write_text("\n\n")
    inputs = ",".join(str(tmp_path / name) for name in (*books, "blank.txt"))
    out = str(tmp_path / "out" / "train.tfrecord")
    os.mkdir(tmp_path / "out")
    assert (
        main(
            [
                "create-pretraining-data",
                "--input-file",
                inputs,
                "--output-file",
                out,
                "--vocab-file",
                vocab_file,
                "--dupe-factor",
                "2",
                "--runner",
                "DirectRunner",
                "--pipeline-options",
                "--direct_num_workers=2 --direct_running_mode=multi_threading",
                "--quiet",
            ]
        )
        == 0
    )
    report = capsys.readouterr().out
    assert f"files without text (skipped): 1: {tmp_path / 'blank.txt'}" in report
    records = read_records([out])
    options = PretrainingOptions(dupe_factor=2)
    in_process = create_pretraining_data(
        inputs, str(tmp_path / "in_process.tfrecord"), vocab_file, options
    )
    beam_instances = int(report.split("instances: ")[1].split()[0])
    assert beam_instances == len(records["input_ids"])
    # Blocks per file rather than across files: other pairs, the same statistics.
    assert abs(len(records["input_ids"]) / in_process.instances - 1) <= 0.03
    expected = read_records(in_process.output_files)
    assert abs(records["input_mask"].sum() / expected["input_mask"].sum() - 1) <= 0.03
    masked, kept, randomised = mask_actions(records)
    total = masked + kept + randomised
    assert abs(masked / total - 0.8) <= 0.01 and abs(randomised / total - 0.1) <= 0.01
    assert (
        abs(records["next_sentence_labels"].mean() - expected["next_sentence_labels"].mean())
        <= 0.03
    )
    predictions = (records["masked_lm_weights"] > 0).sum(axis=1)
    lengths = records["input_mask"].sum(axis=1)
    np.testing.assert_array_equal(
        predictions, np.minimum(20, np.maximum(1, np.round(lengths * 0.15)))
    )
