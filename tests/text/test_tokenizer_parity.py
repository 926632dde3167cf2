"""Ids identical to the original BERT tokenizer (tf-models-official's copy of
google-research/bert `tokenization.py`), uncased and cased.

The reference is configured like ours: `max_input_chars_per_word` 200 as in
google-research/bert (Model Garden's copy defaults to 400; tested too). The
cased vocabulary is built from the reference's own BasicTokenizer output on
real text, never from our tokenizer.
"""

import collections
import glob
import json
import os
import unicodedata

import pytest
import tensorflow as tf
from official.nlp.tools import tokenization
from tokenizer_hard_cases import HARD_CASES

from keras_bert.assets import AUSTEN_DIR
from keras_bert.text import tokenizer as tokenizer_module
from keras_bert.text.tokenizer import BertTokenizer

# === References and helpers ===


def reference(vocab_file, lowercase, max_chars=200):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=lowercase)
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = max_chars
    return tokenizer


def reference_ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


_COMPILED = {}


def compiled(ours, method):
    """One traced tf.function per tokenizer and method (tracing takes seconds)."""
    key = (id(ours), method)
    if key not in _COMPILED:
        _COMPILED[key] = (
            ours,
            tf.function(getattr(ours, method), input_signature=[tf.TensorSpec([None], tf.string)]),
        )
    return _COMPILED[key][1]


def id_mismatches(ours, original, texts, batch_size=512):
    """[(text, reference ids, our ids)] wherever the two differ."""
    tokenize = compiled(ours, "tokenize")
    bad = []
    for i in range(0, len(texts), batch_size):
        chunk = texts[i : i + batch_size]
        encoded = [t if isinstance(t, bytes) else t.encode("utf-8") for t in chunk]
        for text, got in zip(chunk, tokenize(tf.constant(encoded)).to_list()):
            expected = reference_ids(original, text)
            if got != expected:
                bad.append((text, expected, got))
    return bad


def word_mismatches(ours, original, texts, batch_size=4096):
    """Our words (split_words_with_offsets) vs the reference BasicTokenizer's."""
    split = compiled(ours, "split_words_with_offsets")
    as_ours = placeholder_for_unassigned(ours)
    bad = []
    for i in range(0, len(texts), batch_size):
        chunk = texts[i : i + batch_size]
        words = split(tf.constant([t.encode("utf-8") for t in chunk]))[0].to_list()
        for text, got in zip(chunk, words):
            got = [w.decode("utf-8") for w in got]
            expected = [as_ours(w) for w in original.basic_tokenizer.tokenize(text)]
            if got != expected:
                bad.append((text, expected, got))
    return bad


def placeholder_for_unassigned(ours):
    """Our words show characters unassigned in Python's Unicode (outside the CJK
    blocks, and in no token) as the first private-use character that no token
    contains (documented in BasicTokenizer): word -> the word as ours shows it."""
    vocab_chars = set("".join(ours.vocab))
    placeholder = next(chr(cp) for cp in range(0xE000, 0xF900) if chr(cp) not in vocab_chars)

    def unassigned(c):
        return (
            unicodedata.category(c) == "Cn"
            and c not in vocab_chars
            and not any(a <= ord(c) <= b for a, b in tokenizer_module._CJK_RANGES)
        )

    return lambda word: "".join(placeholder if unassigned(c) else c for c in word)


def describe(bad, limit=10):
    return f"{len(bad)} mismatches, e.g.\n" + "\n".join(
        f"  {text!r}: reference {expected} ours {got}" for text, expected, got in bad[:limit]
    )


def build_vocab(path, texts, lowercase, num_words=4000):
    """A WordPiece vocabulary from the reference BasicTokenizer's words: the most
    frequent words, every character seen (alone and as ##continuation), and
    prefixes / suffixes of frequent words so that words split into pieces."""
    basic = tokenization.BasicTokenizer(do_lower_case=lowercase)
    counts = collections.Counter(w for text in texts for w in basic.tokenize(text))
    frequent = [
        w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if len(w) <= 50
    ]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += frequent[:num_words]
    for word in frequent[: num_words // 4]:
        if len(word) >= 6:
            tokens += [word[:3], "##" + word[3:], "##" + word[-2:]]
    for char in sorted({c for w in counts for c in w}):
        tokens += [char, "##" + char]
    unique = list(dict.fromkeys(t for t in tokens if t.strip() == t and t))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(unique) + "\n")
    return str(path)


# === Real text: every line of the repository's real data ===


def real_texts(datasets_dir):
    """{source: [strings]} from Austen (package assets) and the labelled sets in data/."""
    texts = {}
    austen = []
    for path in sorted(glob.glob(os.path.join(AUSTEN_DIR, "*.txt"))):
        with open(path, encoding="utf-8") as f:
            austen.extend(line.rstrip("\n") for line in f)
    texts["austen"] = austen

    def tsv_columns(folder, columns):
        rows = []
        for path in sorted(glob.glob(os.path.join(datasets_dir, folder, "*.tsv"))):
            with open(path, encoding="utf-8") as f:
                next(f)  # header
                for line in f:
                    fields = line.rstrip("\n").split("\t")
                    rows.extend(fields[c] for c in columns)
        return rows

    texts["rotten_tomatoes"] = tsv_columns("rotten_tomatoes", [1])
    texts["bbc_news"] = tsv_columns("bbc_news", [1, 2])
    tweets = []
    for split in ("train", "dev"):
        with open(os.path.join(datasets_dir, "wnut16", f"{split}.conll"), encoding="utf-8") as f:
            tweet = []
            for line in f:
                line = line.rstrip("\n")
                if line:
                    tweet.append(line.split("\t")[0])
                elif tweet:
                    tweets.append(" ".join(tweet))
                    tweet = []
            if tweet:
                tweets.append(" ".join(tweet))
    texts["wnut16"] = tweets
    squad = []
    for path in sorted(glob.glob(os.path.join(datasets_dir, "squad_samples", "*.json"))):
        with open(path, encoding="utf-8") as f:
            for article in json.load(f)["data"]:
                for paragraph in article["paragraphs"]:
                    squad.append(paragraph["context"])
                    for qa in paragraph["qas"]:
                        squad.append(qa["question"])
                        squad.extend(a["text"] for a in qa.get("answers", []))
    texts["squad_samples"] = squad
    return texts


# Lines per source in the fast suite; the slow test compares every line.
FAST_SAMPLE = {
    "austen": 1500,
    "rotten_tomatoes": 800,
    "bbc_news": 30,
    "wnut16": 300,
    "squad_samples": 1000,
}


@pytest.fixture(scope="module")
def texts(datasets_dir):
    return real_texts(datasets_dir)


@pytest.fixture(scope="module")
def uncased(real_vocab_file):
    return BertTokenizer(real_vocab_file), reference(real_vocab_file, True)


@pytest.fixture(scope="module")
def cased(tmp_path_factory, texts):
    corpus = (
        HARD_CASES
        + texts["austen"][:5000]
        + texts["rotten_tomatoes"][:3000]
        + texts["wnut16"][:1000]
        + texts["bbc_news"][:100]
    )
    path = build_vocab(tmp_path_factory.mktemp("cased") / "vocab.txt", corpus, lowercase=False)
    return BertTokenizer(path, lowercase=False), reference(path, False)


@pytest.fixture(scope="module")
def uncased_built(tmp_path_factory, texts):
    """Uncased vocabulary holding every character of the hard cases, so that a
    normalisation difference changes ids instead of hiding behind [UNK]."""
    corpus = HARD_CASES + texts["austen"][:3000]
    path = build_vocab(tmp_path_factory.mktemp("uncased") / "vocab.txt", corpus, lowercase=True)
    return BertTokenizer(path), reference(path, True)


# === Hard cases ===


def test_hard_case_list_is_large(uncased):
    assert len(HARD_CASES) >= 100
    assert len(set(HARD_CASES)) == len(HARD_CASES)


@pytest.mark.parametrize("which", ["uncased", "cased", "uncased_built"])
def test_hard_cases(which, request):
    ours, original = request.getfixturevalue(which)
    bad = id_mismatches(ours, original, HARD_CASES)
    assert not bad, describe(bad)


@pytest.mark.parametrize("which", ["uncased", "cased"])
def test_hard_case_words(which, request):
    ours, original = request.getfixturevalue(which)
    bad = word_mismatches(ours, original, HARD_CASES)
    assert not bad, describe(bad)


def test_offsets_path_gives_the_same_ids(uncased, cased):
    for ours, _ in (uncased, cased):
        ids = ours.tokenize(HARD_CASES)
        with_offsets, _, _ = ours.tokenize_with_offsets(HARD_CASES)
        words, _, _ = ours.tokenize_words_with_offsets(HARD_CASES)
        assert with_offsets.to_list() == ids.to_list()
        assert words.merge_dims(1, 2).to_list() == ids.to_list()


def test_invalid_utf8_is_ignored_like_the_original(uncased):
    ours, original = uncased
    texts = [
        b"caf\xc3",
        b"a\xffb c",
        b"\xe2\x82 euro",
        b"a\xed\xa0\x80b",
        b"x\xf4\x90\x80\x80y",
        b"ok \xc0\xaf slash",
        "na\u00efve".encode("utf-8") + b"\x80",
    ]
    bad = id_mismatches(ours, original, texts)
    assert not bad, describe(bad)


def test_model_garden_limit_of_400_characters(real_vocab_file):
    """Configured like Model Garden's copy (400), ours matches it too."""
    ours = BertTokenizer(real_vocab_file, max_chars_per_word=400)
    original = reference(real_vocab_file, True, max_chars=400)
    texts = ["a" * n for n in (199, 200, 201, 399, 400, 401, 1000)] + ["é" * 300, "é" * 401]
    bad = id_mismatches(ours, original, texts)
    assert not bad, describe(bad)
    assert ours.tokenize(["a" * 300]).to_list() != [[ours.unk_id]]
    assert ours.tokenize(["a" * 401]).to_list() == [[ours.unk_id]]


# === Every code point ===


def code_points(sample_every):
    """Code points (no surrogates): a regular sample, plus in the fast suite every
    BMP character the original treats specially (controls, format, spaces, marks,
    punctuation, unassigned) or that lowercasing / NFD changes."""
    everything = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    if sample_every == 1:
        return everything
    chosen = set(everything[::sample_every])
    for cp in range(0x10000):
        char = chr(cp)
        category = unicodedata.category(char)
        if category == "Cs":
            continue
        if (
            category in ("Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Cn")
            or category.startswith("P")
            or char.lower() != char
            or unicodedata.normalize("NFD", char) != char
        ):
            chosen.add(cp)
    return sorted(chosen)


def check_code_points(uncased, cased, sample_every, parts=("ids", "words")):
    cps = code_points(sample_every)
    if "ids" in parts:
        # Ids with the real vocabulary: catches splitting differences ("a?b": 1 or 3 words).
        ours, original = uncased
        bad = id_mismatches(ours, original, [f"a{chr(cp)}b" for cp in cps], batch_size=8192)
        assert not bad, describe(bad)
    if "words" in parts:
        # Words, for every code point, in context: catches normalisation differences.
        for ours, original in (uncased, cased):
            bad = word_mismatches(ours, original, [f"A{chr(cp)}b {chr(cp)}" for cp in cps])
            assert not bad, describe(bad)
    return len(cps)


def test_code_points_sample(uncased, cased):
    assert check_code_points(uncased, cased, sample_every=97) > 20000


@pytest.mark.slow
@pytest.mark.parametrize("part", ["ids", "words"])
def test_every_code_point(uncased, cased, part):
    assert check_code_points(uncased, cased, 1, [part]) == 0x110000 - 0x800


# === Real text ===


def check_real_text(texts, uncased, cased, sample):
    compared = 0
    for source, lines in texts.items():
        lines = lines[: sample[source]] if sample else lines
        for ours, original in (uncased, cased):
            bad = id_mismatches(ours, original, lines)
            assert not bad, f"{source}: " + describe(bad)
        compared += len(lines)
    return compared


def test_real_text_sample(texts, uncased, cased):
    assert check_real_text(texts, uncased, cased, FAST_SAMPLE) > 2500


@pytest.mark.slow
def test_real_text_every_line(texts, uncased, cased):
    assert check_real_text(texts, uncased, cased, None) > 85000
