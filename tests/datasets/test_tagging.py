"""Tagging data: CoNLL reading, first-word-piece labels checked against the
original Python tokenizer, TFDS conll2003 through mock data."""

import os

import numpy as np
import pytest
import tensorflow_datasets as tfds
from official.nlp.tools import tokenization

from keras_bert import BertTokenizer
from keras_bert.datasets import tagging

WNUT_TYPES = (
    "person",
    "geo-loc",
    "company",
    "facility",
    "product",
    "musicartist",
    "movie",
    "sportsteam",
    "tvshow",
    "other",
)


@pytest.fixture(scope="module")
def tokenizer(real_vocab_file):
    return BertTokenizer(real_vocab_file)


def test_read_wnut16(datasets_dir):
    train = tagging.read_conll(os.path.join(datasets_dir, "wnut16", "train.conll"))
    dev = tagging.read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll"))
    # Sizes as the datasets README states them.
    assert (len(train), len(dev)) == (1675, 239)
    assert dev.words[0][:2] == ["Mike", "vick"] and dev.tags[0][:2] == ["B-person", "O"]
    assert all(len(w) == len(t) for w, t in zip(train.words, train.tags))
    names = tagging.tag_vocabulary(train.tags)
    assert names[0] == "O"
    assert set(names) == {"O"} | {f"{p}-{t}" for t in WNUT_TYPES for p in "BI"}


def test_read_conll2003_format(tmp_path):
    path = tmp_path / "eng.testa"
    path.write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
        "German JJ B-NP B-MISC\n\nPeter NNP B-NP B-PER\n"
    )
    sentences = tagging.read_conll(str(path))
    assert sentences.words == [["EU", "rejects", "German"], ["Peter"]]
    assert sentences.tags == [["B-ORG", "O", "B-MISC"], ["B-PER"]]
    bad = tmp_path / "bad.conll"
    bad.write_text("word\tO\nlonely\n")
    with pytest.raises(ValueError, match="bad.conll, line 2"):
        tagging.read_conll(str(bad))


def test_a_table_of_sentences_is_not_read_as_conll(tmp_path):
    # A classification TSV given to --task tag: each line's "tag" would be its
    # sentence's last word, and training would go ahead on nonsense.
    table = tmp_path / "train.tsv"
    table.write_text("label\tsentence\nfresh\tThe movie is a blast\nrotten\tdull\n")
    with pytest.raises(
        ValueError, match="train.tsv, line 2: the tag 'The movie is a blast' has spaces"
    ):
        tagging.read_conll(str(table))
    spaced = tmp_path / "spaced.conll"
    spaced.write_text("EU NNP B-ORG\nrejects O\n")
    with pytest.raises(ValueError, match="spaced.conll, line 2: 2 columns, line 1 has 3"):
        tagging.read_conll(str(spaced))


@pytest.mark.parametrize("seq_length", [16, 64])
def test_first_piece_labels_match_original_tokenizer(
    datasets_dir, real_vocab_file, tokenizer, seq_length
):
    sentences = tagging.read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll"))
    sentences = tagging.TaggedSentences(sentences.words[:120], sentences.tags[:120])
    names = tagging.tag_vocabulary(sentences.tags)
    features, labels, weights, first_pieces = tagging.encode_tagged(
        tokenizer, sentences, names, seq_length
    )
    reference = tokenization.FullTokenizer(real_vocab_file, do_lower_case=True)
    cut = 0
    for row, (words, tags) in enumerate(zip(sentences.words, sentences.tags)):
        pieces, expected_labels, full = ["[CLS]"], [], False
        for word, tag in zip(words, tags):
            word_pieces = reference.tokenize(word)
            # Cut at the first word that does not fit (as the exported tagger).
            full = full or len(pieces) + len(word_pieces) > seq_length - 1
            if full or not word_pieces:
                cut += 1
                continue
            expected_labels.append((len(pieces), names.index(tag)))
            pieces += word_pieces
        pieces.append("[SEP]")
        ids = reference.convert_tokens_to_ids(pieces)
        np.testing.assert_array_equal(features["input_ids"][row, : len(ids)], ids)
        assert features["input_mask"][row].sum() == len(ids)
        positions = [p for p, _ in expected_labels]
        assert np.flatnonzero(weights[row]).tolist() == positions
        assert [labels[row, p] for p in positions] == [label for _, label in expected_labels]
        assert (labels[row][weights[row] == 0] == tagging.IGNORED).all()
    assert (seq_length == 16) == (cut > 0)
    # Decoding the gold ids gives the gold tags back (O for the words cut off).
    decoded = tagging.decode_tags(np.maximum(labels, 0), first_pieces, names)
    for row, tags in enumerate(sentences.tags):
        kept = first_pieces[row] >= 0
        assert [t for t, k in zip(decoded[row], kept) if k] == [t for t, k in zip(tags, kept) if k]
        assert all(t == "O" for t, k in zip(decoded[row], kept) if not k)


def test_unknown_tags_are_errors_for_training_only(tokenizer):
    sentences = tagging.TaggedSentences([["Paris", "rocks"]], [["B-city", "O"]])
    with pytest.raises(ValueError, match="B-city"):
        tagging.encode_tagged(tokenizer, sentences, ["O"], 8)
    _, labels, weights, _ = tagging.encode_tagged(tokenizer, sentences, ["O"], 8, strict=False)
    assert weights[0].tolist() == [0, 0, 1, 0, 0, 0, 0, 0]


def test_tags_are_names_or_their_indices(tokenizer):
    names = ["O", "B-LOC"]
    by_name = tagging.encode_tagged(
        tokenizer, tagging.TaggedSentences([["Paris", "rocks"]], [["B-LOC", "O"]]), names, 8
    )
    by_index = tagging.encode_tagged(
        tokenizer, tagging.TaggedSentences([["Paris", "rocks"]], [[1, np.int64(0)]]), names, 8
    )
    np.testing.assert_array_equal(by_name[1], by_index[1])
    with pytest.raises(ValueError, match="tag 2 is neither one of .* nor an index below 2"):
        tagging.encode_tagged(
            tokenizer, tagging.TaggedSentences([["Paris", "rocks"]], [[2, 0]]), names, 8
        )


def test_tfds_conll2003_with_mock_data():
    with tfds.testing.mock_data(num_examples=5):
        sentences = tagging.read_conll2003_tfds("train")
    assert len(sentences) == 5
    names = tfds.builder("conll2003").info.features["ner"].feature.names
    # Mock sequences have random lengths; real ones pair one tag with each token.
    assert all(isinstance(w, str) for words in sentences.words for w in words)
    assert all(tag in names for tags in sentences.tags for tag in tags)
    assert any(tags for tags in sentences.tags)
