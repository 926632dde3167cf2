"""`keras-bert predict` with a tagger (`--task tag`, named entities) keeps every
word of a line with a NUL or other control characters (the words
after a NUL were dropped), with offsets into the line as read."""

import json
import os

from tiny_outputs import CONFIG

from keras_bert import BertEncoder, cli
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor

from conftest import TINY_VOCAB

TAGS = ["O", "B-PER", "I-PER"]


def tiny_tagger_output(folder):
    folder = str(folder)
    vocab = os.path.join(folder, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(TINY_VOCAB) + "\n")
    model = BertTokenClassifier(
        BertEncoder(CONFIG),
        len(TAGS),
        label_names=TAGS,
        preprocessor=BertPreprocessor(vocab, seq_length=16),
    )
    model.save(os.path.join(folder, "model.keras"))
    with open(os.path.join(folder, "finetune_config.json"), "w", encoding="utf-8") as f:
        json.dump({"task": "tag", "label_names": TAGS, "seq_length": 16}, f)
    return folder


def test_predict_keeps_the_words_after_a_nul(tmp_path):
    model_dir = tiny_tagger_output(tmp_path)
    lines = ["the\x00 quick fox", "a\x0bbrown \x1c dog\x00"]
    (tmp_path / "texts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert (
        cli.main(
            [
                "predict",
                "--model-dir",
                model_dir,
                "--input",
                str(tmp_path / "texts.txt"),
                "--output",
                str(tmp_path / "answers.jsonl"),
            ]
        )
        == 0
    )
    answers = [json.loads(line) for line in open(tmp_path / "answers.jsonl", encoding="utf-8")]
    assert [a["tokens"] for a in answers] == [["the", "quick", "fox"], ["a\x0bbrown", "dog"]]
    assert [len(a["tags"]) for a in answers] == [3, 2]
