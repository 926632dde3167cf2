"""Texts longer than the sequence, read in windows (`window_stride`) by every
classifier method that takes text: `score` scores exactly what
`predict_labels` answers, `fit` trains on each window with its text's label
(HuggingFace's `return_overflowing_tokens`), and text pairs are refused in
one line that says what to do, before any warning."""

import warnings

import keras
import numpy as np
import pytest

from keras_bert import BertEncoder
from keras_bert.datasets import metrics
from keras_bert.models.classifier import BertClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor

from harness import small_config

CONFIG = small_config(vocab_size=19, num_hidden_layers=1, max_position_embeddings=16)  # TINY_VOCAB
SEQ_LENGTH = 8  # 6 pieces a window
STRIDE = 3
NAMES = ["neg", "pos"]
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "a", "."]


def texts_and_labels(n, seed):
    """Texts of 2 to 20 pieces (up to 5 windows); label: `quick` before `lazy`."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        words = list(rng.choice(WORDS, size=rng.integers(2, 18)))
        texts.append(" ".join(words))
        first = [w for w in words if w in ("quick", "lazy")]
        labels.append("pos" if first[:1] == ["quick"] else "neg")
    return texts, labels


def classifier(tiny_vocab_file, num_classes=2, seed=0):
    keras.utils.set_random_seed(seed)
    return BertClassifier(
        BertEncoder(CONFIG),
        num_classes,
        label_names=NAMES if num_classes == 2 else None,
        preprocessor=BertPreprocessor(tiny_vocab_file, seq_length=SEQ_LENGTH),
    )


def window_counts(model, texts):
    return model.preprocessor.windows(texts, STRIDE)[1].numpy()


def test_score_with_windows_is_the_score_of_predict_labels(tiny_vocab_file):
    model = classifier(tiny_vocab_file)
    texts, labels = texts_and_labels(24, seed=1)
    assert window_counts(model, texts).max() > 2  # the texts really are windowed
    answers = model.predict_labels(texts, window_stride=STRIDE)
    scored = model.score(texts, labels, window_stride=STRIDE, batch_size=5)
    truth = [NAMES.index(label) for label in labels]
    predicted = [NAMES.index(label) for label in answers]
    assert scored == {
        "accuracy": metrics.accuracy(truth, predicted),
        "f1": metrics.f1(truth, predicted),
    }
    # A GLUE task's figures, from the same answers.
    assert (
        model.score(texts, labels, glue_task="mrpc", window_stride=STRIDE)["accuracy"]
        == (scored["accuracy"])
    )


def test_regressor_scores_the_mean_of_its_windows(tiny_vocab_file):
    model = classifier(tiny_vocab_file, num_classes=1)
    texts, _ = texts_and_labels(12, seed=2)
    scores = np.linspace(0.0, 5.0, len(texts))
    predicted = model.classify(texts, window_stride=STRIDE)["score"]
    # score reads the targets as float32 (check_scores): the figures agree to its rounding.
    assert model.score(texts, scores, window_stride=STRIDE) == pytest.approx(
        {
            "pearson": metrics.pearson(scores, predicted),
            "spearman": metrics.spearman(scores, predicted),
        },
        rel=1e-6,
    )


def test_fit_trains_on_every_window_with_its_texts_label(tiny_vocab_file):
    """One epoch on the windows equals one epoch on their features, each
    with its text's label and weight, in the same order (no shuffle)."""
    texts, labels = texts_and_labels(10, seed=3)
    weights = np.linspace(0.5, 1.5, len(texts))
    windowed = classifier(tiny_vocab_file, seed=4)
    counts = window_counts(windowed, texts)
    features, _ = windowed.preprocessor.windows(texts, STRIDE)
    by_hand = classifier(tiny_vocab_file, seed=4)
    for model in (windowed, by_hand):
        model.compile(optimizer=keras.optimizers.SGD(0.1))
    history = windowed.fit(
        texts,
        labels,
        sample_weight=weights,
        window_stride=STRIDE,
        batch_size=4,
        epochs=1,
        shuffle=False,
        verbose=0,
    )
    expected = by_hand.fit(
        {name: value.numpy() for name, value in features.items()},
        np.repeat([NAMES.index(label) for label in labels], counts),
        sample_weight=np.repeat(weights, counts),
        batch_size=4,
        epochs=1,
        shuffle=False,
        verbose=0,
    )
    assert history.history["loss"] == pytest.approx(expected.history["loss"], rel=1e-6)
    for ours, theirs in zip(windowed.get_weights(), by_hand.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert windowed.trained_on_pairs is False


def test_fit_with_windows_validates_on_the_windows_of_whole_texts(tiny_vocab_file):
    """validation_split takes Keras' last rows from the texts, before they are
    cut: the validation loss is the loss of the last texts' windows."""
    texts, labels = texts_and_labels(10, seed=5)
    model = classifier(tiny_vocab_file)
    model.compile(optimizer=keras.optimizers.SGD(0.0))  # the weights stay as they are
    split = model.fit(
        texts, labels, window_stride=STRIDE, validation_split=0.2, epochs=1, verbose=0
    )
    given = model.fit(
        texts[:8],
        labels[:8],
        window_stride=STRIDE,
        validation_data=(texts[8:], labels[8:]),
        epochs=1,
        verbose=0,
    )
    features, counts = model.preprocessor.windows(texts[8:], STRIDE)
    by_hand = model.evaluate(
        {name: value.numpy() for name, value in features.items()},
        np.repeat([NAMES.index(label) for label in labels[8:]], counts.numpy()),
        verbose=0,
        return_dict=True,
    )
    assert split.history["val_loss"][0] == pytest.approx(by_hand["loss"], rel=1e-5)
    assert given.history["val_loss"][0] == pytest.approx(by_hand["loss"], rel=1e-5)


@pytest.mark.parametrize("method", ["fit", "score", "predict_labels", "classify"])
def test_windows_of_pairs_are_refused_in_one_line_without_a_warning(tiny_vocab_file, method):
    model = classifier(tiny_vocab_file)
    model.trained_on_pairs = False  # would warn of pairs: the refusal comes first
    model.compile()
    pairs = (["the quick fox", "a lazy dog"], ["jumps over", "the dog"])
    call = {
        "fit": lambda: model.fit(pairs, NAMES, window_stride=STRIDE, verbose=0),
        "score": lambda: model.score(pairs, NAMES, window_stride=STRIDE),
        "predict_labels": lambda: model.predict_labels(pairs, window_stride=STRIDE),
        "classify": lambda: model.classify(pairs, window_stride=STRIDE),
    }[method]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as raised:
            call()
    message = str(raised.value)
    assert "\n" not in message
    assert "join each pair into one text" in message and "leave window_stride out" in message


def test_windows_of_a_dataset_are_refused_saying_how(tiny_vocab_file):
    import tensorflow as tf

    model = classifier(tiny_vocab_file)
    model.compile()
    data = tf.data.Dataset.from_tensor_slices((["the quick fox"], [1])).batch(1)
    with pytest.raises(ValueError, match="in-memory texts.*BertPreprocessor.windows"):
        model.fit(data, window_stride=STRIDE, verbose=0)
