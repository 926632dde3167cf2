"""The command line keeps TensorFlow's and XLA's C++ log lines out of its output."""

import os
import subprocess
import sys

import pytest

from keras_bert.cli import native_logs

# Lines TensorFlow 2.20 printed on this project's machines (the quickstart's output).
TF_LINE = (
    b"2026-12-01 10:10:02.531733: E external/local_xla/xla/stream_executor/cuda/"
    b"cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed call to "
    b"cuInit: UNKNOWN ERROR (303)\n"
)
ONEDNN_LINE = (
    b"2026-12-01 10:10:13.582892: E tensorflow/core/util/util.cc:131] oneDNN supports "
    b"DT_INT64 only on platforms with AVX-512. Falling back to the default Eigen-based "
    b"implementation if present.\n"
)
ABSL_WARNING = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
)
XLA_LINE = (
    b"I0000 00:00:1796119812.713937    3013 device_compiler.h:196] Compiled cluster "
    b"using XLA!  This line is logged at most once for the lifetime of the process.\n"
)
FATAL_LINE = b"F0000 00:00:1796119812.713937    3013 op_kernel.cc:1] Check failed: x\n"


def filtered(chunks):
    """Runs filter_stream over `chunks` written one by one; returns what came out."""
    source_read, source_write = os.pipe()
    sink_read, sink_write = os.pipe()
    for chunk in chunks:
        os.write(source_write, chunk)
    os.close(source_write)
    native_logs.filter_stream(source_read, sink_write)
    os.close(sink_write)
    with os.fdopen(sink_read, "rb") as f:
        out = f.read()
    os.close(source_read)
    return out


@pytest.mark.parametrize("line", [TF_LINE, ONEDNN_LINE, ABSL_WARNING, XLA_LINE])
def test_native_log_lines_are_dropped(line):
    assert native_logs.is_native_log_line(line)
    assert filtered([b"before\n", line, b"after\n"]) == b"before\nafter\n"


def test_everything_else_passes_unchanged():
    text = (
        "[2/8] Learn a 600-token WordPiece vocabulary\n"
        "keras-bert finetune: error: data/train.tsv, line 3: empty text\n"
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "2026 was a good year: 10:10 said the clock\n"
    ).encode()
    assert filtered([text]) == text
    # A fatal error explains a crash: kept.
    assert filtered([FATAL_LINE]) == FATAL_LINE


def test_a_log_line_split_across_writes_is_still_dropped():
    line = XLA_LINE
    chunks = [line[:3], line[3:20], line[20:], b"next\n"]
    assert filtered(chunks) == b"next\n"


def test_progress_bar_frames_pass_as_they_come():
    frames = [b"\r[###      ] 30.0 %", b"\r[######   ] 60.0 %", b"\r[#########] 100.0 %\n"]
    # Each unterminated frame is passed on at once: nothing waits for a newline.
    for frame in frames:
        assert not native_logs.could_become_log_line(frame.lstrip(b"\r"))
    assert filtered(frames) == b"".join(frames)
    # Keras' bar starts with digits ("1/20 ...") yet is no log line's opening.
    assert not native_logs.could_become_log_line(b"1/20 \xe2\x94\x81")
    assert native_logs.could_become_log_line(b"2026-12-01 10:")
    assert native_logs.could_become_log_line(b"I0000 00:0")


SCRIPT = """
import sys
from keras_bert.cli import native_logs
log_filter = native_logs.route_stderr_through_filter()
import tensorflow as tf

@tf.function(jit_compile=True)  # XLA logs "Compiled cluster using XLA!" through absl
def double(x):
    return 2 * x

print(double(tf.constant([1.0])).numpy(), file=sys.stderr)
print("done", file=sys.stderr)
if log_filter is not None:
    log_filter.close()
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_xla_and_tensorflow_lines_leave_a_real_process_only_when_verbose(verbose):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BERT_VERBOSE")
    }
    if verbose:
        env["KERAS_BERT_VERBOSE"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    lines = result.stderr.splitlines(keepends=True)
    assert b"[2.]\n" in lines and lines[-1] == b"done\n"
    logged = [line for line in lines if native_logs.is_native_log_line(line)]
    if verbose:
        assert any(b"Compiled cluster using XLA" in line for line in logged)
    else:
        assert logged == []


def test_verbose_flag_keeps_tensorflows_level_unset(monkeypatch):
    environ = {"TF_CPP_MIN_LOG_LEVEL": "2"}
    monkeypatch.setattr("keras_bert._QUIETED_TENSORFLOW", True)
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    monkeypatch.delitem(sys.modules, "tensorflow")
    native_logs.keep_native_logs(environ)
    assert environ == {"KERAS_BERT_VERBOSE": "1"}
    assert native_logs.verbose_requested(environ)
