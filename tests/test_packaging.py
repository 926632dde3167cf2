"""The package as a user gets it: the README's names, one version, a wheel that
works outside this checkout, and run.py's one-time set-up."""

import ast
import importlib.util
import json
import os
import re
import site
import subprocess
import sys

import pytest

import keras_bert
from keras_bert.cli import native_logs

from markdown_blocks import python_blocks
from repo_paths import REPO_ROOT

ROOT = REPO_ROOT


def user_pages():
    """The Markdown a user reads: the README and the docs' pages (repository-relative)."""
    pages = ["README.md"]
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        pages += sorted(
            os.path.relpath(os.path.join(folder, name), ROOT)
            for name in files
            if name.endswith(".md")
        )
    return pages


def user_python_blocks():
    return [block.code for page in user_pages() for block in python_blocks(page)]


def test_every_name_the_docs_import_exists():
    """Each import of the README's and the docs' code blocks runs exactly as written,
    and every `keras_bert.a.b` the blocks use resolves (fast: the blocks themselves
    run in tests/test_readme.py and tests/test_docs.py, most in the slow suite)."""
    statements = []
    for block in user_python_blocks():
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                statements.append(ast.unparse(node))
    assert len(statements) >= 5, statements
    for statement in statements:
        exec(statement, {})  # noqa: S102 - the pages' own import lines
    for block in user_python_blocks():
        for chain in re.findall(r"\bkeras_bert((?:\.[A-Za-z_]\w*)+)", block):
            value = keras_bert
            for name in chain.strip(".").split("."):
                value = getattr(value, name)


def test_every_dotted_name_the_docs_mention_resolves():
    """Prose too: `keras_bert.export.serving_ops.ops_serving_lacks` and the like stay true
    when modules move."""
    references = set()
    for page in user_pages():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            references |= set(re.findall(r"`(keras_bert(?:\.[A-Za-z_]\w*)+)", f.read()))
    assert len(references) >= 5, references
    for reference in sorted(references):
        parts = reference.split(".")
        for split in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                value = importlib.import_module(".".join(parts[:split]))
                break
            except ImportError:
                continue
        for name in parts[split:]:
            value = getattr(value, name)


def test_public_api_is_reachable_from_the_top_level():
    for name in keras_bert.__all__:
        assert getattr(keras_bert, name) is not None, name
    assert keras_bert.checkpoints.resolve and keras_bert.BertEncoder.from_pretrained
    assert keras_bert.export.export_saved_model
    assert keras_bert.BertPretrainer.__name__ == "BertPretrainer"
    assert {
        "checkpoints",
        "cli",
        "export",
        "kernels",
        "layers",
        "models",
        "pretraining_data",
        "datasets",
        "text",
        "training",
    } <= set(keras_bert.__all__)
    assert keras_bert.training.finetuning.finetune and keras_bert.text.tokenizer.BertTokenizer
    assert os.path.exists(os.path.join(os.path.dirname(keras_bert.__file__), "py.typed"))


def test_the_version_is_written_once():
    spec = importlib.util.spec_from_file_location("setup_py", os.path.join(ROOT, "setup.py"))
    with open(spec.origin, encoding="utf-8") as f:
        source = f.read()
    assert re.search(r"version\s*=\s*read_version\(\)", source)
    namespace = {"__file__": spec.origin}
    exec(source.split("\nsetup(")[0], namespace)  # noqa: S102 - setup.py up to setup()
    assert namespace["read_version"]() == keras_bert.__version__
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
        assert f"\n## [{keras_bert.__version__}]" in f.read()


def test_the_changelog_keeps_a_changelog():
    """keepachangelog.com's form: versions, then its kinds of change, one line each."""
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    versions = [line for line in lines if line.startswith("## ")]
    assert versions[0] == "## [Unreleased]", versions
    assert all(
        re.fullmatch(r"## \[(Unreleased|\d+\.\d+\.\d+)\]( - \d{4}-\d{2}-\d{2})?", line)
        for line in versions
    ), versions
    kinds = {line for line in lines if line.startswith("### ")}
    assert kinds <= {
        f"### {kind}" for kind in ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
    }, kinds
    first_version = lines.index(versions[0])
    for number, line in enumerate(lines[first_version:], first_version + 1):
        assert not line.startswith("  "), f"CHANGELOG.md:{number}: one line per change"


# === run.py: the README's two commands ===


def load_run_py(monkeypatch, venv):
    monkeypatch.setenv("KERAS_BERT_VENV", str(venv))
    spec = importlib.util.spec_from_file_location("run_py", os.path.join(ROOT, "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_py_installs_once_and_adds_only_what_is_missing(monkeypatch, tmp_path):
    run_py = load_run_py(monkeypatch, tmp_path / "venv")
    calls = []

    def create_venv(path, with_pip):
        calls.append("venv")
        os.makedirs(os.path.dirname(run_py.venv_bin("python")))
        open(run_py.venv_bin("python"), "w").close()

    monkeypatch.setattr(run_py.venv, "create", create_venv)
    monkeypatch.setattr(run_py.subprocess, "run", lambda command, check: calls.append(command[-1]))
    run_py.ensure_installed("quickstart")
    assert calls == ["venv", ROOT]
    run_py.ensure_installed("quickstart")  # installed: nothing to do
    assert calls == ["venv", ROOT]
    run_py.ensure_installed("tests")  # the test extras and the real weights, once
    assert calls[2:] == [ROOT + "[beam,docs,lint,test]", run_py.TEST_WEIGHTS]
    run_py.ensure_installed("tests")
    run_py.ensure_installed("quickstart")
    assert len(calls) == 4
    with open(run_py.STAMP, encoding="utf-8") as f:
        stamp = json.load(f)
    stamp["setup"] = "an older setup.py"
    with open(run_py.STAMP, "w", encoding="utf-8") as f:
        json.dump(stamp, f)
    run_py.ensure_installed("quickstart")  # setup.py changed: reinstalled
    assert calls[4:] == [ROOT]


def test_run_py_names_its_commands(monkeypatch, tmp_path, capsys):
    run_py = load_run_py(monkeypatch, tmp_path / "venv")
    assert run_py.main([]) == 2
    assert "python3 run.py quickstart" in capsys.readouterr().err


def test_run_py_runs_the_tests_in_a_worker_per_core_unless_told(monkeypatch, tmp_path):
    run_py = load_run_py(monkeypatch, tmp_path / "venv")
    monkeypatch.setattr(run_py, "memory_bytes", lambda: 64 * 2**30)
    monkeypatch.setattr(run_py.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert run_py.parallel_options(["-m", "slow"]) == ["-n", "2", "--dist", "worksteal"]
    assert run_py.parallel_options(["--dist", "load"]) == ["-n", "2"]
    for chosen in (["-n", "0"], ["-n3"], ["--numprocesses=3"], ["-p", "no:xdist"]):
        assert run_py.parallel_options(chosen) == [], chosen
    monkeypatch.setattr(run_py.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert run_py.parallel_options([])[:2] == ["-n", str(run_py.MAX_TEST_WORKERS)]
    monkeypatch.setattr(run_py.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert run_py.parallel_options([]) == []  # one core: in this process
    monkeypatch.setattr(run_py.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(run_py, "memory_bytes", lambda: 12 * 2**30)
    assert run_py.parallel_options([]) == []  # memory for one worker: in this process


# === A wheel, installed outside the checkout ===


@pytest.mark.slow
def test_wheel_installs_and_its_commands_run_outside_the_checkout(tmp_path):
    """A non-editable install carries what the commands read at run time (the
    vocabulary, the Unicode tables, the Austen novels); nothing comes from here."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            ROOT,
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.iterdir()
    # A fresh environment that reuses this one's dependencies (no download): this
    # environment's site-packages goes on its path, but not its .pth files, so
    # the editable keras_bert of this checkout stays out.
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = str(env_dir / "bin" / "python")
    env_site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with open(os.path.join(env_site, "dependencies.pth"), "w", encoding="utf-8") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", str(wheel)],
        check=True,
    )
    bin_dir = str(env_dir / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")}
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [python, "-c", "import keras_bert; print(keras_bert.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=elsewhere,
        env=env,
    )
    assert where.stdout.startswith(env_site), where.stdout

    quickstart = subprocess.run(
        [os.path.join(bin_dir, "keras-bert"), "quickstart", "--fast", "--output", "qs"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        timeout=1200,
    )
    output = quickstart.stdout + quickstart.stderr
    assert quickstart.returncode == 0, output[-3000:]
    assert "[8/8]" in quickstart.stdout
    # Quiet by default: no TensorFlow / XLA / oneDNN C++ log line anywhere.
    assert [
        line
        for line in output.splitlines(keepends=True)
        if native_logs.is_native_log_line(line.encode())
    ] == []
    assert not re.search(r"cuInit|oneDNN|Compiled cluster", output), output[-3000:]

    encode = subprocess.run(
        [os.path.join(bin_dir, "keras-bert"), "encode", "Hello, world!"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        timeout=600,
    )
    assert encode.returncode == 0, encode.stderr[-3000:]
    assert "hello" in encode.stdout and "world" in encode.stdout
