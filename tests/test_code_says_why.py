"""Code says why; results files say how fast. Comments, docstrings and docs do
not point at tracker threads a reader of the code cannot see: no issue numbers,
no "the issue's goal"."""

import os
import re

from repo_paths import REPO_ROOT

SEARCHED = ("keras_bert", "tests", "docs", "benchmarks")
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".sh")
# Data, not prose of ours (the Austen novels), and this file, which spells the patterns out.
SKIPPED = (os.path.join(REPO_ROOT, "keras_bert", "assets"), os.path.abspath(__file__))
# An issue or pull request by number (the word issue, issues, PR or pull request
# followed by digits, with or without a hash), a hash and digits alone, or the
# issue itself ("the issue's goal").
ISSUE_REFERENCE = re.compile(
    r"\b(?:issues?|PR|pull request)\s*#?\d+|(?:^|[\s(\[,])#\d+\b|\bthe issue\b", flags=re.I | re.M
)
# Not references: MRPC's column names ("#1 String", "#2 ID" in glue.py and its tests).
NOT_REFERENCES = re.compile(r"#[12] (?:String|ID)\b")


def searched_files():
    for top in SEARCHED:
        for folder, _, files in os.walk(os.path.join(REPO_ROOT, top)):
            for name in files:
                path = os.path.join(folder, name)
                if name.endswith(SUFFIXES) and not path.startswith(SKIPPED):
                    yield path


def issue_references(text):
    return [
        match.group(0).strip() for match in ISSUE_REFERENCE.finditer(NOT_REFERENCES.sub("", text))
    ]


def test_no_issue_numbers_in_code_tests_or_docs():
    found = []
    for path in searched_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                for reference in issue_references(line):
                    found.append(f"{os.path.relpath(path, REPO_ROOT)}:{number}: {reference!r}")
    assert not found, "say the reason instead of pointing at a tracker thread:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_is_for():
    number = "41"
    for text in (
        f"see issue {number}",
        f"(#{number})",
        f"Issue #{number}: why",
        f"PR {number}",
        "the Issue's 1.5x goal",
        f"fixed in #{number}.",
    ):
        assert issue_references(text), text
    for text in (
        '("#1 String", "#2 String")',
        "Quality\t#1 ID\t#2 ID",
        "C# 12",
        "page.md#section-2",
        "an issue of float rounding",
        "x[#]",
    ):
        assert not issue_references(text), text
