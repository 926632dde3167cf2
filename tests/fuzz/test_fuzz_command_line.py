"""Fuzzing the `keras-bert` command in process (`cli.main(argv)`):

1. `--set KEY=VALUE` on `pretrain` and `finetune` recipes: the config the
   command hands its library function (replaced here by a recorder, so
   nothing trains) holds every field in its declared type (booleans only from
   true / false, null only where the field takes null), or the command exits
   2 with one line naming the field or the `--set` item.
2. Drawn options and values for the commands that read a model or files,
   whose required inputs are missing: argparse's usage error or one
   `keras-bert CMD: error:` line and exit 2, never a traceback, the input
   files (drawn as output paths too) unchanged and nothing left behind.
"""

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import types
import typing

import pytest
from fuzz_inputs import FAST, LONG, PIECES
from hypothesis import given
from hypothesis import strategies as st

from keras_bert import cli
from keras_bert.cli import commands
from keras_bert.training import distribute, finetuning, pretraining

# YAML's corners: YAML 1.1 booleans, nulls, numbers in every spelling, flow
# collections, tags, anchors, quoting, paths.
VALUE_WORDS = [
    "true",
    "false",
    "True",
    "FALSE",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "null",
    "~",
    "Null",
    "",
    "0",
    "1",
    "2",
    "-1",
    "3",
    "1000000",
    "1.5",
    "1e-4",
    "1e3",
    "0x10",
    "0o7",
    "nan",
    ".nan",
    ".inf",
    "-.inf",
    "[a, b]",
    "[]",
    "{}",
    "{a: 1}",
    "[1, 2]",
    "auto",
    "tpu",
    "mirrored",
    "fit",
    "custom",
    "lamb",
    "adamw",
    "bfloat16",
    "mixed_float16",
    "classify",
    "paper",
    "'quoted'",
    '"1"',
    "[",
    "{",
    "]",
    ": x",
    "!!python/object/apply:os.system [ls]",
    "!!binary aGk=",
    "&a [*a]",
    "*x",
    "tiny",
    "base",
    "/",
    ".",
    "/dev/null",
    "a,b",
    "- a",
    "2026-12-04",
    "12:30",
]
values = st.one_of(
    st.sampled_from(VALUE_WORDS),
    st.sampled_from(VALUE_WORDS),
    st.text(max_size=12),
    st.sampled_from(PIECES),
)


def _fields(config_class):
    return [field.name for field in dataclasses.fields(config_class)]


def _nullable(config_class, name):
    field = {f.name: f for f in dataclasses.fields(config_class)}[name]
    annotation = typing.get_type_hints(config_class)[name]
    members = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else ()
    )
    return field.default is None or type(None) in members


def _has_type(value, annotation):
    members = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    for member in members:
        if member is object or (member is float and isinstance(value, float)):
            return True
        if member is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if member in (bool, str, list) and isinstance(value, member):
            return True
        if member is type(None) and value is None:
            return True
    return False


CHOICES = {
    "strategy": distribute.STRATEGIES,
    "train_loop": distribute.TRAIN_LOOPS,
    "jit_compile": (True, False, "auto"),
    "verbose": ("auto", 0, 1, 2),
}


def check_config(config, items):
    """The fields the items set hold values of their declared types (booleans
    from true / false only, null only where the field takes null)."""
    config_class = type(config)
    hints = typing.get_type_hints(config_class)
    given = {}
    for item in items:
        name, _, text = item.partition("=")
        given[name.strip()] = text
    for name, text in given.items():
        value = getattr(config, name)
        if name in CHOICES:
            assert any(value == c and type(value) is type(c) for c in CHOICES[name]), (name, value)
        elif value is None:
            assert _nullable(config_class, name), f"{name} accepted null ({items})"
        else:
            assert _has_type(value, hints[name]), f"{name}={value!r} is not a {hints[name]}"
        if hints[name] is bool and value is not None:
            assert text.strip().lower() in ("true", "false"), f"{name}={text} read as a boolean"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The folder the commands run in (relative paths land here)."""
    folder = tmp_path_factory.mktemp("cli_fuzz")
    (folder / "recipe.json").write_text(
        json.dumps(
            dict(
                model="tiny",
                train_files=str(folder / "train.tfrecord"),
                model_dir=str(folder / "run"),
                train_steps=4,
                warmup_steps=0,
                checkpoint_every=2,
            )
        )
    )
    (folder / "input.txt").write_text("the quick fox\na lazy dog\n")
    return folder


@contextlib.contextmanager
def inside(folder):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_main(argv):
    """(exit code, stderr) of `keras-bert ARGV` in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # argparse's usage errors
            code = e.code
    return code, err.getvalue()


def assert_one_error_line(code, stderr, command, *names):
    assert code == 2, f"exit {code}: {stderr}"
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(f"keras-bert {command}: error: "), stderr
    if names:
        assert any(name in errors[0] for name in names), f"names none of {names}: {errors[0]}"


def _digests(folder):
    return {
        path: hashlib.sha256(open(os.path.join(folder, path), "rb").read()).hexdigest()
        for path in ("recipe.json", "input.txt")
    }


# === 1. --set values ===

set_items = st.lists(
    st.tuples(
        st.one_of(
            st.sampled_from(
                _fields(pretraining.PretrainConfig) + _fields(finetuning.FinetuneConfig)
            ),
            st.sampled_from(["seq_lenght", "", " ", "a=b", "model dir"]),
        ),
        values,
    ).map(lambda kv: f"{kv[0]}={kv[1]}"),
    min_size=1,
    max_size=3,
)


def run_set(workdir, command, items):
    seen = []
    argv = (
        ["pretrain", "--config", "recipe.json"]
        if command == "pretrain"
        else ["finetune", "--task", "classify", "--train", "train.tsv", "--output-dir", "out"]
    )
    before = _digests(workdir)
    with inside(workdir), pytest.MonkeyPatch.context() as patch:
        # The library functions record the config instead of training.
        patch.setattr(pretraining, "pretrain", lambda config: seen.append(config) or {})
        patch.setattr(finetuning, "finetune", lambda config: seen.append(config) or {})
        code, stderr = run_main(argv + [part for item in items for part in ("--set", item)])
    assert _digests(workdir) == before
    if code == 0:
        check_config(seen[0], items)
    else:
        keys = [item.partition("=")[0].strip() for item in items]
        assert_one_error_line(code, stderr, command, "--set", "config", *keys)


@FAST
@given(command=st.sampled_from(["pretrain", "finetune"]), items=set_items)
def test_set_values_are_typed_or_refused_in_one_line(workdir, command, items):
    run_set(workdir, command, items)


@pytest.mark.slow
@LONG
@given(command=st.sampled_from(["pretrain", "finetune"]), items=set_items)
def test_set_values_are_typed_or_refused_in_one_line_long(workdir, command, items):
    run_set(workdir, command, items)


# === 2. Options of the commands that read files ===

# Each command with its required arguments, an input missing (so nothing
# heavy runs); the flags the fuzzer leaves alone (those that keep the input
# missing, and those that start processes).
COMMANDS = {
    "predict": (
        ["--model-dir", "absent", "--input", "input.txt", "--output", "answers.jsonl"],
        {"--model-dir", "--input"},
    ),
    "export": (["--model-dir", "absent", "--output", "export/1"], {"--model-dir"}),
    "evaluate": (["--model-dir", "absent", "--data", "input.txt"], {"--model-dir"}),
    "convert": (["--checkpoint", "absent", "--output", "model.keras"], {"--checkpoint"}),
    "vocab": (
        ["--input", "absent.txt", "--vocab-size", "50", "--output", "vocab.txt"],
        {"--input"},
    ),
    "create-pretraining-data": (
        ["--input-file", "absent.txt", "--output-file", "r.tfrecord", "--vocab-file", "input.txt"],
        {"--input-file", "--runner", "--pipeline-options", "--num-workers"},
    ),
    "encode": (["a text", "--init-checkpoint", "absent"], {"--init-checkpoint"}),
}
PATH_VALUES = [
    "input.txt",
    "recipe.json",
    "./input.txt",
    "absent",
    "out/x",
    ".",
    "/dev/null",
    "-",
    "--",
    "-1",
]


def _options(command):
    parser = commands.build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    chosen = []
    for action in sub._actions:
        flags = [flag for flag in action.option_strings if flag.startswith("--")]
        if not flags or flags[0] in COMMANDS[command][1] or flags[0] in ("--help", "--verbose"):
            continue
        takes_value = action.nargs != 0
        chosen.append((flags[0], takes_value, tuple(action.choices or ())))
    return chosen


OPTIONS = {command: _options(command) for command in COMMANDS}


@st.composite
def command_lines(draw):
    command = draw(st.sampled_from(sorted(COMMANDS)))
    argv = [command, *COMMANDS[command][0]]
    for flag, takes_value, choices in draw(st.lists(st.sampled_from(OPTIONS[command]), max_size=3)):
        argv.append(flag)
        if takes_value:
            pool = [st.sampled_from(VALUE_WORDS), st.sampled_from(PATH_VALUES), st.text(max_size=8)]
            if choices:
                pool.append(st.sampled_from([str(c) for c in choices]))
            argv.append(draw(st.one_of(pool)))
    if command == "create-pretraining-data":
        argv += ["--num-workers", "1", "--quiet"]  # no worker processes, no progress bar
    return argv


def run_command_line(workdir, argv):
    before, names = _digests(workdir), sorted(os.listdir(workdir))
    with inside(workdir):
        code, stderr = run_main(argv)
    assert _digests(workdir) == before, f"{argv} changed an input file"
    assert sorted(os.listdir(workdir)) == names, f"{argv} left {sorted(os.listdir(workdir))}"
    assert code == 2, f"{argv}: exit {code}: {stderr}"
    assert "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"keras-bert {argv[0]}: error: "), stderr


@FAST
@given(argv=command_lines())
def test_commands_refuse_in_one_line_and_keep_their_inputs(workdir, argv):
    run_command_line(workdir, argv)


@pytest.mark.slow
@LONG
@given(argv=command_lines())
def test_commands_refuse_in_one_line_and_keep_their_inputs_long(workdir, argv):
    run_command_line(workdir, argv)
