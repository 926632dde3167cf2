"""`keras-bert predict` lines up with its input: every answer carries its
input line number, a blank line is answered as blank in its place, and the
input format comes from the extension or `--input-format`, never guessed per
line (a text line may begin with `{`)."""

import json
import os

import pytest
from tiny_outputs import tiny_classifier_output

from keras_bert import cli

from harness import run_predict


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_classifier_output(tmp_path_factory.mktemp("classifier"))


def predict(model_dir, inputs, output, *flags):
    code = cli.main(
        [
            "predict",
            "--model-dir",
            model_dir,
            "--input",
            str(inputs),
            "--output",
            str(output),
            "--batch-size",
            "2",
            *flags,
        ]
    )
    assert code == 0
    return [json.loads(line) for line in open(output, encoding="utf-8")]


def test_every_answer_carries_its_line_and_blank_lines_keep_their_place(model_dir, tmp_path):
    import keras

    texts = ["the quick fox", "", "{the lazy dog", "   ", "a brown fox jumps", "the dog"]
    inputs = tmp_path / "texts.txt"
    inputs.write_text("\n".join(texts) + "\n")
    answers = predict(model_dir, inputs, tmp_path / "answers.jsonl")
    assert [a["line"] for a in answers] == [1, 2, 3, 4, 5, 6]
    assert answers[1] == {"line": 2, "blank": True} and answers[3] == {"line": 4, "blank": True}
    # A text line beginning with `{` is a text in a text file.
    asked = [t for t in texts if t.strip()]
    model = keras.models.load_model(os.path.join(model_dir, "model.keras"))
    assert [a["label"] for a in answers if not a.get("blank")] == model.predict_labels(asked)


def test_json_lines_by_extension_and_the_input_on_request(model_dir, tmp_path):
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"text": "the fox"}\n\n{"text": "the dog", "text_pair": "a fox"}\n')
    answers = predict(model_dir, inputs, tmp_path / "answers.jsonl", "--include-input")
    assert [(a["line"], a.get("text"), a.get("text_pair")) for a in answers] == [
        (1, "the fox", None),
        (2, None, None),
        (3, "the dog", "a fox"),
    ]
    assert answers[1] == {"line": 2, "blank": True}
    assert all("label" in a for a in (answers[0], answers[2]))


def test_the_format_flag_overrides_the_extension(model_dir, tmp_path, capsys):
    lines = tmp_path / "texts.jsonl"  # plain texts, despite the name
    lines.write_text("{not json, a text\nthe fox\n")
    assert run_predict(model_dir, lines, tmp_path / "never.jsonl") == 2
    assert "texts.jsonl, line 1: not valid JSON" in capsys.readouterr().err
    answers = predict(model_dir, lines, tmp_path / "answers.jsonl", "--input-format", "text")
    assert [a["line"] for a in answers] == [1, 2]


def test_a_json_file_is_not_guessed_for_a_classifier(model_dir, tmp_path, capsys):
    inputs = tmp_path / "inputs.json"
    inputs.write_text('{"text": "the fox"}\n')
    assert run_predict(model_dir, inputs, tmp_path / "answers.jsonl") == 2
    assert (
        "inputs.json: a .json file is read as a SQuAD file, for question answering; give "
        "JSON Lines a .jsonl name or --input-format jsonl"
    ) in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "answers.jsonl")


def test_invalid_utf8_names_the_line_and_a_byte_order_mark_is_not_text(model_dir, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the fox\nthe \xff dog\n")
    assert run_predict(model_dir, bad, tmp_path / "never.jsonl") == 2
    assert "bad.txt, line 2: not valid UTF-8" in capsys.readouterr().err
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbfthe fox\n")
    answers = predict(model_dir, marked, tmp_path / "answers.jsonl", "--include-input")
    assert answers[0]["text"] == "the fox"
