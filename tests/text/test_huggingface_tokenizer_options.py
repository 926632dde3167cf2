"""HuggingFace's tokenizer_config.json settings beyond do_lower_case:
strip_accents and special tokens written in the text are implemented, the rest
refused naming the file and the field.

The oracle is HuggingFace's `BasicTokenizer.tokenize` / `BertTokenizer.tokenize`
(transformers is not installed here), composed as HuggingFace composes it from
the original tokenizer's own steps, taken from Model Garden's copy
(`official.nlp.tools.tokenization`): the text is cut at the special tokens
(longest match first, exactly as written), each between-part is cleaned, CJK
ideographs spaced, split on whitespace; each word is lowercased if
do_lower_case and its accents stripped if `strip_accents` (None: as
do_lower_case), then split on punctuation and WordPiece'd. Input is NFC, where
the slow tokenizer's NFC step changes nothing (BertTokenizerFast has none).
"""

import json
import os
import re

import pytest
import tensorflow as tf
from official.nlp.tools import tokenization

from keras_bert import BertPreprocessor, BertTokenizer, checkpoints, cli
from keras_bert.checkpoints.tokenizer_config import read_tokenizer_options

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[", "]", "<", ">", "/",
    "cls", "mask", "sep", "<e>", "e", "café", "cafe", "Café", "Cafe", "naïve",
    "naive", "Naïve", "##s", "the", "The", "is", ".", "中", "国", "a", "x",
]  # fmt: skip
SPECIAL = ("[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]")
TEXTS = [
    "[CLS] The Café is naïve. [SEP]",
    "the[MASK]cafés[SEP]",
    "Naïve [mask] [ MASK ] <e>x </e>",
    "a\x00[MASK]\x00 café 中国",
    "[CLS][CLS] [UNK]",
    "",
    "plain ascii text.",
]


def huggingface_ids(text, do_lower_case, strip_accents, special_tokens=SPECIAL):
    """HuggingFace's BertTokenizer ids, from the original's steps (module docstring)."""
    vocab = {token: i for i, token in enumerate(VOCAB)}
    basic = tokenization.BasicTokenizer(do_lower_case=False)
    wordpiece = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=100)
    ordered = sorted(special_tokens, key=len, reverse=True)
    parts = re.split("(" + "|".join(map(re.escape, ordered)) + ")", text) if ordered else [text]
    ids = []
    for part in parts:
        if part in special_tokens:
            ids.append(vocab[part])
            continue
        part = basic._tokenize_chinese_chars(basic._clean_text(part))
        for word in tokenization.whitespace_tokenize(part):
            if do_lower_case:
                word = word.lower()
                if strip_accents is not False:
                    word = basic._run_strip_accents(word)
            elif strip_accents:
                word = basic._run_strip_accents(word)
            for piece in basic._run_split_on_punc(word):
                ids += [vocab[p] for p in wordpiece.tokenize(piece)]
    return ids


def test_the_oracle_is_the_original_without_the_new_settings():
    original = {True: [], False: []}
    for lowercase in original:
        basic = tokenization.BasicTokenizer(do_lower_case=lowercase)
        vocab = {token: i for i, token in enumerate(VOCAB)}
        wordpiece = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=100)
        for text in TEXTS:
            pieces = [p for w in basic.tokenize(text) for p in wordpiece.tokenize(w)]
            assert huggingface_ids(text, lowercase, None, ()) == [vocab[p] for p in pieces]


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("strip_accents", [None, False, True])
@pytest.mark.parametrize("special_tokens", [(), SPECIAL + ("<e>",)], ids=["original", "hf"])
def test_ids_are_huggingfaces_for_each_setting(lowercase, strip_accents, special_tokens):
    tokenizer = BertTokenizer(
        VOCAB, lowercase=lowercase, strip_accents=strip_accents, special_tokens=special_tokens
    )
    expected = [huggingface_ids(t, lowercase, strip_accents, special_tokens) for t in TEXTS]
    assert tokenizer.tokenize(TEXTS).to_list() == expected
    # Offsets: each piece's span in the input.
    ids, starts, ends = tokenizer.tokenize_with_offsets(TEXTS)
    assert ids.to_list() == expected
    for text, row, first, last in zip(TEXTS, ids.to_list(), starts.to_list(), ends.to_list()):
        for token_id, start, end in zip(row, first, last):
            if VOCAB[token_id] in special_tokens and VOCAB[token_id] != "[UNK]":
                assert text.encode()[start:end].decode() == VOCAB[token_id]


def test_special_tokens_work_inside_a_saved_model(tmp_path):
    tokenizer = BertTokenizer(VOCAB, special_tokens=SPECIAL)
    module = tf.Module()
    module.tokenizer = tokenizer
    module.ids = tf.function(
        lambda text: tokenizer.tokenize(text).to_tensor(-1),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    served = loaded.ids(tf.constant(TEXTS[:2])).numpy().tolist()
    assert [[i for i in row if i >= 0] for row in served] == [
        huggingface_ids(t, True, None) for t in TEXTS[:2]
    ]


def _folder(tmp_path, minilm_path, settings, name="hf"):
    """MiniLM's files with a tokenizer_config.json of `settings`."""
    folder = tmp_path / name
    os.makedirs(folder)
    for file in os.listdir(minilm_path):
        if file != "tokenizer_config.json" and os.path.isfile(os.path.join(minilm_path, file)):
            os.symlink(os.path.join(minilm_path, file), folder / file)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    return str(folder)


def test_a_huggingface_folder_sets_the_preprocessor(tmp_path, minilm_path):
    folder = _folder(tmp_path, minilm_path, {"do_lower_case": True, "strip_accents": False})
    source = checkpoints.resolve(folder)
    assert source.tokenizer_options["strip_accents"] is False
    assert set(source.tokenizer_options["special_tokens"]) == set(SPECIAL)
    preprocessor = BertPreprocessor.from_pretrained(folder, seq_length=16)
    assert preprocessor.strip_accents is False and set(preprocessor.special_tokens) == set(SPECIAL)
    # Saved with the model's config, so a reloaded model tokenizes the same.
    again = BertPreprocessor.from_config(preprocessor.get_config())
    assert (again.strip_accents, again.special_tokens) == (False, preprocessor.special_tokens)
    # Without tokenizer_config.json: HuggingFace's defaults.
    os.remove(os.path.join(folder, "tokenizer_config.json"))
    options = read_tokenizer_options(folder)
    assert options["strip_accents"] is None and set(options["special_tokens"]) == set(SPECIAL)


def test_encode_prints_huggingfaces_pieces(tmp_path, minilm_path, capsys):
    # All of MiniLM's uncased vocabulary: its own ids for both settings.
    folder = _folder(tmp_path, minilm_path, {"do_lower_case": True, "strip_accents": False})
    text = "[CLS] Café naïve[MASK] résumé"
    assert cli.main(["encode", text, "--init-checkpoint", folder, "--seq-length", "16"]) in (
        0,
        None,
    )
    pieces = re.search(r"pieces: (.*)", capsys.readouterr().out).group(1).split()
    tokenizer = tokenization.FullTokenizer(os.path.join(minilm_path, "vocab.txt"), False)
    expected = ["[CLS]"]
    for word in ("café", "naïve"):
        expected += tokenizer.wordpiece_tokenizer.tokenize(word)
    expected += ["[MASK]"] + tokenizer.wordpiece_tokenizer.tokenize("résumé")
    assert pieces == expected


REFUSED = [
    ({"tokenize_chinese_chars": False}, "tokenize_chinese_chars False is not supported"),
    ({"do_basic_tokenize": False}, "do_basic_tokenize False is not supported"),
    ({"never_split": ["foo"]}, r"never_split \['foo'\] is not supported"),
    ({"cls_token": "<s>"}, "cls_token '<s>' is not supported: keras_bert's tokenizer uses"),
    (
        {"additional_special_tokens": [{"content": "<e>", "single_word": True}]},
        "additional_special_tokens '<e>' is not supported: single_word",
    ),
    ({"strip_accents": "yes"}, "strip_accents must be true, false or null"),
]


@pytest.mark.parametrize("settings, message", REFUSED, ids=[next(iter(s)) for s, _ in REFUSED])
def test_unsupported_settings_are_refused_naming_the_file_and_field(tmp_path, settings, message):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match=f"tokenizer_config.json: {message}"):
        read_tokenizer_options(str(tmp_path))


def test_accepted_defaults_and_special_tokens_are_silent(tmp_path):
    settings = {
        "do_lower_case": True,
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "never_split": ["[CLS]", "<e>"],
        "cls_token": {"content": "[CLS]", "lstrip": False, "single_word": False},
        "additional_special_tokens": ["<e>"],
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    options = read_tokenizer_options(str(tmp_path))
    assert options["strip_accents"] is None
    assert set(options["special_tokens"]) == {*SPECIAL, "<e>"}


def test_a_special_token_outside_the_vocabulary_is_named():
    with pytest.raises(ValueError, match=r"special token\(s\) \['<z>'\] are not in the vocabulary"):
        BertTokenizer(VOCAB, special_tokens=SPECIAL + ("<z>",))


def test_cli_names_the_refused_field(tmp_path, minilm_path, capsys):
    folder = _folder(tmp_path, minilm_path, {"tokenize_chinese_chars": False})
    try:
        code = cli.main(["encode", "hi", "--init-checkpoint", folder])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "tokenizer_config.json: tokenize_chinese_chars False is not supported" in err
