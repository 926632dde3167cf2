"""The `keras-bert` command's outputs and its one error boundary, through the
real command in a child process: an output that is an input is refused before
anything is written, an output in use by a running process is refused, a
stale lock is taken over, a full disk is one line and no file; expected
failures exit 2 with one line, bugs keep their traceback (exit 1).
"""

import argparse
import errno
import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from keras_bert import errors
from keras_bert.cli import commands

from harness import command_process, output_locked_by_another_process, run_command
from repo_paths import REPO_ROOT

ENV = {**os.environ, "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1"}
CORPUS = "the quick brown fox jumps over the lazy dog\n" * 20


def one_error_line(result):
    """The one `error:` line of a refused command (exit 2, no traceback)."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    # (Progress lines may come before it.)
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and lines[0].startswith("keras-bert "), result.stderr
    return lines[0]


def test_predict_onto_its_own_input_is_refused_before_anything_is_written(tmp_path):
    answers = tmp_path / "a.txt"
    answers.write_text("a good film\na bad film\n")
    line = one_error_line(
        command_process(
            "predict --model-dir {model_dir} --input {input} --output {output}",
            model_dir=tmp_path / "model",
            input=answers,
            output=answers,
        )
    )
    assert f"--output {answers} is the input {answers}" in line
    assert answers.read_text() == "a good film\na bad film\n"
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]


def test_an_output_that_is_a_hard_link_to_the_input_is_refused(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    os.link(corpus, tmp_path / "vocab.txt")
    line = one_error_line(
        command_process(
            "vocab --input {input} --vocab-size 60 --output {output}",
            input=corpus,
            output=tmp_path / "vocab.txt",
        )
    )
    assert "(the same file under another name)" in line
    assert corpus.read_text() == CORPUS


def test_two_processes_on_one_output_folder(tmp_path):
    """A finetune run holds OUT (as the command's dispatch does); a second
    command into OUT is refused naming the first's pid, and OUT is untouched."""
    output = tmp_path / "out"
    with output_locked_by_another_process(output) as holder_pid:
        line = one_error_line(
            command_process(
                "finetune --task classify --train {train} --output-dir {output_dir}",
                train=tmp_path / "train.tsv",
                output_dir=output,
            )
        )
        assert f"{output} is in use by process {holder_pid} on {socket.gethostname()}" in line
    assert not output.exists()


# Slow (a whole command); the fast suite's test_safe_output.py takes a stale lock over.
@pytest.mark.slow
def test_a_stale_lock_is_taken_over_and_the_command_runs(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "vocab.txt.lock").write_text(
        json.dumps({"pid": gone.pid, "host": socket.gethostname(), "started": "earlier"})
    )
    result = command_process(
        "vocab --input {input} --vocab-size 60 --output {output}",
        input=corpus,
        output=tmp_path / "vocab.txt",
    )
    assert result.returncode == 0, result.stderr
    assert (
        f"taking over the lock of {tmp_path / 'vocab.txt'}: its process {gone.pid}" in result.stderr
    )
    assert (tmp_path / "vocab.txt").read_text().startswith("[PAD]\n")
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]


def test_a_full_disk_is_one_line_and_no_file(tmp_path):
    """The process may write 512 bytes a file (ulimit -f): the vocabulary is larger."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(f"word{i}" for i in range(400)) * 3)
    line = one_error_line(
        command_process(
            "vocab --input {input} --vocab-size 300 --output {output}",
            input=corpus,
            output=tmp_path / "vocab.txt",
            limit_file_size=512,
        )
    )
    assert f"cannot write {tmp_path / 'vocab.txt'}" in line and "ulimit -f" in line
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]


def test_verbose_keeps_the_traceback_of_an_expected_failure(tmp_path):
    answers = tmp_path / "a.txt"
    answers.write_text("a good film\n")
    result = command_process(
        "predict --model-dir {model_dir} --input {input} --output {output} --verbose",
        model_dir=tmp_path,
        input=answers,
        output=answers,
    )
    assert result.returncode == 2
    assert "Traceback" in result.stderr and "OutputIsInputError" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("keras-bert predict: error: ")


def in_this_process(capsys, line, **values):
    """`keras-bert LINE` run in this process, as `command_process` gives it
    back (exit code and standard error): a refusal reads the same in a new
    process (the tests above), which only pays for starting TensorFlow."""
    code = run_command(line, **values)
    return subprocess.CompletedProcess([], code, "", capsys.readouterr().err)


def test_a_missing_input_is_one_line(tmp_path, capsys):
    line = one_error_line(
        in_this_process(
            capsys,
            "create-pretraining-data --input-file {input_file} "
            "--output-file {output_file} --vocab-file {vocab_file} "
            "--quiet",
            input_file=tmp_path / "absent.txt",
            output_file=tmp_path / "r.tfrecord",
            vocab_file=os.path.join(REPO_ROOT, "keras_bert", "assets", "bert_uncased_vocab.txt"),
        )
    )
    assert "absent.txt" in line
    assert os.listdir(tmp_path) == []


# === The boundary itself (in process: a bug cannot be provoked through the
# command on purpose) ===


def command(error):
    def run(args):
        raise error

    return argparse.Namespace(command="vocab", run=run, output=None)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("vocab_size 3 leaves no room"),
        FileNotFoundError("recipe not found: r.yaml"),
        FileExistsError("out exists"),
        errors.UserError("a user error"),
        errors.OutputInUseError("out is in use"),
        OSError(errno.ENOSPC, "No space left on device"),
        PermissionError(errno.EACCES, "Permission denied", "/data/in.txt"),
        OSError(errno.EROFS, "Read-only file system"),
    ],
)
def test_an_expected_failure_exits_2_with_one_line(error, capsys):
    assert commands.run_command(command(error)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("keras-bert vocab: error: "), err
    assert "Traceback" not in err


def test_a_multi_line_message_is_printed_on_one_line(capsys):
    assert commands.run_command(command(ValueError("first\n  second"))) == 2
    assert capsys.readouterr().err == "keras-bert vocab: error: first second\n"


@pytest.mark.parametrize(
    "error", [KeyError("a bug"), TypeError("a bug"), OSError(errno.EIO, "Input/output error")]
)
def test_a_bug_keeps_its_traceback(error):
    with pytest.raises(type(error)):
        commands.run_command(command(error))


def test_interrupted(capsys):
    assert commands.run_command(command(KeyboardInterrupt())) == 130
    assert capsys.readouterr().err == "keras-bert vocab: interrupted\n"


# === A full disk under a command that writes a model's answers or an export ===


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tiny_outputs import tiny_classifier_output

    return tiny_classifier_output(tmp_path_factory.mktemp("classifier"))


@pytest.mark.slow  # ~25 s: a model loaded in a fresh process
def test_predict_on_a_full_disk_is_one_line_and_no_answers_file(model_dir, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("the quick brown fox jumps over the lazy dog\n" * 4000)  # ~350 KB of answers
    # 256 KB: loading the model writes its ~90 KB of weights to a temporary folder.
    line = one_error_line(
        command_process(
            "predict --model-dir {model_dir} --input {input} --output {output} --batch-size 1000",
            model_dir=model_dir,
            input=texts,
            output=tmp_path / "answers.jsonl",
            limit_file_size=256 * 1024,
        )
    )
    assert f"cannot write {tmp_path / 'answers.jsonl'}" in line and "ulimit -f" in line
    assert sorted(os.listdir(tmp_path)) == ["texts.txt"]


@pytest.mark.slow  # ~25 s: the export's tracing
def test_export_on_a_full_disk_is_one_line_and_no_version_folder(model_dir, tmp_path):
    output = tmp_path / "exports" / "tiny" / "1"
    # 512 KB: the weights fit, the graph (saved_model.pb, ~1.4 MB) does not.
    line = one_error_line(
        command_process(
            "export --model-dir {model_dir} --output {output}",
            model_dir=model_dir,
            output=output,
            limit_file_size=512 * 1024,
        )
    )
    assert f"cannot write {output}" in line, line
    # No version folder, nor the folders above it that the command made.
    assert not os.path.exists(tmp_path / "exports")


def test_predict_onto_a_file_of_the_model_folder_is_refused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.keras").write_bytes(b"the weights")
    (tmp_path / "a.txt").write_text("a good film\n")
    line = one_error_line(
        command_process(
            "predict --model-dir {model_dir} --input {input} --output {output}",
            model_dir=model,
            input=tmp_path / "a.txt",
            output=model / "model.keras",
        )
    )
    assert f"is a file of the input folder {model}" in line
    assert (model / "model.keras").read_bytes() == b"the weights"


def test_finetune_may_not_write_over_its_own_initial_checkpoint(tmp_path):
    (tmp_path / "model.keras").write_bytes(b"the encoder")
    line = one_error_line(
        command_process(
            "finetune --task classify --train {train} --init-checkpoint "
            "{init_checkpoint} --output-dir {output_dir} --overwrite",
            train=tmp_path / "train.tsv",
            init_checkpoint=tmp_path / "model.keras",
            output_dir=tmp_path,
        )
    )
    assert f"is the input {tmp_path / 'model.keras'}" in line
    assert (tmp_path / "model.keras").read_bytes() == b"the encoder"


# === Runs in progress, killed runs ===


def test_reading_a_folder_that_a_run_is_writing_says_so(tmp_path, capsys):
    """export / evaluate / predict of a finetune output still being written
    (a running process holds OUT.lock; OUT has checkpoints, no model yet): the
    run is named instead of "not a checkpoint folder"."""
    output = tmp_path / "out"
    (output / "checkpoints").mkdir(parents=True)
    (tmp_path / "dev.tsv").write_text("text\tlabel\nthe fox\tpos\n")
    with output_locked_by_another_process(output) as holder_pid:
        for argv in (
            ["export", "--model-dir", output, "--output", tmp_path / "export" / "1"],
            ["evaluate", "--model-dir", output, "--data", tmp_path / "dev.tsv"],
            ["predict", "--model-dir", output, "--input", tmp_path / "dev.tsv"]
            + ["--output", tmp_path / "answers.jsonl"],
            ["encode", "a fox", "--init-checkpoint", output],
        ):
            code = commands.main([str(a) for a in argv])
            err = capsys.readouterr().err.strip()
            assert code == 2 and len(err.splitlines()) == 1, err
            assert (
                f"error: {output}: a run is in progress there (process {holder_pid} on "
                f"{socket.gethostname()} since " in err
            ), err
            assert "wait for it to finish" in err
    assert not (tmp_path / "export").exists() and not (tmp_path / "answers.jsonl").exists()
    # The run gone: the folder is what it is.
    code = commands.main(["export", "--model-dir", str(output), "--output", str(tmp_path / "e/1")])
    assert code == 2 and "not a checkpoint folder" in capsys.readouterr().err


def test_a_terminated_command_leaves_no_partial_file_or_lock(tmp_path, tiny_vocab_file):
    """SIGTERM (kill, a batch system's time limit) unwinds like Ctrl-C: the
    partial shard and the lock are removed, exit 143. The input is a FIFO
    nobody writes, so the command is reliably mid-run when the signal comes."""
    corpus = tmp_path / "corpus.txt"
    os.mkfifo(corpus)
    # A partial file of a process killed with SIGKILL (which nothing can catch).
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = tmp_path / f"out.tfrecord.partial-{gone.pid}"
    stale.write_bytes(b"")
    command = subprocess.Popen(
        [sys.executable, "-m", "keras_bert.cli", "create-pretraining-data"]
        + ["--input-file", str(corpus), "--output-file", str(tmp_path / "out.tfrecord")]
        + ["--vocab-file", tiny_vocab_file, "--num-workers", "1", "--max-seq-length", "16"]
        + ["--max-predictions-per-seq", "2"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=ENV,
    )
    own = tmp_path / f"out.tfrecord.partial-{command.pid}"
    while not own.exists():  # the shard's writer is open: it now waits for the FIFO
        assert command.poll() is None, command.stderr.read()
    # A rerun's writer removes the partial files of processes that are gone.
    assert not stale.exists()
    command.send_signal(signal.SIGTERM)
    err = command.communicate()[1]
    assert command.returncode == 143, err
    assert err.strip().endswith("keras-bert create-pretraining-data: terminated"), err
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]


def test_unfinished_shards_are_not_read_as_records(tmp_path, capsys):
    from keras_bert.pretraining_data import inputs

    (tmp_path / "shard-00000-of-00002").write_bytes(b"records")
    (tmp_path / "shard-00001-of-00002.partial-4242").write_bytes(b"")
    assert inputs.list_files(str(tmp_path / "shard-*")) == [str(tmp_path / "shard-00000-of-00002")]
    assert (
        "skipping 1 unfinished write(s) "
        f"({tmp_path / 'shard-00001-of-00002.partial-4242'})" in capsys.readouterr().err
    )


def test_finetune_refuses_a_vocabulary_larger_than_the_checkpoints_embedding(tmp_path, capsys):
    """`--vocab-file` with 100 more lines than the checkpoint's embedding table:
    refused before training (the task model's boundary, as `from_pretrained`),
    naming the file, its size and the checkpoint's; no model is written."""
    from tiny_outputs import CONFIG  # the encoder of TINY_VOCAB

    from keras_bert import BertEncoder

    from conftest import TINY_VOCAB

    checkpoint = tmp_path / "encoder.keras"
    BertEncoder(CONFIG).save(str(checkpoint))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB + [f"extra{i}" for i in range(100)]) + "\n")
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\nthe fox\tpos\nthe dog\tneg\n")
    line = one_error_line(
        in_this_process(
            capsys,
            "finetune --task classify --train {train} --init-checkpoint "
            "{init_checkpoint} --vocab-file {vocab_file} --output-dir "
            "{output_dir} --no-tensorboard --seq-length 16 --epochs 1",
            train=train,
            init_checkpoint=checkpoint,
            vocab_file=vocab,
            output_dir=tmp_path / "out",
        )
    )
    size = len(TINY_VOCAB)
    assert f"{vocab}: the vocabulary has {size + 100} entries" in line, line
    assert f"token embedding only {size} rows (the checkpoint's vocab_size)" in line, line
    assert not (tmp_path / "out" / "model.keras").exists()
