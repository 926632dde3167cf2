"""The README's comparison table, generated from the results files.

Each row quotes one headline of one results file (benchmarks/results/<name>.json,
written by the benchmark scripts through `results_file`); each cell is one
number linking to the results file it comes from, "—" where that side was not
measured. The README holds the table between two marker comments:

    python benchmarks/summary.py                  # print the table
    python benchmarks/summary.py --write-readme   # rewrite README.md's table
    python benchmarks/summary.py --check          # exit 1 if README.md's table is stale

tests/test_readme.py checks that the README's table is what this writes now, so
a typed number fails.
"""

import argparse
import os
import re
import sys

import results_file

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(os.path.dirname(HERE), "README.md")
START, END = "<!-- comparison:start -->", "<!-- comparison:end -->"
COLUMNS = ("keras_bert", "Model Garden", "keras-hub", "HuggingFace")
# (row label, results file, headline key): the README's rows, in order.
ROWS = (
    ("pretraining step, BERT-mini, seq/s", "pretraining_throughput", "mini_seq_per_second"),
    ("pretraining data, Austen, instances/s", "pretraining_data", "instances_per_second"),
    ("tokenizer, Austen, lines/s", "tokenizer", "lines_per_second"),
    ("serving MiniLM, 32 reviews a call, seq/s", "inference", "natural_b32_seq_per_second"),
    (
        "fine-tuned MiniLM, rotten_tomatoes dev accuracy, %",
        "finetuning",
        "rotten_tomatoes_dev_accuracy",
    ),
)


def headline(name, key, directory=results_file.RESULTS_DIR):
    """The headline `key` of results file `name`; KeyError naming both if absent."""
    report = results_file.read(name, directory)
    for row in report["headlines"]:
        if row["key"] == key:
            return row
    raise KeyError(
        f"benchmarks/results/{name}.json has no headline {key!r} (it has: "
        f"{', '.join(row['key'] for row in report['headlines'])}); rerun "
        f"benchmarks/{report['benchmark']}.py or change summary.ROWS"
    )


def table(directory=results_file.RESULTS_DIR, link_prefix="benchmarks/results/"):
    """The Markdown table, one row per ROWS entry."""
    lines = ["| measured | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for label, name, key in ROWS:
        row = headline(name, key, directory)
        cells = []
        for column in COLUMNS:
            value = row["figures"].get(column)
            cells.append(
                "—"
                if value is None
                else f"[{results_file.format_number(value, row['decimals'])}]"
                f"({link_prefix}{name}.md)"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def readme_block(text):
    """The text between the README's markers; ValueError if they are missing."""
    match = re.search(re.escape(START) + r"\n(.*?)\n?" + re.escape(END), text, flags=re.S)
    if match is None:
        raise ValueError(f"README.md lacks the markers {START} ... {END} around the table")
    return match.group(1)


def with_table(text, new_table):
    """`text` with the block between the markers replaced by `new_table`."""
    readme_block(text)  # the markers must be there
    return re.sub(
        re.escape(START) + r".*?" + re.escape(END),
        lambda _: f"{START}\n{new_table}\n{END}",
        text,
        count=1,
        flags=re.S,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--write-readme", action="store_true", help="rewrite README.md's table between its markers"
    )
    action.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if README.md's table differs from the results files'",
    )
    args = parser.parse_args(argv)
    generated = table()
    if not (args.write_readme or args.check):
        print(generated)
        return 0
    with open(README, encoding="utf-8") as f:
        text = f.read()
    if args.check:
        if readme_block(text) != generated:
            print(
                "README.md's comparison table is stale: python benchmarks/summary.py "
                "--write-readme",
                file=sys.stderr,
            )
            return 1
        return 0
    with open(README, "w", encoding="utf-8") as f:
        f.write(with_table(text, generated))
    return 0


if __name__ == "__main__":
    sys.exit(main())
