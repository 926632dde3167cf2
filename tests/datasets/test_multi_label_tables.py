"""Multi-label tables: a label column of names separated by `|` (or another
separator), a JSON Lines list, an empty cell for none; a single-label run
given such rows says how to train on them."""

import json

import pytest

from keras_bert.datasets import readers
from keras_bert.training import finetuning
from keras_bert.training.finetuning import FinetuneConfig


def test_a_tsv_label_column_holds_names_separated_by_the_separator(tmp_path):
    path = tmp_path / "topics.tsv"
    path.write_text(
        "label\ttext\nsports|politics\ta\n\tb\ntech\tc\n politics | tech |\td\n", encoding="utf-8"
    )
    x, labels = readers.read_texts_and_labels(str(path), label_separator="|")
    assert x == ["a", "b", "c", "d"]
    assert labels == [["sports", "politics"], [], ["tech"], ["politics", "tech"]]
    x, labels = readers.read_texts_and_labels(str(path), label_separator=",")
    assert labels[0] == ["sports|politics"]


def test_jsonl_lists_csv_and_in_memory_columns(tmp_path):
    path = tmp_path / "topics.jsonl"
    rows = [{"text": "a", "label": ["sports", "tech"]}, {"text": "b", "label": []}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert readers.read_texts_and_labels(str(path), label_separator="|")[1] == [
        ["sports", "tech"],
        [],
    ]
    csv = tmp_path / "topics.csv"
    csv.write_text('text,label\n"a, b",sports|tech\n', encoding="utf-8")
    assert readers.read_texts_and_labels(str(csv), label_separator="|") == (
        ["a, b"],
        [["sports", "tech"]],
    )
    columns = {"text": ["a", "b"], "label": [["tech"], "sports|politics"]}
    assert readers.read_texts_and_labels(columns, label_separator="|")[1] == [
        ["tech"],
        ["sports", "politics"],
    ]


def test_a_single_label_run_names_rows_with_several_labels(tmp_path):
    path = tmp_path / "topics.tsv"
    path.write_text("label\ttext\nsports\ta\nsports|politics\tb\n", encoding="utf-8")
    task = finetuning.make_task(FinetuneConfig(task="classify"))
    with pytest.raises(ValueError, match=r"row 2: label 'sports\|politics' is several labels"):
        task.read(str(path), training=True)
    with pytest.raises(ValueError, match="--multi-label"):
        task.read(str(path), training=True)
    jsonl = tmp_path / "topics.jsonl"
    jsonl.write_text('{"text": "a", "label": ["sports", "tech"]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: label \['sports', 'tech'\] is a list of 2"):
        readers.read_texts_and_labels(str(jsonl))
    # Multi-label: the names seen in training, sorted, are the labels.
    multi = finetuning.make_task(FinetuneConfig(task="classify", multi_label=True))
    x, labels = multi.read(str(path), training=True)
    assert multi.label_names == ["politics", "sports"] and multi.primary_metric == "f1_micro"
    assert labels == [["sports"], ["sports", "politics"]]


def test_multi_label_config_is_checked():
    with pytest.raises(ValueError, match="multi_label is for --task classify"):
        FinetuneConfig(task="regress", multi_label=True)
    with pytest.raises(ValueError, match="glue_task 'mrpc'"):
        FinetuneConfig(task="classify", multi_label=True, glue_task="mrpc")
    with pytest.raises(ValueError, match="label_separator must be a character"):
        FinetuneConfig(task="classify", multi_label=True, label_separator=" ")
    with pytest.raises(ValueError, match="threshold must be a probability"):
        FinetuneConfig(task="classify", multi_label=True, threshold=1.5)
    with pytest.raises(ValueError, match="a threshold is for multi-label classification"):
        FinetuneConfig(task="classify", threshold=0.3)
