"""`keras-bert predict` with a tagger (`--task tag`, named entities) keeps every
word of a line with a NUL or other control characters (the words
after a NUL were dropped), with offsets into the line as read."""

import json

from tiny_outputs import CONFIG, tiny_output

from keras_bert import BertEncoder
from keras_bert.models.token_classifier import BertTokenClassifier

from harness import run_predict

TAGS = ["O", "B-PER", "I-PER"]


def tiny_tagger_output(folder):
    return tiny_output(
        folder,
        lambda pre: BertTokenClassifier(
            BertEncoder(CONFIG), len(TAGS), label_names=TAGS, preprocessor=pre
        ),
        {"task": "tag", "label_names": TAGS},
    )


def test_predict_keeps_the_words_after_a_nul(tmp_path):
    model_dir = tiny_tagger_output(tmp_path)
    lines = ["the\x00 quick fox", "a\x0bbrown \x1c dog\x00"]
    (tmp_path / "texts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run_predict(model_dir, tmp_path / "texts.txt", tmp_path / "answers.jsonl") == 0
    answers = [json.loads(line) for line in open(tmp_path / "answers.jsonl", encoding="utf-8")]
    assert [a["tokens"] for a in answers] == [["the", "quick", "fox"], ["a\x0bbrown", "dog"]]
    assert [len(a["tags"]) for a in answers] == [3, 2]
