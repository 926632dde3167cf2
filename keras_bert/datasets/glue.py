"""The GLUE tasks: readers for TFDS (`glue/<task>`) and the original TSV files,
label vocabularies and each task's official metric.

Label indices follow TFDS's `ClassLabel` order, so a model trained from either
source predicts the same indices; `label_names` are TFDS's names.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from keras_bert.datasets import metrics
from keras_bert.datasets.text_classification import TextExamples, read_text_examples

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


@dataclasses.dataclass(frozen=True)
class GlueTask:
    tfds_texts: tuple  # TFDS feature names of the text(s)
    tsv_texts: tuple  # column names (indices for header-less CoLA) in the TSV files
    tsv_label: object  # label column name (or index)
    tsv_labels: tuple  # the TSV label strings, in TFDS index order; () for regression
    label_names: tuple  # TFDS ClassLabel names; () for regression
    metric: str  # the figure GLUE reports first
    dev_splits: tuple = ("validation",)
    tsv_header: bool = True

    @property
    def regression(self) -> bool:
        return not self.label_names


_ENTAILMENT = ("entailment", "not_entailment")
GLUE_TASKS = {
    "cola": GlueTask(
        ("sentence",),
        (3,),
        1,
        ("0", "1"),
        ("unacceptable", "acceptable"),
        "matthews_corrcoef",
        tsv_header=False,
    ),
    "sst2": GlueTask(
        ("sentence",), ("sentence",), "label", ("0", "1"), ("negative", "positive"), "accuracy"
    ),
    "mrpc": GlueTask(
        ("sentence1", "sentence2"),
        ("#1 String", "#2 String"),
        "Quality",
        ("0", "1"),
        ("not_equivalent", "equivalent"),
        "f1",
    ),
    "stsb": GlueTask(
        ("sentence1", "sentence2"), ("sentence1", "sentence2"), "score", (), (), "pearson"
    ),
    "qqp": GlueTask(
        ("question1", "question2"),
        ("question1", "question2"),
        "is_duplicate",
        ("0", "1"),
        ("not_duplicate", "duplicate"),
        "f1",
    ),
    "mnli": GlueTask(
        ("premise", "hypothesis"),
        ("sentence1", "sentence2"),
        "gold_label",
        ("entailment", "neutral", "contradiction"),
        ("entailment", "neutral", "contradiction"),
        "accuracy",
        dev_splits=("validation_matched", "validation_mismatched"),
    ),
    "qnli": GlueTask(
        ("question", "sentence"),
        ("question", "sentence"),
        "label",
        _ENTAILMENT,
        _ENTAILMENT,
        "accuracy",
    ),
    "rte": GlueTask(
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "label",
        _ENTAILMENT,
        _ENTAILMENT,
        "accuracy",
    ),
    "wnli": GlueTask(
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "label",
        ("0", "1"),
        ("not_entailment", "entailment"),
        "accuracy",
    ),
}


def get_task(name: str) -> tuple[str, GlueTask]:
    key = name.lower().replace("-", "").replace("_", "")
    key = {"sts": "stsb", "sst": "sst2"}.get(key, key)
    if key not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {name!r}; choose from {sorted(GLUE_TASKS)}")
    return key, GLUE_TASKS[key]


def read_glue_tsv(task_name: str, path: str) -> TextExamples:
    """An original GLUE TSV file (e.g. `CoLA/dev.tsv`, `MNLI/dev_matched.tsv`).

    Labels come back as TFDS's class names (floats for STS-B).
    """
    _, task = get_task(task_name)
    examples = read_text_examples(
        path,
        task.tsv_texts,
        task.tsv_label,
        regression=task.regression,
        header=task.tsv_header,
        allow_empty_text=True,
    )
    if not task.regression:
        mapping = dict(zip(task.tsv_labels, task.label_names))
        unknown = sorted(set(examples.labels) - set(mapping))
        if unknown:
            raise ValueError(
                f"{path}: label(s) {unknown[:5]} are not {task_name} labels {list(task.tsv_labels)}"
            )
        examples.labels = [mapping[label] for label in examples.labels]
    return examples


def read_glue_tfds(task_name: str, split: str, data_dir: str | None = None) -> TextExamples:
    """`tfds.load("glue/<task>", split=split)` as `TextExamples` (TFDS test
    splits have label -1: those rows get label None)."""
    import tensorflow_datasets as tfds

    key, task = get_task(task_name)
    dataset = tfds.load(f"glue/{key}", split=split, data_dir=data_dir)
    texts = {name: [] for name in task.tfds_texts}
    labels, ids = [], []
    for row in tfds.as_numpy(dataset):
        for name in task.tfds_texts:
            texts[name].append(row[name].decode("utf-8"))
        label = row["label"]
        if task.regression:
            labels.append(float(label))
        else:
            labels.append(task.label_names[int(label)] if int(label) >= 0 else None)
        ids.append(int(row["idx"]))
    names = task.tfds_texts
    return TextExamples(texts[names[0]], texts[names[1]] if len(names) > 1 else None, labels, ids)


def glue_metrics(task_name: str, labels: ArrayLike, predictions: ArrayLike) -> dict[str, float]:
    """GLUE's figures for the task: labels / predictions are class indices
    (scores for STS-B)."""
    _, task = get_task(task_name)
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if task.regression:
        return {
            "pearson": metrics.pearson(labels, predictions),
            "spearman": metrics.spearman(labels, predictions),
        }
    result = {"accuracy": metrics.accuracy(labels, predictions)}
    if task.metric == "f1":
        result["f1"] = metrics.f1(labels, predictions)
    if task.metric == "matthews_corrcoef":
        result["matthews_corrcoef"] = metrics.matthews_corrcoef(labels, predictions)
    return result
