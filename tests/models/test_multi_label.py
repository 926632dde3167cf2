"""Multi-label classification (`BertClassifier(multi_label=True)`): a sigmoid
per label, binary cross-entropy from the logits, labels as multi-hot rows or
names per text, answers above a threshold, micro / macro F1. Every number is
checked against NumPy or scikit-learn computed here (a `.keras` file reloads
as multi-label in a fresh process: tests/models/test_tasks.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import accuracy_score, f1_score
from task_models import assert_same_weights, tiny_encoder

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets.metrics import multi_label_scores
from keras_bert.models.classifier import MultiLabelF1

from harness import tiny_config, tolerance

NAMES = ["sports", "politics", "tech"]
TEXTS = [
    "the match ended in a draw",
    "parliament passed the budget",
    "a new phone with a faster chip",
    "the minister opened the stadium",
    "dull and far too long",
    "Emma lives in Highbury",
]
LABELS = [["sports"], ["politics"], ["tech"], ["politics", "sports"], [], ["tech", "sports"]]
MULTI_HOT = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 0, 0], [1, 0, 1]])


def multi_label(seed=0, **kwargs):
    return BertClassifier(
        tiny_encoder(seed),
        3,
        dropout=0.0,
        label_names=NAMES,
        multi_label=True,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=16),
        **kwargs,
    )


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def head_by_hand(model, texts):
    """The head computed from the encoder's pooled output in NumPy."""
    pooled = model.encoder(model.preprocessor(texts))["pooled_output"].numpy()
    kernel, bias = model.get_layer("classifier_output").get_weights()
    return pooled.astype(np.float64) @ kernel + bias  # (N, C) logits


# Logits the fixture's head is fitted to: several labels, one, none per text.
LOGITS = np.array(
    [[2, -1, -2], [-1, 2.5, -1.2], [-2, -1, 3], [1.5, 1, -2], [-2, -3, -1], [1, -1.5, 0.8]]
)


@pytest.fixture(scope="module")
def model():
    """A head fitted (least squares) to map TEXTS' pooled outputs to LOGITS,
    so that thresholds split the labels differently per text. The encoder's
    initializer range is wider than BERT's so the texts' pooled outputs differ."""
    keras.utils.set_random_seed(0)
    model = BertClassifier(
        BertEncoder(tiny_config(vocab_size=30522, initializer_range=0.2)),
        3,
        dropout=0.0,
        label_names=NAMES,
        multi_label=True,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=16),
    )
    pooled = model.encoder(model.preprocessor(TEXTS))["pooled_output"].numpy()
    weights = np.linalg.lstsq(np.c_[pooled, np.ones(len(TEXTS))], LOGITS, rcond=None)[0]
    model.get_layer("classifier_output").set_weights(
        [weights[:-1].astype(np.float32), weights[-1].astype(np.float32)]
    )
    np.testing.assert_allclose(head_by_hand(model, TEXTS), LOGITS, atol=1e-3)
    return model


def test_probabilities_are_a_sigmoid_per_label(model):
    logits = head_by_hand(model, TEXTS)
    probabilities = model.predict_proba(TEXTS)
    np.testing.assert_allclose(probabilities, sigmoid(logits), atol=tolerance(8))
    # Independent labels: rows need not sum to 1.
    assert not np.allclose(probabilities.sum(axis=1), 1.0)
    np.testing.assert_allclose(model.predict(TEXTS, verbose=0), logits, atol=tolerance(8, scale=10))


@pytest.mark.parametrize("threshold", [None, 0.2, 0.8, 0.0, 1.0])
def test_predict_labels_are_the_names_above_the_threshold(model, threshold):
    probabilities = sigmoid(head_by_hand(model, TEXTS))
    cut = 0.5 if threshold is None else threshold
    expected = [
        [NAMES[j] for j in np.argsort(-row, kind="stable") if row[j] > cut] for row in probabilities
    ]
    got = model.predict_labels(TEXTS, threshold=threshold, batch_size=4)
    assert got == expected
    if threshold == 1.0:
        assert got == [[]] * len(TEXTS)
    if threshold is None:  # the spread head answers some texts with several labels, some with none
        assert any(len(row) > 1 for row in got) and any(len(row) <= 1 for row in got)


def test_score_is_sklearns_micro_and_macro_f1(model):
    for threshold in (0.5, 0.3):
        predicted = sigmoid(head_by_hand(model, TEXTS)) > threshold
        scores = model.score(TEXTS, LABELS, threshold=threshold)
        assert scores["f1_micro"] == pytest.approx(f1_score(MULTI_HOT, predicted, average="micro"))
        assert scores["f1_macro"] == pytest.approx(
            f1_score(MULTI_HOT, predicted, average="macro", zero_division=0)
        )
        assert scores["subset_accuracy"] == pytest.approx(accuracy_score(MULTI_HOT, predicted))
        assert model.score(TEXTS, MULTI_HOT, threshold=threshold) == scores


def test_multi_label_scores_equal_sklearn_with_empty_labels():
    rng = np.random.default_rng(1)
    true = (rng.random((50, 6)) < 0.3).astype(int)
    predicted = (rng.random((50, 6)) < 0.3).astype(int)
    true[:, 5] = predicted[:, 5] = 0  # a label nobody has: F1 0 there, as sklearn
    true[:, 4] = 0  # predicted but never true
    scores = multi_label_scores(true, predicted)
    assert scores["f1_micro"] == pytest.approx(f1_score(true, predicted, average="micro"))
    assert scores["f1_macro"] == pytest.approx(
        f1_score(true, predicted, average="macro", zero_division=0)
    )
    assert scores["subset_accuracy"] == pytest.approx(accuracy_score(true, predicted))


def test_default_loss_is_binary_cross_entropy_of_the_logits(model):
    model.compile()
    loss = model.default_loss()
    assert isinstance(loss, keras.losses.BinaryCrossentropy)
    assert loss.get_config()["from_logits"]
    logits = head_by_hand(model, TEXTS)
    # The mean over texts and labels of -y log p - (1 - y) log (1 - p), stable form.
    expected = np.mean(np.maximum(logits, 0) - logits * MULTI_HOT + np.log1p(np.exp(-abs(logits))))
    results = model.evaluate(TEXTS, LABELS, batch_size=6, verbose=0, return_dict=True)
    assert results["loss"] == pytest.approx(expected, rel=1e-5)
    predicted = sigmoid(logits) > 0.5
    assert results["binary_accuracy"] == pytest.approx(np.mean(predicted == MULTI_HOT), abs=1e-6)
    assert results["f1_micro"] == pytest.approx(
        f1_score(MULTI_HOT, predicted, average="micro"), abs=1e-6
    )


def test_streaming_f1_reads_logits_or_probabilities():
    rng = np.random.default_rng(2)
    true = (rng.random((40, 4)) < 0.4).astype(np.float32)
    logits = rng.normal(0, 2, (40, 4)).astype(np.float32)
    for average in ("micro", "macro"):
        from_logits = MultiLabelF1(average)
        from_probabilities = MultiLabelF1(average, threshold=0.5, from_logits=False)
        for start in range(0, 40, 16):  # streamed over batches
            from_logits.update_state(true[start : start + 16], logits[start : start + 16])
            from_probabilities.update_state(
                true[start : start + 16], sigmoid(logits[start : start + 16])
            )
        reference = f1_score(true, sigmoid(logits) > 0.5, average=average, zero_division=0)
        assert float(from_logits.result()) == pytest.approx(reference, abs=1e-6)
        assert float(from_probabilities.result()) == pytest.approx(reference, abs=1e-6)
        assert from_logits.name == f"f1_{average}"
        again = MultiLabelF1.from_config(from_logits.get_config())
        assert again.from_logits and again.average == average


def test_names_multi_hot_rows_and_datasets_train_alike():
    """Label names per text and multi-hot rows are the same targets, and a
    tf.data.Dataset of ragged names trains as in-memory names do: one epoch
    of each lands on the same weights."""
    by_names, by_dataset = multi_label(), multi_label()
    np.testing.assert_array_equal(by_names.encode_targets(LABELS), MULTI_HOT)
    np.testing.assert_array_equal(by_names.encode_targets(MULTI_HOT.astype(bool)), MULTI_HOT)
    np.testing.assert_array_equal(by_names.encode_targets(MULTI_HOT.tolist()), MULTI_HOT)
    for model in (by_names, by_dataset):
        model.compile(optimizer=keras.optimizers.SGD(0.5))
    by_names.fit(TEXTS, LABELS, batch_size=3, shuffle=False, verbose=0)
    ragged = tf.ragged.constant(LABELS, dtype=tf.string)
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, ragged)).batch(3)
    by_dataset.fit(dataset, shuffle=False, verbose=0)
    assert_same_weights(by_names, by_dataset)
    moved = by_names.get_layer("classifier_output").get_weights()[1]
    assert not np.allclose(moved, 0.0)  # it trained


def test_a_dataset_batch_of_names_becomes_multi_hot_rows():
    model = multi_label()
    ragged = tf.ragged.constant([["tech", "sports"], [], ["politics"]])
    np.testing.assert_array_equal(model.multi_hot_batch(ragged), [[1, 0, 1], [0, 0, 0], [0, 1, 0]])
    padded = tf.constant([["tech", ""], ["sports", "politics"]])
    np.testing.assert_array_equal(model.multi_hot_batch(padded), [[0, 0, 1], [1, 1, 0]])
    np.testing.assert_array_equal(model.multi_hot_batch(tf.constant(["tech"])), [[0, 0, 1]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels must be among"):
        model.multi_hot_batch(tf.constant([["weather"]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="hold 0 or 1"):
        model.multi_hot_batch(tf.constant([[0, 2, 1]]))


def test_a_sigmoid_activation_outputs_probabilities():
    model = multi_label(activation="sigmoid")
    assert not model.outputs_logits
    np.testing.assert_allclose(
        model.predict(TEXTS, verbose=0), model.predict_proba(TEXTS), atol=tolerance(8)
    )
    assert model.default_loss().get_config()["from_logits"] is False
    assert BertClassifier.from_config(model.get_config()).activation == "sigmoid"


def test_bad_multi_label_arguments_and_labels_say_what_to_do():
    encoder = tiny_encoder(0)
    with pytest.raises(ValueError, match="build the classifier with multi_label=True"):
        BertClassifier(encoder, 3, activation="sigmoid")
    with pytest.raises(ValueError, match="takes None \\(logits\\) or 'sigmoid'"):
        BertClassifier(encoder, 3, multi_label=True, activation="softmax")
    with pytest.raises(ValueError, match="num_classes of at least 2"):
        BertClassifier(encoder, 1, multi_label=True)
    with pytest.raises(ValueError, match="multi_label must be True or False"):
        BertClassifier(encoder, 3, multi_label="yes")
    model = multi_label()
    model.compile()
    with pytest.raises(ValueError, match=r"shape \(6,\).*single-label.*without multi_label"):
        model.fit(TEXTS, [0, 1, 2, 0, 1, 2], verbose=0)
    with pytest.raises(ValueError, match=r"`y`\[2\]\[2\] is 2.0: multi-hot rows hold 0"):
        model.fit(TEXTS, MULTI_HOT * [1, 1, 2], verbose=0)
    with pytest.raises(ValueError, match=r"`y`\[2\]: label 'weather' is not among"):
        model.fit(TEXTS, LABELS[:2] + [["weather"]] + LABELS[3:], verbose=0)
    with pytest.raises(ValueError, match="class_weight weighs a row by its one class"):
        model.fit(TEXTS, LABELS, class_weight={0: 2.0}, verbose=0)
    with pytest.raises(ValueError, match="threshold must be a probability"):
        model.predict_labels(TEXTS, threshold=1.5)


def test_a_single_label_classifier_points_multi_hot_rows_to_multi_label():
    model = BertClassifier(
        tiny_encoder(0),
        3,
        label_names=NAMES,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=16),
    )
    model.compile()
    with pytest.raises(ValueError, match="several 1s are multi-label: build the classifier with "):
        model.fit(TEXTS, MULTI_HOT, verbose=0)
    one_hot = np.eye(3)[[0, 1, 2, 0, 1, 2]]
    with pytest.raises(ValueError, match=r"one-hot rows\? pass y.argmax\(axis=-1\)"):
        model.fit(TEXTS, one_hot, verbose=0)
    with pytest.raises(ValueError, match=r"`y`\[0\] is a list of labels.*multi_label=True"):
        model.fit(TEXTS, LABELS, verbose=0)
    with pytest.raises(ValueError, match="a threshold is for multi_label=True"):
        model.predict_labels(TEXTS, threshold=0.5)


def test_from_pretrained_takes_multi_label(tmp_path):
    model = multi_label()
    path = str(tmp_path / "model.keras")
    model.save(path)
    built = BertClassifier.from_pretrained(path, num_classes=4, multi_label=True)
    assert built.multi_label and built.num_classes == 4
    whole = BertClassifier.from_pretrained(path)  # the file's own model, head and all
    assert whole.multi_label and whole.label_names == NAMES
    # Configs written before multi_label existed read as single-label.
    config = model.get_config()
    del config["multi_label"]
    assert BertClassifier.from_config(config).multi_label is False


# Reloaded in a fresh process, it compiles as a multi-label classifier:
# tests/models/test_tasks.py (`test_a_reloaded_multi_label_classifier_compiles_as_one`).
