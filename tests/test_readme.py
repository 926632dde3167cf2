"""The README: its two commands are what CI runs, and its code blocks run."""

import os
import re

import pytest

from markdown_blocks import python_blocks, run_markdown
from repo_paths import REPO_ROOT

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
        f"README.md is over {MAX_LINES} lines: move the detail into a page of docs/")


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


def markdown_sections(text):
    """{anchor: the section's text} for every heading, anchors as MkDocs and GitHub
    make them from the heading's words."""
    sections, anchor, lines = {}, None, []
    for line in text.splitlines():
        heading = re.match(r"#+ (.*)", line)
        if heading:
            if anchor is not None:
                sections[anchor] = "\n".join(lines)
            words = re.sub(r"[^\w\s-]", "", heading.group(1).lower()).strip()
            anchor, lines = re.sub(r"\s+", "-", words), []
        else:
            lines.append(line)
    if anchor is not None:
        sections[anchor] = "\n".join(lines)
    return sections


def test_every_number_in_the_comparison_links_to_where_it_comes_from():
    table = re.search(r"## How it compares\n(.*?)\n## ", read_readme(), flags=re.S).group(1)
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]  # no header
    assert len(rows) >= 4
    numbers = 0
    for row in rows:
        for cell in [cell.strip() for cell in row.strip("|").split("|")][1:]:
            if cell == "—":
                continue
            link = re.fullmatch(r"\[([\d.,]+)\]\((docs/[\w./-]+\.md)#([\w-]+)\)", cell)
            assert link, f"a cell holds one number linking to its source: {cell!r}"
            number, page, anchor = link.groups()
            with open(os.path.join(REPO_ROOT, page), encoding="utf-8") as f:
                sections = markdown_sections(f.read())
            assert anchor in sections, f"{page} has no section #{anchor}"
            assert number in sections[anchor], f"{number} is not in {page}#{anchor}"
            numbers += 1
    assert numbers >= 10
