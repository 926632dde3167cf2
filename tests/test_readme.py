"""The README: its two commands are what CI runs, and its code blocks run."""

import os
import re

import pytest

from markdown_blocks import python_blocks, run_markdown
from repo_paths import REPO_ROOT, benchmark_script

README = os.path.join(REPO_ROOT, "README.md")
# A first screen for users (keras-hub's README is 182 lines); the reference lives in docs/.
MAX_LINES = 250


def read_readme():
    with open(README, encoding="utf-8") as f:
        return f.read()


def test_readme_gives_the_two_commands_and_ci_runs_the_same():
    commands = re.findall(r"```bash\n(.*?)\n```", read_readme(), flags=re.S)
    assert "python3 run.py quickstart" in commands
    assert "python3 run.py tests" in commands
    with open(os.path.join(REPO_ROOT, ".ci", "run"), encoding="utf-8") as f:
        assert "\npython3 run.py tests\n" in f.read()


def test_readme_is_a_first_screen_not_a_reference():
    assert len(read_readme().splitlines()) <= MAX_LINES, (
        f"README.md is over {MAX_LINES} lines: move the detail into a page of docs/"
    )


def test_every_readme_block_compiles():
    blocks = python_blocks("README.md")
    assert len(blocks) >= 6, "one snippet per task family"
    for block in blocks:
        compile(block.code, f"README.md:{block.line}", "exec")


def test_readme_fast_blocks_run(tmp_path, monkeypatch, minilm_path):
    assert run_markdown("README.md", tmp_path, monkeypatch, minilm_path, include_slow=False) >= 1


@pytest.mark.slow
def test_readme_every_block_runs(tmp_path, monkeypatch, minilm_path):
    ran = run_markdown("README.md", tmp_path, monkeypatch, minilm_path, include_slow=True)
    assert ran == len(python_blocks("README.md"))


def test_the_comparison_table_is_generated_from_the_results_files():
    """A typed or stale number fails: the README's table must be what
    `python benchmarks/summary.py --write-readme` writes from the results files now."""
    summary = benchmark_script("summary")
    assert summary.readme_block(read_readme()) == summary.table(), (
        "README.md's comparison table differs from the results files': "
        "python benchmarks/summary.py --write-readme"
    )


def test_every_number_in_the_comparison_links_to_its_results_file():
    block = benchmark_script("summary").readme_block(read_readme())
    rows = [line for line in block.splitlines() if line.startswith("| ")][1:]  # no header
    assert len(rows) >= 4
    numbers = 0
    for row in rows:
        for cell in [cell.strip() for cell in row.strip("|").split("|")][1:]:
            if cell == "—":
                continue
            link = re.fullmatch(r"\[([\d.,]+)\]\((benchmarks/results/[\w-]+\.md)\)", cell)
            assert link, f"a cell holds one number linking to its results file: {cell!r}"
            number, page = link.groups()
            with open(os.path.join(REPO_ROOT, page), encoding="utf-8") as f:
                assert f"| {number} |" in f.read(), f"{number} is not a headline of {page}"
            numbers += 1
    assert numbers >= 10
