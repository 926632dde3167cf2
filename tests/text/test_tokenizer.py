"""BertTokenizer: where it runs, offsets, detokenize, special ids, packing,
errors, the `keras-bert tokenize` command and the ops a SavedModel of it needs.

Expected ids come from the original Python tokenizer (tf-models-official's copy
of google-research/bert `tokenization.py`); id-for-id parity on large inputs is
in test_tokenizer_parity.py.
"""

import io
import os
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from official.nlp.tools import tokenization

from keras_bert import cli
from keras_bert.export.serving_ops import (
    SERVING_TEXT_OPS,
    custom_ops_in_saved_model,
    ops_serving_lacks,
)
from keras_bert.text.tokenizer import BertTokenizer, truncated_pair_lengths

TEXTS = [
    "Emma Woodhouse, handsome, clever, and rich.",
    "naïve café — Zoë's résumé!",
    "",
    "İSTANBUL ΟΔΟΣ 東京タワー a\x00b\u200bc",
    "unaffable 🍕 x²",
]


@pytest.fixture(scope="module")
def tokenizer(real_vocab_file):
    return BertTokenizer(real_vocab_file)


@pytest.fixture(scope="module")
def original(real_vocab_file):
    reference = tokenization.FullTokenizer(real_vocab_file, do_lower_case=True)
    reference.wordpiece_tokenizer.max_input_chars_per_word = 200
    return reference


def reference_ids(original, text):
    return original.convert_tokens_to_ids(original.tokenize(text))


def real_lines(datasets_dir, count):
    """Real sentences with non-ASCII characters first (they exercise offset mapping)."""
    lines = []
    for name in ("rotten_tomatoes/dev.tsv", "bbc_news/dev.tsv"):
        with open(os.path.join(datasets_dir, name), encoding="utf-8") as f:
            next(f)
            for line in f:
                lines.extend(line.rstrip("\n").split("\t")[1:])
    with open(os.path.join(datasets_dir, "wnut16", "dev.conll"), encoding="utf-8") as f:
        tweets = f.read().split("\n\n")
    lines += [" ".join(row.split("\t")[0] for row in t.split("\n") if row) for t in tweets]
    lines.sort(key=lambda line: line.isascii())
    return lines[:count]


# === Special ids, vocabulary ===


def test_special_ids_match_the_vocabulary(tokenizer, original):
    for name, token in [
        ("pad_id", "[PAD]"),
        ("unk_id", "[UNK]"),
        ("cls_id", "[CLS]"),
        ("sep_id", "[SEP]"),
        ("mask_id", "[MASK]"),
    ]:
        assert getattr(tokenizer, name) == original.vocab[token]
    assert (
        tokenizer.pad_id,
        tokenizer.unk_id,
        tokenizer.cls_id,
        tokenizer.sep_id,
        tokenizer.mask_id,
    ) == (0, 100, 101, 102, 103)
    assert tokenizer.vocab_size == len(original.vocab) == 30522
    assert tokenizer.id_to_token([101, 7592]).numpy().tolist() == [b"[CLS]", b"hello"]


# === Where it runs ===


def test_eager_tf_function_and_tf_data_agree_with_the_original(tokenizer, original):
    expected = [reference_ids(original, t) for t in TEXTS]
    assert tokenizer.tokenize(TEXTS).to_list() == expected
    assert tf.function(tokenizer.tokenize)(tf.constant(TEXTS)).to_list() == expected
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS).batch(2).map(tokenizer.tokenize)
    assert [ids for batch in dataset for ids in batch.to_list()] == expected
    # A scalar string gives one row.
    assert tokenizer.tokenize(TEXTS[0]).numpy().tolist() == expected[0]
    ids, starts, _ = tokenizer.tokenize_with_offsets(TEXTS[1])
    assert ids.numpy().tolist() == expected[1] and starts.shape.rank == 1
    words, _, _ = tokenizer.tokenize_words_with_offsets(TEXTS[1])
    assert words.merge_dims(0, 1).numpy().tolist() == expected[1]


def test_saved_model_with_the_tokenizer_reloads_and_uses_only_serving_ops(
    tokenizer, original, tmp_path
):
    class Preprocess(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(
            input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.string)]
        )
        def serve(self, text_a, text_b):
            features = self.tokenizer.pack(text_a, text_b, seq_length=16)
            ids, starts, ends = self.tokenizer.tokenize_with_offsets(text_a)
            features["starts"] = starts.to_tensor(-1)
            features["ends"] = ends.to_tensor(-1)
            features["detokenized"] = self.tokenizer.detokenize(ids)
            return features

    module = Preprocess(tokenizer)
    path = str(tmp_path / "preprocess")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    reloaded = tf.saved_model.load(path).signatures["serving_default"]
    got = reloaded(text_a=tf.constant(TEXTS), text_b=tf.constant(TEXTS[::-1]))
    # The same as the tokenizer in this process, eagerly.
    want = tokenizer.pack(TEXTS, TEXTS[::-1], seq_length=16)
    ids, starts, ends = tokenizer.tokenize_with_offsets(TEXTS)
    want.update(
        starts=starts.to_tensor(-1), ends=ends.to_tensor(-1), detokenized=tokenizer.detokenize(ids)
    )
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name].numpy(), want[name].numpy())
    # [CLS] A [SEP] B [SEP] from the original's ids (both fit in 16 here or are trimmed).
    first = (
        [101]
        + reference_ids(original, TEXTS[0])[:7]
        + [102]
        + reference_ids(original, TEXTS[-1])[:6]
        + [102]
    )
    assert got["input_ids"].numpy()[0].tolist() == first

    custom = custom_ops_in_saved_model(path)
    assert custom <= SERVING_TEXT_OPS, custom - SERVING_TEXT_OPS
    assert {"FastWordpieceTokenizeWithOffsets", "TFText>FastWordpieceDetokenize"} <= custom
    assert ops_serving_lacks(path) == []


def test_the_op_check_flags_ops_newer_than_serving(tmp_path):
    class Trim(tf.Module):
        @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)])
        def trim(self, ids):
            return tf_text.RoundRobinTrimmer(4).trim([ids, ids])[0].to_tensor()

    module = Trim()
    path = str(tmp_path / "trim")
    tf.saved_model.save(module, path, signatures={"serving_default": module.trim})
    assert "TFText>RoundRobinTrim" in custom_ops_in_saved_model(path)
    assert ops_serving_lacks(path) == ["TFText>RoundRobinTrim"]


# === Offsets ===


def normalizer(original, lowercase=True):
    """What a span of text becomes after the original's normalisation."""
    basic = original.basic_tokenizer

    def normalize(span):
        span = basic._clean_text(span)
        return basic._run_strip_accents(span.lower()) if lowercase else span

    return normalize


def check_offsets(tokenizer, original, texts, lowercase=True):
    ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
    normalize = normalizer(original, lowercase)
    checked = 0
    for text, row_ids, row_starts, row_ends in zip(
        texts, ids.to_list(), starts.to_list(), ends.to_list()
    ):
        raw = text.encode("utf-8")
        for piece_id, start, end in zip(row_ids, row_starts, row_ends):
            assert 0 <= start < end <= len(raw), (text, start, end)
            if piece_id == tokenizer.unk_id:
                continue
            piece = tokenizer.vocab[piece_id]
            surface = raw[start:end].decode("utf-8")
            assert normalize(surface) == piece.removeprefix("##"), (text, piece, surface)
            checked += 1
    return checked


def test_offsets_map_back_to_the_surface_text_of_real_text(tokenizer, original, datasets_dir):
    lines = real_lines(datasets_dir, 400)
    assert sum(not line.isascii() for line in lines) > 100
    assert check_offsets(tokenizer, original, lines) > 10000


def test_offsets_of_hard_strings(tokenizer, original):
    texts = [
        "naïve café",
        "a\x00b\u200bc  \u2028 d",
        "İstanbul",
        "ΑΣ.Β",
        "e\u0301e\u0301",
        "ﬁne ½ x² Ⅻ",
        "\ufeffBOM",
        "xÿþy",
        "Straße ǅ",
    ]
    check_offsets(tokenizer, original, texts)
    ids, starts, ends = tokenizer.tokenize_with_offsets(["naïve café", "a\x00b\u200bc d"])
    assert ids.to_list() == [reference_ids(original, "naïve café"), [5925, 1040]]
    # "naïve" is bytes 0-6 (ï takes two), "café" bytes 7-12; "a\x00b\u200bc" bytes 0-7.
    assert starts.to_list() == [[0, 7], [0, 8]]
    assert ends.to_list() == [[6, 12], [7, 9]]


def test_cased_offsets(tmp_path, original):
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "Ca",
        "##fé",
        "N",
        "##aï",
        "##ve",
        "!",
        "İ",
        "##stanbul",
    ]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    cased = BertTokenizer(str(path), lowercase=False)
    texts = ["Café Naïve!", "İstanbul x", "Ca\u200bfé"]
    reference = tokenization.FullTokenizer(str(path), do_lower_case=False)
    assert cased.tokenize(texts).to_list() == [reference_ids(reference, t) for t in texts]
    # Ca ##fé N ##aï ##ve ! / İ ##stanbul [UNK] / Ca ##fé: 10 pieces to check.
    assert check_offsets(cased, reference, texts, lowercase=False) == 10


def test_words_group_the_pieces_of_each_original_word(tokenizer, original):
    ids, starts, ends = tokenizer.tokenize_words_with_offsets(TEXTS)
    assert ids.ragged_rank == 2 and starts.ragged_rank == 2
    for text, words in zip(TEXTS, ids.to_list()):
        expected = [
            original.convert_tokens_to_ids(original.wordpiece_tokenizer.tokenize(w))
            for w in original.basic_tokenizer.tokenize(text)
        ]
        assert words == expected
    flat, flat_starts, _ = tokenizer.tokenize_with_offsets(TEXTS)
    assert starts.merge_dims(1, 2).to_list() == flat_starts.to_list()


def test_split_words_are_the_original_basic_tokens(tokenizer, original):
    words, starts, ends = tokenizer.split_words_with_offsets(TEXTS)
    for text, row, row_starts, row_ends in zip(
        TEXTS, words.to_list(), starts.to_list(), ends.to_list()
    ):
        assert [w.decode("utf-8") for w in row] == original.basic_tokenizer.tokenize(text)
        raw = text.encode("utf-8")
        for word, start, end in zip(row, row_starts, row_ends):
            surface = raw[start:end].decode("utf-8")
            basic = original.basic_tokenizer
            assert basic._run_strip_accents(basic._clean_text(surface).lower()) == word.decode(
                "utf-8"
            )


# === Detokenize ===


def test_detokenize_joins_pieces_into_the_original_words(tokenizer, original, datasets_dir):
    lines = real_lines(datasets_dir, 200)
    ids = tokenizer.tokenize(lines)
    text = tokenizer.detokenize(ids).numpy()
    compared = 0
    for line, row, detokenized in zip(lines, ids.to_list(), text):
        if tokenizer.unk_id in row:
            continue
        assert detokenized.decode("utf-8") == " ".join(original.basic_tokenizer.tokenize(line))
        compared += 1
    assert compared > 150


# === Packing ===


def original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """google-research/bert run_classifier.py `_truncate_seq_pair`, verbatim."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def original_features(ids_a, ids_b, seq_length, cls_id=101, sep_id=102):
    """run_classifier.py `convert_single_example`, on ids."""
    ids_a, ids_b = list(ids_a), list(ids_b) if ids_b is not None else None
    if ids_b is not None:
        original_truncate_seq_pair(ids_a, ids_b, seq_length - 3)
    else:
        ids_a = ids_a[: seq_length - 2]
    input_ids = [cls_id] + ids_a + [sep_id]
    segment_ids = [0] * len(input_ids)
    if ids_b is not None:
        input_ids += ids_b + [sep_id]
        segment_ids += [1] * (len(ids_b) + 1)
    input_mask = [1] * len(input_ids)
    pad = seq_length - len(input_ids)
    return input_ids + [0] * pad, input_mask + [0] * pad, segment_ids + [0] * pad


def test_truncation_matches_the_original_loop_on_random_lengths():
    rng = random.Random(0)
    cases = [
        (rng.randrange(0, 40), rng.randrange(0, 40), rng.randrange(1, 50)) for _ in range(2000)
    ]
    cases += [(a, b, n) for a in range(8) for b in range(8) for n in range(1, 12)]
    length_a, length_b, budget = (np.array(column) for column in zip(*cases))
    keep_a, keep_b = truncated_pair_lengths(length_a, length_b, budget)
    for (a, b, n), got_a, got_b in zip(cases, keep_a.numpy(), keep_b.numpy()):
        tokens_a, tokens_b = list(range(a)), list(range(b))
        original_truncate_seq_pair(tokens_a, tokens_b, n)
        assert (got_a, got_b) == (len(tokens_a), len(tokens_b)), (a, b, n)


@pytest.mark.parametrize("seq_length", [8, 16, 64])
def test_pack_matches_the_original_features(tokenizer, original, seq_length, datasets_dir):
    lines = real_lines(datasets_dir, 40)
    rng = random.Random(seq_length)
    firsts = [rng.choice(lines)[: rng.randrange(0, 200)] for _ in range(30)]
    seconds = [rng.choice(lines)[: rng.randrange(0, 200)] for _ in range(30)]
    single = tokenizer.pack(tf.constant(firsts), seq_length=seq_length)
    pair = tokenizer.pack(tf.constant(firsts), tf.constant(seconds), seq_length=seq_length)
    from_ids = tokenizer.pack(
        tokenizer.tokenize(firsts), tokenizer.tokenize(seconds), seq_length=seq_length
    )
    for features, b_texts in ((single, None), (pair, seconds), (from_ids, seconds)):
        for name in ("input_ids", "input_mask", "segment_ids"):
            assert features[name].dtype == tf.int32
            assert features[name].shape[1] == seq_length
        for i, text_a in enumerate(firsts):
            ids_b = reference_ids(original, b_texts[i]) if b_texts else None
            expected = original_features(reference_ids(original, text_a), ids_b, seq_length)
            got = tuple(
                features[name][i].numpy().tolist()
                for name in ("input_ids", "input_mask", "segment_ids")
            )
            assert got == expected


# === Errors ===


def write_vocab(tmp_path, content, mode="w"):
    path = tmp_path / "vocab.txt"
    if mode == "wb":
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def test_missing_vocab_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="vocabulary file not found: .*nowhere.txt"):
        BertTokenizer(str(tmp_path / "nowhere.txt"))


def test_empty_vocab(tmp_path):
    with pytest.raises(ValueError, match="vocabulary file is empty"):
        BertTokenizer(write_vocab(tmp_path, ""))


def test_vocab_lacking_special_tokens(tmp_path):
    path = write_vocab(tmp_path, "[PAD]\n[UNK]\nthe\n##s\n")
    with pytest.raises(
        ValueError,
        match=r"lacks the special token\(s\) \['\[CLS\]', '\[SEP\]', "
        r"'\[MASK\]'\]",
    ):
        BertTokenizer(path)


def test_non_utf8_vocab(tmp_path):
    path = write_vocab(tmp_path, "[PAD]\n[UNK]\n[CLS]\ncaf\xe9\n".encode("latin-1"), "wb")
    with pytest.raises(ValueError, match="vocab.txt, line 4: not valid UTF-8"):
        BertTokenizer(path)


def test_repeated_token(tmp_path):
    path = write_vocab(tmp_path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nof\nthe\n")
    with pytest.raises(ValueError, match="line 8: token 'the' repeats line 6"):
        BertTokenizer(path)


# === Command line ===


def test_cli_tokenize_reads_stdin(real_vocab_file, original, monkeypatch, capsys):
    lines = ["Hello, world!", "naïve café 🍕", ""]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert cli.main(["tokenize", "--vocab-file", real_vocab_file]) == 0
    printed = capsys.readouterr().out.split("\n")
    assert printed[:3] == [" ".join(original.tokenize(line)) for line in lines]

    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert cli.main(["tokenize", "--vocab-file", real_vocab_file, "--ids"]) == 0
    printed = capsys.readouterr().out.split("\n")
    assert printed[:3] == [" ".join(map(str, reference_ids(original, line))) for line in lines]


def test_cli_tokenize_missing_vocab(tmp_path, capsys):
    assert cli.main(["tokenize", "--vocab-file", str(tmp_path / "nope.txt")]) == 2
    assert "vocabulary file not found" in capsys.readouterr().err


def test_shipped_unicode_table_is_this_pythons_database():
    # The table saves each tokenizing process a second; it must be exactly
    # what the database gives (regenerate with tokenizer.write_unicode_classes()).
    import json
    import unicodedata

    from keras_bert.text import tokenizer as tokenizer_module

    with open(tokenizer_module.UNICODE_CLASSES_FILE, encoding="utf-8") as f:
        shipped = json.load(f)
    assert shipped["unidata_version"] == unicodedata.unidata_version, (
        "Python's Unicode version changed: run keras_bert.text.tokenizer.write_unicode_classes()"
    )
    computed = tokenizer_module.compute_unicode_classes()
    assert {name: [list(r) for r in ranges] for name, ranges in computed.items()} == shipped[
        "classes"
    ]


def test_a_table_for_another_unicode_version_is_ignored(tmp_path, monkeypatch):
    import json

    from keras_bert.text import tokenizer as tokenizer_module

    stale = tmp_path / "unicode_classes.json"
    stale.write_text(json.dumps({"unidata_version": "1.0.0", "classes": {"deleted": [[65, 65]]}}))
    monkeypatch.setattr(tokenizer_module, "UNICODE_CLASSES_FILE", str(stale))
    tokenizer_module._unicode_classes.cache_clear()
    try:
        classes = tokenizer_module._unicode_classes()
    finally:
        tokenizer_module._unicode_classes.cache_clear()
    assert (65, 65) not in classes["deleted"] and (0, 8) in classes["deleted"]


def test_removing_code_points_from_ranges():
    from keras_bert.text.tokenizer import _ranges_without

    ranges = ((1, 5), (8, 8), (10, 12))
    assert _ranges_without(ranges, {1, 3, 8, 12, 20}) == ((2, 2), (4, 5), (10, 11))
    assert _ranges_without(ranges, set()) == ranges
