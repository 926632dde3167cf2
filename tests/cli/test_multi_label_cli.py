"""`keras-bert finetune --task classify --multi-label` on a table whose label
column holds several names (`fast|animal`), then `evaluate`, `predict` and
`export` of the written model: the figures are scikit-learn's on the saved
model's own probabilities, the answers are its `predict_labels`."""

import json
import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import accuracy_score, f1_score

from keras_bert import cli

from conftest import TINY_VOCAB
from harness import run_command

FILLER = ["the", "brown", "over", "a", ".", ","]
LABELS = ["animal", "fast", "slow"]


def write_topics(path, n, seed):
    """Each text's labels come from its words: `quick` is fast, `lazy` slow,
    `fox` / `dog` an animal; some texts have none."""
    rng = random.Random(seed)
    lines = ["label\ttext"]
    for _ in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randrange(1, 5))]
        names = []
        for word, label in (
            ("quick", "fast"),
            ("lazy", "slow"),
            (rng.choice(["fox", "dog"]), "animal"),
        ):
            if rng.random() < 0.5:
                words.insert(rng.randrange(len(words) + 1), word)
                names.append(label)
        lines.append(f"{'|'.join(names)}\t{' '.join(words)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def read_table(path):
    rows = [line.split("\t") for line in open(path, encoding="utf-8").read().splitlines()[1:]]
    texts = [text for _, text in rows]
    multi_hot = np.array([[name in labels.split("|") for name in LABELS] for labels, _ in rows])
    return texts, multi_hot.astype(int)


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("multi_label_cli")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    train = write_topics(folder / "train.tsv", 96, seed=0)
    dev = write_topics(folder / "dev.tsv", 32, seed=1)
    output = str(folder / "run")
    code = run_command(
        "finetune --task classify --multi-label --train {train} --dev "
        "{dev} --output-dir {output_dir} --vocab-file {vocab_file} "
        "--seq-length 16 --batch-size 16 --learning-rate 1e-3 "
        "--epochs 4 --no-tensorboard --set verbose=0",
        train=train,
        dev=dev,
        output_dir=output,
        vocab_file=vocab,
    )
    assert code == 0
    return folder, output, dev


def test_finetune_writes_a_multi_label_model_scored_by_f1(finetuned):
    folder, output, dev = finetuned
    saved = json.load(open(os.path.join(output, "finetune_config.json")))
    assert saved["multi_label"] is True and saved["label_names"] == LABELS
    assert saved["label_separator"] == "|" and saved["threshold"] == 0.5
    model = keras.models.load_model(os.path.join(output, "model.keras"))
    assert model.multi_label and model.label_names == LABELS
    results = json.load(open(os.path.join(output, "dev_results.json")))["dev"]
    texts, truth = read_table(dev)
    predicted = model.predict_proba(texts) > 0.5
    # The figures of the model written (the best dev epoch's), by scikit-learn.
    assert results["f1_micro"] == pytest.approx(f1_score(truth, predicted, average="micro"))
    assert results["f1_macro"] == pytest.approx(
        f1_score(truth, predicted, average="macro", zero_division=0)
    )
    assert results["subset_accuracy"] == pytest.approx(accuracy_score(truth, predicted))


def test_evaluate_at_another_threshold_matches_sklearn(finetuned, capsys):
    folder, output, dev = finetuned
    capsys.readouterr()
    assert cli.main(["evaluate", "--model-dir", output, "--data", dev, "--threshold", "0.3"]) == 0
    printed = json.loads(capsys.readouterr().out)
    model = keras.models.load_model(os.path.join(output, "model.keras"))
    texts, truth = read_table(dev)
    predicted = model.predict_proba(texts) > 0.3
    assert printed["f1_micro"] == pytest.approx(f1_score(truth, predicted, average="micro"))
    assert printed["f1_macro"] == pytest.approx(
        f1_score(truth, predicted, average="macro", zero_division=0)
    )


def test_predict_answers_the_labels_above_the_threshold(finetuned, tmp_path, capsys):
    folder, output, dev = finetuned
    texts, _ = read_table(dev)
    inputs = tmp_path / "texts.txt"
    inputs.write_text("\n".join(texts[:6]) + "\n", encoding="utf-8")
    model = keras.models.load_model(os.path.join(output, "model.keras"))
    for threshold in (None, "0.3"):
        answers_file = tmp_path / f"answers_{threshold}.jsonl"
        flags = [] if threshold is None else ["--threshold", threshold]
        command = ["predict", "--model-dir", output, "--input", str(inputs)]
        assert cli.main([*command, "--output", str(answers_file), *flags]) == 0
        answers = [json.loads(line) for line in open(answers_file, encoding="utf-8")]
        cut = 0.5 if threshold is None else float(threshold)
        assert [a["labels"] for a in answers] == model.predict_labels(texts[:6], threshold=cut)
        np.testing.assert_allclose(
            [[a["probabilities"][name] for name in LABELS] for a in answers],
            model.predict_proba(texts[:6]),
            atol=1e-6,
        )
        assert all("label" not in a for a in answers)


@pytest.mark.slow
def test_export_serves_the_labels_above_the_threshold(finetuned, capsys):
    """The command's export, loaded with tf.saved_model.load and called as a
    model server calls `serving_default` (text only: text_pair's default)."""
    import tensorflow_text  # noqa: F401 (the tokenizer's ops)

    folder, output, dev = finetuned
    path = str(folder / "exported" / "topics" / "1")
    assert cli.main(["export", "--model-dir", output, "--output", path, "--threshold", "0.4"]) == 0
    served = tf.saved_model.load(path).signatures["serving_default"]
    texts, _ = read_table(dev)
    outputs = served(text=tf.constant(texts), text_pair=tf.constant([], tf.string))
    model = keras.models.load_model(os.path.join(output, "model.keras"))
    np.testing.assert_allclose(
        outputs["probabilities"].numpy(), model.predict_proba(texts), atol=1e-5
    )
    labels = [[n.decode() for n in row if n] for row in outputs["labels"].numpy()]
    assert labels == model.predict_labels(texts, threshold=0.4)
    metadata = json.load(open(os.path.join(path, "assets", "keras_bert_export.json")))
    assert metadata["multi_label"] is True and metadata["threshold"] == 0.4
