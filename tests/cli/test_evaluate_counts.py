"""`keras-bert evaluate` scores the whole file it is given unless told
otherwise (`--max-examples N`), and says how many examples it scored, of
how many, in a line and in its JSON. It used to reuse the fine-tuning run's
`max_dev_examples` and score a part of the file without a word."""

import json
import os

import keras
import pytest
from tiny_outputs import tiny_classifier_output

from keras_bert import cli

from harness import command_process

ROWS = 10


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finetune output whose run scored 4 dev rows, and a dev file of 10."""
    folder = tmp_path_factory.mktemp("evaluate_counts")
    model_dir = tiny_classifier_output(folder)
    config_path = os.path.join(model_dir, "finetune_config.json")
    with open(config_path) as f:
        saved = json.load(f)
    with open(config_path, "w") as f:
        json.dump({**saved, "max_dev_examples": 4}, f)
    texts = [f"the quick brown fox {'jumps ' * i}" for i in range(ROWS)]
    labels = ["neg", "pos"] * (ROWS // 2)
    data = folder / "dev.tsv"
    data.write_text("label\tsentence\n" + "".join(f"{y}\t{x}\n" for x, y in zip(texts, labels)))
    return model_dir, str(data), texts, labels


def evaluate(capsys, *argv):
    """`keras-bert evaluate ARGV` in this process -> (its JSON, its standard
    error): the JSON alone on standard output, for a pipe."""
    capsys.readouterr()
    assert cli.main(["evaluate", *map(str, argv)]) == 0
    printed = capsys.readouterr()
    return json.loads(printed.out), printed.err


@pytest.mark.slow
def test_evaluate_scores_the_whole_file_and_says_so(run):
    """As a user runs it: the command in its own process."""
    model_dir, data, texts, labels = run
    result = command_process(
        "evaluate --model-dir {model_dir} --data {data}", model_dir=model_dir, data=data
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert (figures["examples_scored"], figures["examples_in_data"]) == (ROWS, ROWS)
    assert f"scoring all {ROWS} examples of {data}" in result.stderr
    model = keras.models.load_model(os.path.join(model_dir, "model.keras"))
    assert figures["accuracy"] == model.score(texts, labels)["accuracy"]


def test_evaluate_ignores_the_runs_dev_limit(run, capsys):
    model_dir, data, texts, labels = run
    figures, printed = evaluate(capsys, "--model-dir", model_dir, "--data", data)
    assert (figures["examples_scored"], figures["examples_in_data"]) == (ROWS, ROWS)
    assert f"scoring all {ROWS} examples of {data}" in printed
    model = keras.models.load_model(os.path.join(model_dir, "model.keras"))
    assert figures["accuracy"] == model.score(texts, labels)["accuracy"]


def test_max_examples_scores_the_first_rows_and_says_of_how_many(run, capsys):
    model_dir, data, texts, labels = run
    figures, printed = evaluate(
        capsys, "--model-dir", model_dir, "--data", data, "--max-examples", 3
    )
    assert (figures["examples_scored"], figures["examples_in_data"]) == (3, ROWS)
    assert f"scoring the first 3 of {ROWS} examples of {data} (max_examples 3)" in printed
    model = keras.models.load_model(os.path.join(model_dir, "model.keras"))
    assert figures["accuracy"] == model.score(texts[:3], labels[:3])["accuracy"]
    # More than the file holds: all of it.
    figures, _ = evaluate(capsys, "--model-dir", model_dir, "--data", data, "--max-examples", 99)
    assert (figures["examples_scored"], figures["examples_in_data"]) == (ROWS, ROWS)


def test_the_library_refuses_the_runs_option_name(run):
    from keras_bert.training.finetuning import evaluate as evaluate_folder

    model_dir, data, _, _ = run
    with pytest.raises(ValueError, match="max_examples=N scores its first N"):
        evaluate_folder(model_dir, data, max_dev_examples=3)
