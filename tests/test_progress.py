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
