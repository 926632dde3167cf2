"""Each Keras script of recipes/keras/ runs end to end for one step on the
shipped data and the real MiniLM weights."""

import os

import pytest

from repo_paths import recipe_script


def script(name):
    return recipe_script("keras", name)


@pytest.mark.slow
def test_text_classification_script(tmp_path, capsys, minilm_path):
    output = str(tmp_path / "model.keras")
    script("text_classification").main(
        [
            "--checkpoint",
            minilm_path,
            "--max-train-examples",
            "16",
            "--max-dev-examples",
            "8",
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--steps-per-epoch",
            "1",
            "--output",
            output,
        ]
    )
    printed = capsys.readouterr().out
    assert "dev accuracy:" in printed and os.path.exists(output)


@pytest.mark.slow
def test_ner_script(capsys, minilm_path):
    script("ner").main(
        [
            "--checkpoint",
            minilm_path,
            "--max-train-examples",
            "16",
            "--max-dev-examples",
            "8",
            "--epochs",
            "1",
            "--steps-per-epoch",
            "1",
        ]
    )
    assert "dev entity F1:" in capsys.readouterr().out


@pytest.mark.slow
def test_squad_script(capsys, minilm_path):
    script("squad").main(["--checkpoint", minilm_path, "--epochs", "1", "--seq-length", "128"])
    assert "dev: {'exact_match'" in capsys.readouterr().out


@pytest.mark.slow
def test_long_documents_script(capsys, minilm_path, datasets_dir):
    dev = os.path.join(datasets_dir, "bbc_news", "dev.tsv")
    script("long_documents").main(
        [
            "--checkpoint",
            minilm_path,
            "--train",
            dev,
            "--max-train-examples",
            "8",
            "--max-dev-examples",
            "8",
            "--epochs",
            "1",
            "--steps-per-epoch",
            "1",
            "--batch-size",
            "8",
        ]
    )
    printed = capsys.readouterr().out
    assert "logits averaged:" in printed and "truncated to 128:" in printed


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "tag"])
def test_lora_script(task, capsys, minilm_path):
    script("lora").main(
        [
            "--task",
            task,
            "--checkpoint",
            minilm_path,
            "--max-train-examples",
            "16",
            "--max-dev-examples",
            "8",
            "--batch-size",
            "8",
            "--steps-per-epoch",
            "2",
        ]
    )
    printed = capsys.readouterr().out
    assert "| full | 5e-05 |" in printed and "| lora | 0.001 |" in printed


@pytest.mark.slow
def test_litert_script(tmp_path, capsys, minilm_path):
    import keras_bert

    model_file = str(tmp_path / "classifier.keras")
    keras_bert.BertClassifier.from_pretrained(
        minilm_path, num_classes=2, label_names=["fresh", "rotten"], seq_length=32
    ).save(model_file)
    script("litert").main(
        [
            "--model",
            model_file,
            "--max-dev-examples",
            "8",
            "--latency-examples",
            "2",
            "--output-dir",
            str(tmp_path / "out"),
        ]
    )
    printed = capsys.readouterr().out
    assert "| LiteRT float32 |" in printed and "| LiteRT int8 |" in printed
