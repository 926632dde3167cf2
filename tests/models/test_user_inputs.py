"""The one boundary for what a user passes in Python (`keras_bert.models.user_inputs`):
each bad argument a ValueError naming the argument, the position and what to do,
raised before any tokenizing, tracing or compiling."""

import numpy as np
import pytest

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor, BertTokenClassifier
from keras_bert.models import user_inputs

from conftest import TINY_VOCAB
from harness import tiny_config

TEXTS = ["the quick fox", "a lazy dog", "the dog", "a fox"]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join([*TINY_VOCAB[:7], "fox", "a", "lazy", "dog"]) + "\n")
    model = BertClassifier(
        BertEncoder(tiny_config(vocab_size=11)),
        2,
        preprocessor=BertPreprocessor(str(vocab), seq_length=8),
    )
    model.compile()
    return model


@pytest.mark.parametrize("call", ["fit", "predict", "evaluate"])
def test_an_empty_batch_is_named(classifier, call):
    args = ([],) if call == "predict" else ([], [])
    with pytest.raises(ValueError, match="`x` is empty: pass at least one text"):
        getattr(classifier, call)(*args)


def test_a_missing_text_is_named_by_position(classifier):
    with pytest.raises(ValueError, match=r"`x`\[2\] is None, not a string"):
        classifier.predict(["a fox", "the dog", None])
    with pytest.raises(ValueError, match=r"`x`\[1\] is a int \(7\), not a string"):
        classifier.fit(["a fox", 7], [0, 1])


def test_pairs_of_unequal_length_are_named(classifier):
    with pytest.raises(
        ValueError,
        match=r"one `text_pair` per `text`: got 2 texts and 1 "
        r"pairs \(`x\[0\] \(texts\)`, `x\[1\] \(pairs\)`\)",
    ):
        classifier.predict((["a fox", "the dog"], ["a dog"]))


def test_fractional_and_out_of_range_labels_are_refused(classifier):
    with pytest.raises(ValueError, match=r"`y`\[0\] is 0.5, not a class index"):
        classifier.fit(TEXTS, [0.5, 1.0, 0.0, 0.2])
    with pytest.raises(ValueError, match=r"`y`\[1\] is 5, out of range for num_classes=2"):
        classifier.fit(TEXTS, [0, 5, 1, 0])
    with pytest.raises(ValueError, match=r"`y`\[3\] is -1, out of range"):
        classifier.fit(TEXTS, np.array([0, 1, 1, -1]))


def test_a_pandas_series_of_texts_is_read_as_a_list(classifier):
    pandas = pytest.importorskip("pandas")
    series = pandas.Series(TEXTS)
    np.testing.assert_allclose(
        classifier.predict(series, verbose=0), classifier.predict(TEXTS, verbose=0), atol=1e-6
    )
    with pytest.raises(ValueError, match=r"`x`\[1\] is a float \(nan\), not a string"):
        classifier.predict(pandas.Series(["a fox", None]))


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_class_counts_must_be_positive_integers(bad):
    with pytest.raises(ValueError, match=r"`num_classes` must be an integer of at least 1"):
        BertClassifier(BertEncoder(tiny_config()), bad)
    with pytest.raises(ValueError, match=r"`num_labels` must be an integer of at least 1"):
        BertTokenClassifier(BertEncoder(tiny_config()), bad)


def test_a_vocabulary_that_does_not_fit_the_embedding_is_refused():
    with pytest.raises(
        ValueError,
        match="vocab.txt: the vocabulary has 40 entries but the "
        "encoder's token embedding only 30 rows",
    ):
        user_inputs.check_vocabulary_fits(40, 30, "vocab.txt")
    with pytest.raises(
        ValueError,
        match="1000 entries but the encoder's token embedding "
        "30522 rows: the vocabulary is not the checkpoint's",
    ):
        user_inputs.check_vocabulary_fits(1000, 30522, "model")
    user_inputs.check_vocabulary_fits(30522, 30528, "padded table")  # padded to 8: fine


def test_regression_scores_must_be_numbers():
    with pytest.raises(ValueError, match=r"`y`\[1\] is 'high', not a finite float32 number"):
        user_inputs.check_scores([0.5, "high"])
    # Finite in Python, inf in float32 (whose largest is 3.4028235e38).
    with pytest.raises(ValueError, match=r"`y`\[2\] is 1e\+39, not a finite float32 number"):
        user_inputs.check_scores([0.5, 3.4e38, 1e39])
    np.testing.assert_array_equal(user_inputs.check_scores([1, "2.5"]), [1.0, 2.5])


def test_from_pretrained_refuses_a_vocabulary_larger_than_the_embedding(tmp_path):
    encoder_file = str(tmp_path / "encoder.keras")
    BertEncoder(tiny_config(vocab_size=11)).save(encoder_file)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"word{i}" for i in range(20)])
        + "\n"
    )
    with pytest.raises(
        ValueError,
        match="vocab.txt: the vocabulary has 25 entries but the "
        "encoder's token embedding only 11 rows",
    ):
        BertClassifier.from_pretrained(encoder_file, num_classes=2, vocab_file=str(vocab))


@pytest.mark.parametrize(
    "bad, got",
    [
        ((["the fox"], ["a dog"], ["the dog"]), "a tuple of 3 lists of texts"),
        ({"txt": ["the fox"]}, "a dict with keys \\['txt'\\]"),
        (7, "7"),
    ],
)
def test_input_in_no_form_the_model_takes_is_refused_naming_the_forms(classifier, bad, got):
    with pytest.raises(ValueError, match=f"a BertClassifier takes texts .*; got {got}"):
        classifier.predict(bad)


def test_text_for_a_model_without_a_preprocessor_says_how_to_add_one():
    model = BertClassifier(BertEncoder(tiny_config()), 2)
    with pytest.raises(ValueError, match="has no preprocessor, so it takes input_ids"):
        model.predict(["the quick fox"])


@pytest.mark.parametrize("call", ["fit", "predict", "evaluate"])
@pytest.mark.parametrize("batch_size", [0, -1, 2.5])
def test_a_batch_size_below_one_is_named(classifier, call, batch_size):
    args = (["the fox"],) if call == "predict" else (["the fox"], [1])
    with pytest.raises(ValueError, match="`batch_size` must be a whole number of at least 1"):
        getattr(classifier, call)(*args, batch_size=batch_size)


def test_a_task_model_refuses_a_vocabulary_past_its_embedding_however_it_is_built(tmp_path):
    """The one boundary: the task model given a preprocessor (its constructor,
    `from_pretrained`, the command line, a preprocessor set later)."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"word{i}" for i in range(20)])
        + "\n"
    )
    message = f"{vocab}: the vocabulary has 25 entries but the encoder's token embedding only 11"
    with pytest.raises(ValueError, match=message):
        BertClassifier(
            BertEncoder(tiny_config(vocab_size=11)), 2, preprocessor=BertPreprocessor(str(vocab))
        )
    tagger = BertTokenClassifier(BertEncoder(tiny_config(vocab_size=11)), 3)
    with pytest.raises(ValueError, match=message):
        tagger.preprocessor = BertPreprocessor(str(vocab))
    # A random encoder may have more rows than the vocabulary uses; a config
    # alone (no vocabulary yet) has nothing to check.
    BertClassifier(
        BertEncoder(tiny_config(vocab_size=400)), 2, preprocessor=BertPreprocessor(str(vocab))
    )
    BertClassifier(BertEncoder(tiny_config(vocab_size=11)), 2, preprocessor=BertPreprocessor())
