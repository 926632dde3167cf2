"""The documentation site (docs/, mkdocs.yml): its code blocks run, the command
table is the parser's, and its pictures are the results files they show."""

import filecmp
import os
import re

import pytest

from keras_bert.cli import command_reference

from markdown_blocks import python_blocks, run_markdown
from repo_paths import REPO_ROOT

DOCS = os.path.join(REPO_ROOT, "docs")


def markdown_pages():
    """docs/ pages, relative to the repository root, in a stable order."""
    pages = []
    for folder, _, files in os.walk(DOCS):
        pages += [
            os.path.relpath(os.path.join(folder, name), REPO_ROOT)
            for name in files
            if name.endswith(".md")
        ]
    return sorted(pages)


PAGES_WITH_CODE = [page for page in markdown_pages() if python_blocks(page)]
FAST_PAGES = [
    page for page in PAGES_WITH_CODE if any(not block.slow for block in python_blocks(page))
]


def test_the_pages_hold_code_to_run():
    assert len(PAGES_WITH_CODE) >= 6, PAGES_WITH_CODE
    assert FAST_PAGES, "at least one page's blocks run in the fast suite"


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_every_block_compiles(page):
    for block in python_blocks(page):
        compile(block.code, f"{page}:{block.line}", "exec")


@pytest.mark.parametrize("page", FAST_PAGES)
def test_fast_blocks_run(page, tmp_path, monkeypatch, minilm_path):
    assert run_markdown(page, tmp_path, monkeypatch, minilm_path, include_slow=False) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_every_block_runs(page, tmp_path, monkeypatch, minilm_path):
    ran = run_markdown(page, tmp_path, monkeypatch, minilm_path, include_slow=True)
    assert ran == len(python_blocks(page))


def test_command_reference_in_sync():
    with open(os.path.join(DOCS, "guides", "command-line.md"), encoding="utf-8") as f:
        text = f.read()
    block = re.search(
        r"<!-- command-reference:start -->\n(.*)\n<!-- command-reference:end -->", text, flags=re.S
    )
    assert block, "docs/guides/command-line.md lacks the command-reference markers"
    assert block.group(1) == command_reference(), (
        "docs/guides/command-line.md's command table is stale: paste "
        "keras_bert.cli.command_reference()"
    )


def test_the_ablation_pictures_are_the_results_files():
    """The site cannot link outside docs/, so it shows copies: refresh them with
    `cp recipes/ablations/results/*.png docs/images/ablations/` after a rerun."""
    results = os.path.join(REPO_ROOT, "recipes", "ablations", "results")
    pictures = os.path.join(DOCS, "images", "ablations")
    names = sorted(name for name in os.listdir(results) if name.endswith(".png"))
    assert names and sorted(os.listdir(pictures)) == names
    for name in names:
        assert filecmp.cmp(
            os.path.join(results, name), os.path.join(pictures, name), shallow=False
        ), f"docs/images/ablations/{name} is stale"
