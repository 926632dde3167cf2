"""The Beam writer of pretraining data leaves no shard that looks complete
after a failure: the shards get their final names only once the pipeline
has succeeded, all together; a failed run removes its temporary shards and
Beam's temporary folder, and keeps an older output as it was.

Needs the `beam` extra (CI installs it); skipped without Apache Beam."""

import os

import pytest

pytest.importorskip("apache_beam")

from apache_beam.io.filesystems import FileSystems  # noqa: E402

from keras_bert.errors import OutputError  # noqa: E402
from keras_bert.pretraining_data import PretrainingOptions  # noqa: E402
from keras_bert.pretraining_data import beam as beam_writer  # noqa: E402

SENTENCES = [
    "the quick brown fox jumps over the lazy dog .",
    "a lazy dog jumped over the brown fox .",
    "the fox , the dog .",
]
OPTIONS = PretrainingOptions(max_seq_length=16, max_predictions_per_seq=3, dupe_factor=1)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    documents = ["\n".join(SENTENCES[i % 3 :] + SENTENCES[: i % 3]) for i in range(6)]
    path.write_text("\n\n".join(documents) + "\n")
    return str(path)


def _run(corpus, output, vocab):
    return beam_writer.create_pretraining_data_beam(
        corpus, str(output), vocab, OPTIONS, num_shards=2, runner="DirectRunner"
    )


def _older_output(folder):
    """Two shards of an earlier, complete run."""
    names = [folder / f"out.tfrecord-0000{i}-of-00002" for i in range(2)]
    for name in names:
        name.write_bytes(b"an earlier run's shard")
    return names


def test_a_successful_run_names_only_complete_shards(corpus, tmp_path, tiny_vocab_file):
    summary = _run(corpus, tmp_path / "out.tfrecord", tiny_vocab_file)
    assert summary.instances > 0
    assert sorted(os.listdir(tmp_path)) == [
        "corpus.txt",
        "out.tfrecord-00000-of-00002",
        "out.tfrecord-00001-of-00002",
        "vocab.txt",
    ]


def test_a_failure_inside_the_pipeline_leaves_the_older_output(
    corpus, tmp_path, tiny_vocab_file, monkeypatch
):
    older = _older_output(tmp_path)
    process = beam_writer.CreateRecords.process

    def fail_after_the_first_record(self, indexed_block):
        yield next(iter(process(self, indexed_block)))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(beam_writer.CreateRecords, "process", fail_after_the_first_record)
    # Beam re-raises it as a RuntimeError: still the one line of a full disk.
    with pytest.raises(OutputError, match=r"cannot write .*out.tfrecord: the disk is full"):
        _run(corpus, tmp_path / "out.tfrecord", tiny_vocab_file)
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", *[p.name for p in older], "vocab.txt"]
    assert all(p.read_bytes() == b"an earlier run's shard" for p in older)


def test_a_failure_while_beam_renames_its_shards_leaves_no_new_shard(
    corpus, tmp_path, tiny_vocab_file, monkeypatch
):
    """Beam's own finalize step (its temporary files -> the shard names) stops
    after the first shard: neither that shard nor Beam's temporary folder stays."""
    older = _older_output(tmp_path)
    rename = FileSystems.rename

    def rename_one_then_fail(sources, destinations):
        rename(sources[:1], destinations[:1])
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(FileSystems, "rename", staticmethod(rename_one_then_fail))
    with pytest.raises(OutputError, match="the file system is read-only"):
        _run(corpus, tmp_path / "out.tfrecord", tiny_vocab_file)
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", *[p.name for p in older], "vocab.txt"]


def test_a_failure_between_the_final_renames_leaves_no_partial_set(
    corpus, tmp_path, tiny_vocab_file, monkeypatch
):
    """Our own commit: the second shard's rename fails; the first, renamed
    already, is removed again (a set of 1 of 2 shards would look complete)."""
    replace = os.replace

    def fail_on_the_second_shard(source, target):
        if str(target).endswith("-00001-of-00002"):
            raise OSError(28, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", fail_on_the_second_shard)
    with pytest.raises(
        OutputError, match="cannot write .*out.tfrecord-00001-of-00002: the disk is full"
    ):
        _run(corpus, tmp_path / "out.tfrecord", tiny_vocab_file)
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]
