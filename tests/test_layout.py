"""The package's layout: imports only go down the pipeline, and the docs' architecture page
maps every module."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from repo_paths import REPO_ROOT

ROOT = REPO_ROOT
PACKAGE = os.path.join(ROOT, "keras_bert")


def test_imports_only_go_down_the_pipeline():
    # The running environment's own first: pytest may run from a venv that is not on PATH.
    lint_imports = shutil.which(
        "lint-imports", path=os.path.dirname(sys.executable)
    ) or shutil.which("lint-imports")
    if lint_imports is None:
        pytest.fail("import-linter is not installed: pip install -e '.[test]'")
    result = subprocess.run(
        [lint_imports, "--config", os.path.join(ROOT, ".importlinter")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert "1 kept, 0 broken" in result.stdout


ARCHITECTURE = os.path.join(ROOT, "docs", "architecture.md")


def test_architecture_page_maps_every_module():
    with open(ARCHITECTURE, encoding="utf-8") as f:
        block = re.search(
            r"<!-- module-map:start -->\n(.*)\n<!-- module-map:end -->", f.read(), flags=re.S
        ).group(1)
    mapped = set(re.findall(r"^\| `([^`]+)` \|", block, flags=re.M))
    modules = set()
    for folder, _, files in os.walk(PACKAGE):
        relative = os.path.relpath(folder, PACKAGE)
        for name in files:
            if name.endswith(".py") and name != "__init__.py":
                modules.add(name if relative == "." else f"{relative}/{name}")
    packages_mapped_whole = {entry.rstrip("/") for entry in mapped if entry.endswith("/")}
    modules = {m for m in modules if m.split("/")[0] not in packages_mapped_whole}
    assert modules - mapped == set(), "add these modules to docs/architecture.md's module map"
    assert mapped - modules - {p + "/" for p in packages_mapped_whole} == set(), (
        "docs/architecture.md's module map names modules that do not exist"
    )
