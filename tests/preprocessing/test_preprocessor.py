"""BertPreprocessor: the original tokenizer's ids packed as the original packs
them, inside a model, in tf.data and through a `.keras` file."""

import numpy as np
import pytest
import tensorflow as tf
from official.nlp.tools import tokenization

from keras_bert.assets import VOCAB_FILE
from keras_bert.preprocessing.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Héllo, WORLD! naïve café", "a " * 40, ""]
PAIRS = ["Is it lazy?", "yes " * 30, "short", "only the pair"]


def original_features(texts, pairs, seq_length):
    """google-research/bert's FullTokenizer, `_truncate_seq_pair` and packing."""
    reference = tokenization.FullTokenizer(VOCAB_FILE, do_lower_case=True)
    rows = []
    for index, text in enumerate(texts):
        a = reference.tokenize(text)
        b = reference.tokenize(pairs[index]) if pairs is not None else None
        if b is None:
            a = a[: seq_length - 2]
        else:
            while len(a) + len(b) > seq_length - 3:
                (a if len(a) > len(b) else b).pop()
        tokens = ["[CLS]"] + a + ["[SEP]"] + ([] if b is None else b + ["[SEP]"])
        segments = [0] * (len(a) + 2) + ([] if b is None else [1] * (len(b) + 1))
        ids = reference.convert_tokens_to_ids(tokens)
        pad = seq_length - len(ids)
        rows.append((ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad))
    return {
        name: np.asarray([row[i] for row in rows], np.int32)
        for i, name in enumerate(("input_ids", "input_mask", "segment_ids"))
    }


@pytest.mark.parametrize("paired", [False, True])
def test_ids_equal_the_original_tokenizer_and_packing(paired):
    preprocessor = BertPreprocessor(VOCAB_FILE, seq_length=24)
    pairs = PAIRS if paired else None
    expected = original_features(TEXTS, pairs, 24)
    for inputs in [TEXTS] if not paired else [(TEXTS, PAIRS), {"text": TEXTS, "text_pair": PAIRS}]:
        got = preprocessor(inputs)
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name].numpy(), value, err_msg=name)
    encoded = preprocessor.encode((TEXTS, PAIRS) if paired else TEXTS, chunk_size=3)
    for name, value in expected.items():
        np.testing.assert_array_equal(encoded[name], value, err_msg=name)


def test_maps_over_a_dataset_and_survives_its_config():
    preprocessor = BertPreprocessor(VOCAB_FILE, seq_length=16)
    dataset = (
        tf.data.Dataset.from_tensor_slices((TEXTS, [0, 1, 0, 1]))
        .batch(2)
        .map(lambda x, y: (preprocessor(x), y))
    )
    ids = np.concatenate([x["input_ids"].numpy() for x, _ in dataset])
    np.testing.assert_array_equal(ids, original_features(TEXTS, None, 16)["input_ids"])
    # The config holds the settings, not the 30,522 pieces (a `.keras` file
    # stores them as an asset: tests/models/test_fresh_process.py and test_tasks.py).
    config = preprocessor.get_config()
    assert "vocabulary" not in config and len(str(config)) < 1000
    restored = BertPreprocessor.from_config(config)
    assert (restored.seq_length, restored.lowercase) == (16, True)
    with pytest.raises(ValueError, match="has no vocabulary.*set_vocabulary"):
        restored(TEXTS)
    restored.set_vocabulary(VOCAB_FILE)
    np.testing.assert_array_equal(restored(TEXTS)["input_ids"].numpy(), ids)


def test_cased_vocabulary_keeps_case(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "hello"]
    cased = BertPreprocessor(vocab, lowercase=False, seq_length=5)
    uncased = BertPreprocessor(vocab, lowercase=True, seq_length=5)
    assert cased(["Hello"])["input_ids"].numpy()[0, 1] == 5
    assert uncased(["Hello"])["input_ids"].numpy()[0, 1] == 6


def test_a_preprocessor_from_a_tokenizer_is_the_one_from_its_vocabulary():
    """`from_tokenizer` (what `keras-bert finetune` saves in its model) keeps
    the tokenizer object and its settings, and reads as the plain one does."""
    tokenizer = BertTokenizer(VOCAB_FILE, lowercase=True, max_chars_per_word=20)
    preprocessor = BertPreprocessor.from_tokenizer(tokenizer, seq_length=24)
    assert preprocessor.tokenizer is tokenizer
    plain = BertPreprocessor(VOCAB_FILE, seq_length=24, max_chars_per_word=20)
    # The same settings (strip_accents resolved from the casing: the tokenizer's).
    settings = ("lowercase", "seq_length", "max_chars_per_word", "special_tokens")
    assert [preprocessor.get_config()[k] for k in settings] == [
        plain.get_config()[k] for k in settings
    ]
    assert preprocessor.strip_accents == plain.tokenizer.strip_accents
    for name, value in original_features(TEXTS, None, 24).items():
        np.testing.assert_array_equal(preprocessor(TEXTS)[name].numpy(), value, err_msg=name)
    np.testing.assert_array_equal(
        preprocessor(["a" * 25])["input_ids"].numpy(), plain(["a" * 25])["input_ids"].numpy()
    )  # the tokenizer's own word limit: [UNK]


def test_bad_inputs_name_the_problem():
    preprocessor = BertPreprocessor(VOCAB_FILE, seq_length=8)
    with pytest.raises(TypeError, match="`text` must hold strings"):
        preprocessor(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="keys 'text' and optionally 'text_pair'"):
        preprocessor({"sentence": ["a"]})
    with pytest.raises(ValueError, match="one `text_pair` per `text`"):
        preprocessor.encode((["a", "b"], ["c"]))
    with pytest.raises(ValueError, match="seq_length must be an integer >= 3"):
        BertPreprocessor(VOCAB_FILE, seq_length=2)
