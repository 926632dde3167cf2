"""Keeps TensorFlow's and XLA's C++ log lines out of the commands' output.

`TF_CPP_MIN_LOG_LEVEL` silences TensorFlow's own C++ logging, but XLA and
other libraries log through absl before anything initialises it ("WARNING:
All log messages before absl::InitializeLog() ...", "I0000 ... Compiled
cluster using XLA!"), and no setting reaches those. So the command line
routes its stderr (file descriptor 2, which child processes inherit) through
a small filter process that drops such lines and passes everything else on
unchanged, as it arrives (progress bars redraw in place as before).

A separate process, not a thread: when the command dies (a fatal C++ error
aborts it), the filter still reads to the end of the pipe, so the last words
reach the terminal. It ignores Ctrl-C and exits when the pipe closes.

Run as a script (`python -S native_logs.py`) by `route_stderr_through_filter`.
"""

import os
import re
import signal
import subprocess
import sys

# TensorFlow's C++ logging: "2026-12-01 10:10:02.531733: E external/...cc:51] ..."
TF_LOG_LINE = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] \S+:\d+\] ")
# absl's: "I0000 00:00:1796119812.713937    3013 device_compiler.h:196] ..." (uninitialised,
# absl writes seconds since the epoch where the seconds of the minute would be).
ABSL_LOG_LINE = re.compile(rb"^[IWE]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] ")
ABSL_NOT_INITIALISED = b"WARNING: All log messages before absl::InitializeLog() is called"
# Fatal ("F...") lines always pass: they explain a crash.

# Character classes of each log line's opening, to tell early whether a line
# still being written could become one ("0": a digit, "L": a level letter).
_OPENINGS = (b"0000-00-00 00:00:00.", b"L0000 00:00:", ABSL_NOT_INITIALISED)
_LEVELS = b"IWE"
_DIGITS = b"0123456789"


def is_native_log_line(line: bytes) -> bool:
    return bool(
        TF_LOG_LINE.match(line)
        or ABSL_LOG_LINE.match(line)
        or line.startswith(ABSL_NOT_INITIALISED)
    )


def _fits_opening(partial: bytes, opening: bytes) -> bool:
    for got, want in zip(partial, opening):
        if want == ord("0"):
            ok = got in _DIGITS
        elif want == ord("L"):
            ok = got in _LEVELS
        else:
            ok = got == want
        if not ok:
            return False
    return True


def could_become_log_line(partial: bytes) -> bool:
    """Whether an unterminated piece of output may still turn out to be a log line."""
    return any(_fits_opening(partial, opening) for opening in _OPENINGS)


def filter_stream(source: int, sink: int) -> None:
    """Copies `source` to `sink` (file descriptors), dropping native log lines.

    Output is passed on as soon as it cannot be the start of a log line, so a
    progress bar that redraws with carriage returns shows every frame.
    """
    pending = b""
    while True:
        chunk = os.read(source, 65536)
        if not chunk:
            break
        pending += chunk
        out = []
        while pending:
            ends = [i for i in (pending.find(b"\n"), pending.find(b"\r")) if i >= 0]
            if ends:
                end = min(ends) + 1
                piece, pending = pending[:end], pending[end:]
                if not is_native_log_line(piece):
                    out.append(piece)
            elif could_become_log_line(pending):
                break  # wait for the rest of the line
            else:
                out.append(pending)
                pending = b""
        if out:
            os.write(sink, b"".join(out))
    if pending and not is_native_log_line(pending):
        os.write(sink, pending)


def verbose_requested(environ=None) -> bool:
    """`KERAS_BERT_VERBOSE=1` (or `--verbose` on the command line) keeps every log line."""
    environ = os.environ if environ is None else environ
    return environ.get("KERAS_BERT_VERBOSE", "").lower() in ("1", "true", "yes")


def keep_native_logs(environ=None):
    """`--verbose`: every log line stays, for this process and its children.

    Undoes the package's quiet TensorFlow default (only if TensorFlow has not
    read it yet, and only the level the package itself set)."""
    environ = os.environ if environ is None else environ
    environ["KERAS_BERT_VERBOSE"] = "1"
    import keras_bert

    if keras_bert._QUIETED_TENSORFLOW and "tensorflow" not in sys.modules:
        environ.pop("TF_CPP_MIN_LOG_LEVEL", None)


class StderrFilter:
    """File descriptor 2 of this process (and its children) goes through the filter."""

    def __init__(self):
        read_end, write_end = os.pipe()
        self._saved_stderr = os.dup(2)
        self._process = subprocess.Popen(
            [sys.executable, "-S", os.path.abspath(__file__)],
            stdin=read_end,
            stdout=self._saved_stderr,
            close_fds=True,
        )
        os.close(read_end)
        sys.stderr.flush()
        os.dup2(write_end, 2)
        os.close(write_end)

    def close(self):
        """Restores the real stderr and waits for the filter to pass on the rest."""
        if self._process is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved_stderr, 2)  # drops this process's end of the pipe
        os.close(self._saved_stderr)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a child still holds the pipe: leave it be
            pass
        self._process = None


def route_stderr_through_filter(environ=None):
    """Starts the filter unless verbose output was asked for; returns it (or None)."""
    if verbose_requested(environ):
        return None
    try:
        return StderrFilter()
    except OSError:  # no pipes or processes to spare: noisy but working
        return None


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command handles Ctrl-C; we drain
    filter_stream(sys.stdin.fileno(), sys.stdout.fileno())
