"""Progress lines: redrawn on a terminal, a few plain lines in a log."""

import io

import pytest

from keras_bert import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def default_visibility():
    yield
    progress.show_progress(None)


def test_a_terminal_sees_one_line_redrawn(monkeypatch):
    monkeypatch.setattr(progress, "REDRAW_EVERY_SECONDS", 0.0)
    stream = Terminal()
    with progress.Progress(4, "documents", stream=stream) as bar:
        for done in range(1, 5):
            bar.update(done, f"{done * 10} instances")
    text = stream.getvalue()
    assert text.count("\r") == 5 and text.count("\n") == 1 and text.endswith("\n")
    assert "[##############################] 100.0 % 4 documents of 4, 40 instances" in text


def test_a_log_gets_plain_lines_at_intervals_and_at_the_end(monkeypatch):
    progress.show_progress(True)  # what the keras-bert command sets
    stream = io.StringIO()
    with progress.Progress(None, "examples", stream=stream) as bar:
        for _ in range(1000):
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and "\r" not in stream.getvalue()
    assert lines[0].startswith("1,000 examples (")
    monkeypatch.setattr(progress, "LOG_EVERY_SECONDS", 0.0)
    stream = io.StringIO()
    with progress.Progress(3, "steps", stream=stream) as bar:
        for done in range(1, 4):
            bar.update(done)
    assert len(stream.getvalue().splitlines()) == 4  # each update, then the closing line


def test_library_calls_are_silent_off_a_terminal():
    stream = io.StringIO()
    with progress.Progress(10, "batches", stream=stream) as bar:
        bar.update(10)
    assert stream.getvalue() == ""
    progress.show_progress(False)
    stream = Terminal()
    with progress.Progress(10, "batches", stream=stream) as bar:
        bar.update(10)
    assert stream.getvalue() == ""


def test_keras_verbose_follows_the_terminal(monkeypatch):
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert progress.keras_verbose("auto") == 2
    monkeypatch.setattr("sys.stdout", Terminal())
    assert progress.keras_verbose("auto") == 1
    assert progress.keras_verbose(0) == 0


# Slow (a command in a fresh process); the tests above check the lines it writes.
@pytest.mark.slow
def test_a_command_writes_plain_progress_lines_into_a_log(tmp_path):
    """`keras-bert vocab` with stderr into a file (not a terminal): plain lines, no
    redrawing, no C++ log lines."""
    import os
    import shutil
    import subprocess
    import sys

    from keras_bert.assets import AUSTEN_DIR

    # The console script of the environment running the tests, even where its
    # bin/ is not on PATH (python -m pytest from a venv that was not activated).
    beside_python = os.path.join(os.path.dirname(sys.executable), "keras-bert")
    keras_bert_command = (
        beside_python if os.path.exists(beside_python) else shutil.which("keras-bert")
    )
    assert keras_bert_command, "the keras-bert command is not installed (pip install -e .)"
    result = subprocess.run(
        [
            keras_bert_command,
            "vocab",
            "--input",
            os.path.join(AUSTEN_DIR, "persuasion.txt"),
            "--vocab-size",
            "400",
            "--output",
            str(tmp_path / "vocab.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    progress_lines = [line for line in lines if "bytes of 466,854, counting words" in line]
    assert progress_lines and progress_lines[-1].startswith(
        "[##############################] 100.0 % 466,854 bytes of 466,854"
    ), lines
