"""Vocabulary learning: the same words as the original BasicTokenizer, the
special-token layout, atomic writing, `keras-bert vocab`, and a low [UNK] rate
of a vocabulary learned on Austen when it tokenizes Austen."""

import collections
import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from official.nlp.tools import tokenization

from keras_bert.assets import AUSTEN_DIR
from keras_bert.text.tokenizer import BertTokenizer
from keras_bert.text.vocab import count_words, learn_vocabulary, special_tokens

from harness import run_command


def austen_lines(name=None):
    lines = []
    for path in sorted(glob.glob(os.path.join(AUSTEN_DIR, f"{name or '*'}.txt"))):
        with open(path, encoding="utf-8") as f:
            lines.extend(line.rstrip("\n") for line in f)
    return lines


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def unk_rate(vocab_file, lines):
    tokenizer = BertTokenizer(vocab_file)
    ids = tf.function(tokenizer.tokenize)(tf.constant(lines)).flat_values.numpy()
    return float(np.mean(ids == tokenizer.unk_id)), len(ids)


@pytest.fixture(scope="module")
def emma(tmp_path_factory):
    """The first 1,500 lines of Emma as a training file; the next 2,000 held out."""
    lines = austen_lines("emma")
    folder = tmp_path_factory.mktemp("emma")
    return write_lines(folder / "train.txt", lines[:1500]), lines[1500:3500], folder


@pytest.fixture(scope="module")
def learned(emma):
    train, _, folder = emma
    output = str(folder / "out" / "vocab.txt")
    return learn_vocabulary([train], 1000, output=output), output


@pytest.mark.parametrize("lowercase", [True, False])
def test_words_are_the_original_basic_tokens(tmp_path, lowercase):
    lines = austen_lines("persuasion")[:400] + [
        "Naïve CAFÉ, ΟΔΟΣ. İstanbul a\x00b\u200bc 東京 x²!",
        "\ufeffBOM 🍕🍕",
    ]
    path = write_lines(tmp_path / "text.txt", lines)
    basic = tokenization.BasicTokenizer(do_lower_case=lowercase)
    expected = collections.Counter(w for line in lines for w in basic.tokenize(line))
    assert count_words([path], lowercase=lowercase) == expected


def test_learned_vocabulary_layout_and_file(learned, emma):
    vocab, output = learned
    train, _, folder = emma
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 800 <= len(vocab) <= 1000  # the learner settles within a frequency threshold
    assert len(set(vocab)) == len(vocab)
    with open(output, encoding="utf-8") as f:
        assert f.read().split("\n")[:-1] == vocab
    assert os.listdir(os.path.dirname(output)) == ["vocab.txt"]  # no temporary left
    # Every character of the training words is a token alone and as a continuation.
    chars = {c for word in count_words([train]) for c in word}
    assert all(c in vocab and "##" + c in vocab for c in chars)
    tokenizer = BertTokenizer(output)
    assert (
        tokenizer.pad_id,
        tokenizer.unk_id,
        tokenizer.cls_id,
        tokenizer.sep_id,
        tokenizer.mask_id,
    ) == (0, 1, 2, 3, 4)


def test_learned_vocabulary_rarely_needs_unk_on_held_out_text(learned, emma):
    _, output = learned
    _, held_out, _ = emma
    rate, pieces = unk_rate(output, held_out)
    assert pieces > 20000
    assert rate < 0.005, f"[UNK] rate {rate:.4%}"


def test_google_layout_with_unused_slots():
    tokens = special_tokens(num_unused=200)
    assert [tokens.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0,
        100,
        101,
        102,
        103,
    ]
    assert tokens[1] == "[unused0]" and tokens[99] == "[unused98]"
    assert tokens[104] == "[unused99]" and tokens[-1] == "[unused199]"
    assert special_tokens() == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_cli_vocab(tmp_path, capsys):
    train = write_lines(tmp_path / "train.txt", austen_lines("emma")[:300])
    output = tmp_path / "cased" / "vocab.txt"
    assert (
        run_command(
            "vocab --input {input} --vocab-size 800 --output {output} --cased --num-unused 99",
            input=train,
            output=output,
        )
        == 0
    )
    assert "tokens to" in capsys.readouterr().out
    tokenizer = BertTokenizer(str(output), lowercase=False)
    assert (tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        100,
        101,
        102,
        103,
    )
    assert "Emma" in tokenizer.vocab  # cased
    assert tokenizer.vocab_size <= 800


def test_errors(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="no input file matches .*missing"):
        learn_vocabulary([str(tmp_path / "missing*.txt")], 100)
    path = write_lines(tmp_path / "t.txt", ["a b c"])
    with pytest.raises(ValueError, match="vocab_size 5 leaves no room"):
        learn_vocabulary([path], 5)
    assert (
        run_command(
            "vocab --input {input} --vocab-size 50 --output {output}",
            input=tmp_path / "nope.txt",
            output=tmp_path / "v.txt",
        )
        == 2
    )
    assert "no input file matches" in capsys.readouterr().err


@pytest.mark.slow
def test_vocabulary_learned_on_one_novel_covers_all_of_austen(tmp_path):
    """Learned on Persuasion (8k lines), 2,000 tokens; applied to all six novels."""
    train = os.path.join(AUSTEN_DIR, "persuasion.txt")
    output = str(tmp_path / "vocab.txt")
    learn_vocabulary([train], 2000, output=output)
    rate, pieces = unk_rate(output, austen_lines())
    print(f"[UNK] rate on all of Austen: {rate:.4%} of {pieces} pieces")
    assert pieces > 900000
    assert rate < 0.005
