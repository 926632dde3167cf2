"""What several `keras-bert` commands accept alike: argument types that refuse
a bad value before any work starts, and the flags added the same way to more
than one command."""

import argparse
import math
import os

# === Argument types ===


def bounded_number(kind, low, high=None, low_open=False):
    """An argparse type: a `kind` number in [low, high] (low excluded with `low_open`)."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):  # nan passes every comparison below
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if (value <= low if low_open else value < low) or (high is not None and value > high):
            bound = f"> {low}" if low_open else f">= {low}"
            bound += f" and <= {high}" if high is not None else ""
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


positive_int = bounded_number(int, 1)
non_negative_int = bounded_number(int, 0)
positive_float = bounded_number(float, 0, low_open=True)
probability = bounded_number(float, 0, 1)
# 512: the position embeddings of every BERT checkpoint (a model's own limit is checked later).
sequence_length = bounded_number(int, 3, 512)


def input_file(text):
    """An argparse type: a path that must be a file (not a directory); gs:// and globs pass."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file")
    return text


def output_file(text):
    """An argparse type: a file to write, which must not name a directory."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file name")
    return text


def keywords(args, *names):
    """The parsed values of `names`: keyword arguments for a library function
    whose parameters are named as the flags are."""
    return {name: getattr(args, name) for name in names}


# === Flags shared by several commands ===

# A list, not the library's tuple: `keras_bert.training` would load TensorFlow.
TASK_CHOICES = ["classify", "regress", "tag", "squad", "embed"]


def add_precision_argument(parser, default=None):
    """--mixed-precision, one rule for every command (keras_bert.kernels.precision)."""
    parser.add_argument(
        "--mixed-precision",
        default=default,
        choices=["float32", "mixed_bfloat16", "mixed_float16", "bfloat16", "float16", "auto"],
        help="[float32, on every machine] mixed_bfloat16, mixed_float16 (loss-scaled), "
        "or auto: what this machine multiplies natively, said in one line",
    )


def add_overrides_argument(parser, example):
    """--set KEY=VALUE, repeatable: recipe fields over the --config file's."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a recipe field, e.g. --set {example}",
    )


def add_casing_arguments(parser):
    """--cased / --uncased for a command reading a checkpoint; neither: its own casing."""
    casing = parser.add_mutually_exclusive_group()
    casing.add_argument(
        "--cased",
        dest="lowercase",
        action="store_false",
        default=None,
        help="the model is cased (default: the checkpoint's casing, from "
        "tokenizer_config.json, the TF1 folder name or the vocabulary)",
    )
    casing.add_argument(
        "--uncased",
        dest="lowercase",
        action="store_true",
        default=None,
        help="the model is uncased: text is lowercased (default: detected)",
    )


def add_data_arguments(parser):
    """How finetune and evaluate read a data set: GLUE task, table columns,
    labels, SQuAD v2.0."""
    parser.add_argument(
        "--glue-task",
        default=None,
        help="read the data as this GLUE task (cola, sst2, mrpc, stsb, qqp, "
        "mnli, qnli, rte, wnli): original TSVs or tfds:glue/<task>:<split>",
    )
    parser.add_argument(
        "--text-columns",
        default=None,
        help="comma-separated text column(s) of a TSV/CSV/JSONL table "
        "(default: every column but the label, at most two; embed: "
        "2 or 3, e.g. title,text)",
    )
    parser.add_argument(
        "--label-column",
        default=None,
        help="[label] (embed: a score column [score, or a numeric label])",
    )
    parser.add_argument(
        "--label-separator",
        default=None,
        help="multi-label: what separates a row's label names [|], e.g. sports|politics",
    )
    parser.add_argument(
        "--threshold",
        type=probability,
        default=None,
        help="multi-label: a label is predicted where its probability is above "
        "this [0.5; evaluate: the model folder's]",
    )
    parser.add_argument(
        "--version-2-with-negative",
        action="store_true",
        default=None,
        help="SQuAD v2.0: questions may have no answer",
    )
    parser.add_argument(
        "--null-score-diff-threshold",
        type=float,
        default=None,
        help='SQuAD v2.0: answer "" when null score - best span score '
        "exceeds this (tune it on dev: see best_f1_thresh)",
    )
