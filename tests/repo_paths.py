"""Where things are in the checkout, for tests in any sub-folder of tests/.

Importable from every test module because tests/conftest.py's folder is on
sys.path (pytest's default "prepend" import mode)."""

import importlib.util
import os
import sys

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS_DIR)
# Labelled real data (data/README.md); Austen's novels are package assets
# (keras_bert.assets.AUSTEN_DIR).
DATASETS_DIR = os.path.join(REPO_ROOT, "data")


def recipe_script(folder, name):
    """recipes/<folder>/<name>.py as a module, its folder on sys.path as when
    it runs as a script (it imports its siblings)."""
    return _script_module(
        os.path.join(REPO_ROOT, "recipes", folder), f"recipe_{folder}_{name}", name
    )


def benchmark_script(name):
    """benchmarks/<name>.py as a module, benchmarks/ on sys.path as when it runs
    as a script (it imports its siblings: peer_process, results_file)."""
    return _script_module(os.path.join(REPO_ROOT, "benchmarks"), f"benchmark_{name}", name)


def _script_module(directory, module_name, name):
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(
        module_name, os.path.join(directory, f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
