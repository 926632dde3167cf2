"""The `keras-bert` command: parses arguments and calls one library function each.

Each subcommand is a module `<command>_command.py` here, whose `add` registers
its arguments and whose `run` calls the library; flags several commands share
live in `arguments`. `run_command` is the one error boundary: an
expected failure (`keras_bert.errors.expected_failure`: bad input, a missing
file, a busy or unwritable output) is one line on stderr and exit code 2; any
other exception is a bug and keeps its traceback (exit code 1); `--verbose`
shows the traceback of expected failures too.
"""

import argparse
import contextlib
import os
import sys
import traceback

from keras_bert import errors, features, progress, safe_output
from keras_bert.cli import (
    convert_command,
    create_pretraining_data_command,
    encode_command,
    evaluate_command,
    export_command,
    finetune_command,
    native_logs,
    predict_command,
    prepare_corpus_command,
    pretrain_command,
    quickstart_command,
    tokenize_command,
    vocab_command,
)

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # also set by the package, for `python cli.py`


# Command -> (the flag it writes, the flags it reads, whether it creates the
# output's folder, what it writes there): the dispatch refuses an output that
# is one of the inputs' files (or a file inside an input folder) and locks it
# while the command runs (one process per output). What a folder output
# receives: "whole" (replaced whole: no input may lie inside it) or the names
# written in it (none may be an input). Not in the parsed arguments: finetune
# passes those on as config fields.
FINETUNE_WRITES = features.FINETUNE_OUTPUT_FILES
OUTPUTS = {
    "vocab": ("output", ("input",), True, None),
    "convert": ("output", ("checkpoint",), True, None),
    # These two refuse a missing output folder themselves: the lock must not create it.
    "prepare-corpus": ("output_file", ("inputs",), False, None),
    "create-pretraining-data": ("output_file", ("input_file", "vocab_file"), False, None),
    "finetune": (
        "output_dir",
        ("train", "dev", "init_checkpoint", "vocab_file"),
        True,
        FINETUNE_WRITES,
    ),
    "predict": ("output", ("input", "model_dir"), True, None),
    "export": ("output", ("model_dir", "vocab_file"), True, "whole"),
    "quickstart": ("output", ("corpus",), True, None),
}


# In the order `keras-bert --help` lists them.
COMMANDS = [
    tokenize_command,
    vocab_command,
    encode_command,
    convert_command,
    prepare_corpus_command,
    create_pretraining_data_command,
    pretrain_command,
    finetune_command,
    evaluate_command,
    predict_command,
    export_command,
    quickstart_command,
]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-bert",
        description=__doc__.splitlines()[0],
        epilog="--verbose, anywhere on the line (or KERAS_BERT_VERBOSE=1), keeps TensorFlow's "
        "and XLA's C++ log lines, which are hidden by default.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add(subparsers)
    return parser


def command_reference():
    """docs/guides/command-line.md's command table, generated from the parser (a test
    keeps them equal)."""
    rows = ["| command | what it does |", "|---|---|"]
    for action in build_parser()._subparsers._group_actions:
        for choice in action._choices_actions:
            rows.append(f"| `keras-bert {choice.dest}` | {choice.help} |")
    return "\n".join(rows)


def main(argv=None):
    command_line = argv is None  # the `keras-bert` command itself, not a caller's process
    argv = list(sys.argv[1:] if command_line else argv)
    if "--verbose" in argv:
        argv = [arg for arg in argv if arg != "--verbose"]
        native_logs.keep_native_logs()
    args = build_parser().parse_args(argv)
    if getattr(args, "fast_cpu_training", False):
        from keras_bert.cli.startup import use_fast_cpu_training_settings

        use_fast_cpu_training_settings()
    log_filter = None
    if command_line:
        _terminate_like_ctrl_c()
        log_filter = native_logs.route_stderr_through_filter()
        progress.show_progress(True)  # into log files too, a line per interval
    try:
        code = run_command(args)
    finally:
        if log_filter is not None:
            log_filter.close()
    if command_line and getattr(args, "fast_exit", False):
        # Everything is written and closed, and the interpreter's shutdown with
        # TensorFlow loaded takes seconds.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, a batch system's end of a job), raised where Python
    runs next: as Ctrl-C, it unwinds every `finally`, so partial outputs are
    removed and locks released. (SIGKILL cannot be caught: a partial file it
    leaves keeps its `.partial-PID` name, and the next write of that output
    removes it.)"""


def _terminate_like_ctrl_c():
    import signal

    def handler(number, frame):
        raise Terminated()

    with contextlib.suppress(ValueError):  # not the main thread: leave the default
        signal.signal(signal.SIGTERM, handler)


def run_command(args):
    """Runs the parsed command inside the one error boundary; returns the exit
    code: 0, 2 for an expected failure (one line on stderr), 130 on Ctrl-C.
    A bug's exception propagates with its traceback."""
    try:
        with _guarded_output(args):
            return args.run(args) or 0
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(
            f"keras-bert {args.command}: {'terminated' if terminated else 'interrupted'}",
            file=sys.stderr,
            flush=True,
        )
        return 143 if terminated else 130
    except Exception as e:
        message = errors.expected_failure(e)
        if message is None:
            raise  # a bug: the traceback is the report
        if native_logs.verbose_requested():
            traceback.print_exc()
        one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
        print(
            f"keras-bert {args.command}: error: {one_line or type(e).__name__}",
            file=sys.stderr,
            flush=True,
        )
        return 2


@contextlib.contextmanager
def _guarded_output(args):
    """The command's output (`OUTPUTS`): refused if it is an input, locked
    while the command runs."""
    flag, input_flags, make_parents, writes = OUTPUTS.get(args.command, (None, (), True, None))
    output = getattr(args, flag, None) if flag else None
    if not output:
        yield
        return
    inputs = []
    for name in input_flags:
        value = getattr(args, name, None)
        inputs.extend(value if isinstance(value, (list, tuple)) else [value])
    option = "--" + flag.replace("_", "-")
    safe_output.check_not_input(output, inputs, option)
    if writes == "whole":
        safe_output.check_inputs_outside(output, inputs, option)
    for name in writes if isinstance(writes, tuple) else ():
        safe_output.check_not_input(os.path.join(output, name), inputs, option)
    with safe_output.output_lock(output, make_parents=make_parents):
        yield


if __name__ == "__main__":
    sys.exit(main())
