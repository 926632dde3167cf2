"""Casing detection: TF1 folder names against the original's own check, HuggingFace
tokenizer_config.json, the vocabulary, and the error when a given casing contradicts."""

import json

import pytest
from official.nlp.tools import tokenization

from keras_bert.checkpoints.casing import (
    Casing,
    casing_from_tf1_name,
    casing_from_tokenizer_config,
    casing_from_vocabulary,
    choose_lowercase,
)

# Every name the original's check lists, later releases of the same form, and others.
TF1_NAMES = [
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
    "wwm_uncased_L-24_H-1024_A-16",
    "wwm_cased_L-24_H-1024_A-16",
    "uncased_L-4_H-256_A-4",
    "uncased_L-2_H-128_A-2",
    "cased_L-6_H-512_A-8",
    "export",
    "my-bert",
    "uncased_model",
    "bert_cased",
]
# What the names the original does not list hold, from Google's release notes.
LATER_RELEASES = {
    "wwm_uncased_L-24_H-1024_A-16": True,
    "wwm_cased_L-24_H-1024_A-16": False,
    "uncased_L-4_H-256_A-4": True,
    "uncased_L-2_H-128_A-2": True,
    "cased_L-6_H-512_A-8": False,
}


def original_decision(checkpoint):
    """lowercase as google-research/bert's validate_case_matches_checkpoint
    decides it: the value it does not reject, None if it rejects neither."""
    rejects = []
    for do_lower_case in (True, False):
        try:
            tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
        except ValueError:
            rejects.append(do_lower_case)
    assert len(rejects) < 2
    return None if not rejects else not rejects[0]


@pytest.mark.parametrize("name", TF1_NAMES)
@pytest.mark.parametrize(
    "form",
    [
        "/data/models/{}/bert_model.ckpt",
        "{}/bert_model.ckpt",
        "gs://bucket/{}/bert_model.ckpt-1000000",
    ],
)
def test_tf1_folder_names_decide_as_the_original(name, form):
    checkpoint = form.format(name)
    original = original_decision(checkpoint)
    ours = casing_from_tf1_name(checkpoint)
    if original is not None:
        assert ours == Casing(original, f"TF1 folder name {name}")
    elif name in LATER_RELEASES:
        assert ours == Casing(LATER_RELEASES[name], f"TF1 folder name {name}")
    else:
        assert ours is None


def test_only_the_folder_holding_bert_model_ckpt_counts():
    for checkpoint in (
        "uncased_L-12_H-768_A-12/model.ckpt",
        "cased_L-12_H-768_A-12",
        "/x/cased_L-12_H-768_A-12/sub/bert_model.ckpt",
    ):
        assert casing_from_tf1_name(checkpoint) is None, checkpoint
        assert original_decision(checkpoint) is None


def test_huggingface_tokenizer_config(tmp_path, minilm_path):
    assert casing_from_tokenizer_config(f"{minilm_path}/tokenizer_config.json") == Casing(
        True, "tokenizer_config.json do_lower_case true"
    )
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({"do_lower_case": False, "model_max_length": 512}))
    assert casing_from_tokenizer_config(str(path)) == Casing(
        False, "tokenizer_config.json do_lower_case false"
    )
    path.write_text(json.dumps({"model_max_length": 512}))  # no setting: the vocabulary decides
    assert casing_from_tokenizer_config(str(path)) is None
    assert casing_from_tokenizer_config(str(tmp_path / "absent.json")) is None
    path.write_text(json.dumps({"do_lower_case": "yes"}))
    with pytest.raises(
        ValueError, match="tokenizer_config.json: do_lower_case must be true or false, got 'yes'"
    ):
        casing_from_tokenizer_config(str(path))
    path.write_text('{"do_lower_case": tr')
    with pytest.raises(ValueError, match="tokenizer_config.json: not valid JSON"):
        casing_from_tokenizer_config(str(path))


def write_vocab(path, entries):
    path.write_text("".join(f"{entry}\n" for entry in entries), encoding="utf-8")
    return str(path)


def test_vocabulary_decides_last(tmp_path, real_vocab_file):
    # The real uncased vocabulary: its only capitals are in [CLS], [unused0] and the like.
    assert casing_from_vocabulary(real_vocab_file) == Casing(
        True, "vocabulary vocab.txt has no upper-case entries"
    )
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
    assert (
        casing_from_vocabulary(
            write_vocab(tmp_path / "a.txt", specials + ["the", "##s", "é"])
        ).lowercase
        is True
    )
    # A cased vocabulary: the words the original's cased BasicTokenizer splits off.
    words = tokenization.BasicTokenizer(do_lower_case=False).tokenize(
        "Emma Woodhouse, handsome, clever, and rich"
    )
    casing = casing_from_vocabulary(write_vocab(tmp_path / "cased.txt", specials + words))
    assert casing == Casing(
        False, "vocabulary cased.txt has 2 upper-case entries ('Emma', 'Woodhouse' ...)"
    )
    # One capital anywhere is enough, a word piece or a non-Latin letter alike.
    for entry in ("##Q", "Δ", "ǅ"):
        assert (
            casing_from_vocabulary(write_vocab(tmp_path / "b.txt", specials + [entry])).lowercase
            is False
        ), entry
    with pytest.raises(FileNotFoundError, match="vocabulary not found: .*missing.txt"):
        casing_from_vocabulary(str(tmp_path / "missing.txt"))


def test_a_given_casing_must_agree():
    uncased = Casing(True, "TF1 folder name uncased_L-12_H-768_A-12")
    assert choose_lowercase(None, uncased, "ckpt") is True
    assert choose_lowercase(True, uncased, "ckpt") is True
    with pytest.raises(ValueError) as error:
        choose_lowercase(False, uncased, "models/uncased_L-12_H-768_A-12")
    assert str(error.value).startswith(
        "lowercase=False (cased) contradicts models/uncased_L-12_H-768_A-12, which is uncased "
        "(lowercase=True: TF1 folder name uncased_L-12_H-768_A-12)"
    )
    cased = Casing(False, "tokenizer_config.json do_lower_case false")
    with pytest.raises(
        ValueError,
        match=r"lowercase=True \(uncased\) contradicts hf, which is "
        r"cased \(lowercase=False: tokenizer_config.json "
        r"do_lower_case false\)",
    ):
        choose_lowercase(True, cased, "hf")
