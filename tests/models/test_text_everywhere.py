"""Text wherever a Keras user passes data: `train_on_batch`, `test_on_batch`,
`predict_on_batch` and the model's call take what `fit` / `predict` take
(texts, pairs, string tensors), with `predict`'s results; a GradientTape loop
of one's own, on `preprocess_inputs`, trains as `fit` does."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from task_models import NAMES, classifier, reviews, tiny_encoder

from keras_bert import BertPreprocessor, BertSentenceEncoder
from keras_bert.assets import VOCAB_FILE
from keras_bert.models.feature_extractor import BertFeatureExtractor
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier

from harness import tolerance

# Logits of the tiny 2-layer encoder through predict's trimmed, padding-packed
# batches against the call's full-width ones: sums in another order, a few
# dozen roundings deep per layer.
CALL_TOLERANCE = tolerance(200)
TEXTS = ["a fine film , warm and witty .", "a dull one", "the quick brown fox"]
PAIRS = ["it is .", "so it seems", "over the lazy dog ."]


def close(got, expected, atol=CALL_TOLERANCE):
    keras.tree.map_structure(
        lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol),
        got,
        expected,
    )


def test_the_classifier_takes_text_in_every_entry_point():
    model = classifier()
    expected = model.predict(TEXTS, verbose=0)
    close(model.predict_on_batch(TEXTS), expected)
    close(model(TEXTS), expected)
    close(model(np.array(TEXTS, dtype=object)), expected)
    close(model(tf.constant(TEXTS)), expected)
    close(tf.function(lambda texts: model(texts))(tf.constant(TEXTS)), expected)
    close(model(inputs=TEXTS), expected)
    pairs = model.predict((TEXTS, PAIRS), verbose=0)
    close(model((TEXTS, PAIRS)), pairs)
    close(model(list(zip(TEXTS, PAIRS))), pairs)
    close(model({"text": tf.constant(TEXTS), "text_pair": tf.constant(PAIRS)}), pairs)
    close(model.predict_on_batch({"text": TEXTS, "text_pair": PAIRS}), pairs)
    # The ids still go in as before.
    features = model.preprocessor(TEXTS)
    close(model(features), expected)


def test_train_and_test_on_batch_of_text_equal_fit_and_evaluate(datasets_dir):
    texts, labels = reviews(datasets_dir, 8)
    by_batch, by_fit = classifier(), classifier()
    for model in (by_batch, by_fit):
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
    for _ in range(2):
        by_batch.train_on_batch(texts, labels)
    by_fit.fit(texts, labels, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(by_batch.weights, by_fit.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=tolerance(64), err_msg=a.path)
    assert by_batch.trained_on_pairs is False
    got = by_batch.test_on_batch(texts, labels, return_dict=True)
    expected = by_fit.evaluate(texts, labels, batch_size=8, return_dict=True, verbose=0)
    assert set(got) == set(expected)
    close(got, expected, atol=tolerance(64))
    # Class weights and sample weights apply to text as to ids.
    weights = np.linspace(0.5, 1.5, len(texts))
    by_batch.test_on_batch(texts, labels, sample_weight=weights)
    by_batch.train_on_batch(texts, labels, class_weight={0: 1.0, 1: 2.0})


def test_a_model_without_preprocessor_says_how_to_take_text():
    model = classifier(preprocessor=False)
    for call in (
        lambda: model(TEXTS),
        lambda: model.predict_on_batch(TEXTS),
        lambda: model.train_on_batch(TEXTS, [0, 1, 0]),
    ):
        with pytest.raises(ValueError, match="has no preprocessor"):
            call()


def test_the_tagger_takes_texts_and_word_lists_in_every_entry_point():
    names = ["O", "B-PER", "I-PER"]
    model = BertTokenClassifier(
        tiny_encoder(),
        label_names=names,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=16),
    )
    expected = model.predict(TEXTS, verbose=0)
    # Padded positions: the call's full-width rows against predict's (both
    # unread); the real ones agree.
    real = model.preprocessor(TEXTS)["input_mask"].numpy().astype(bool)
    for got in (
        model(TEXTS),
        model(tf.constant(TEXTS)),
        model([text.split() for text in TEXTS]),
        model.predict_on_batch(TEXTS),
    ):
        close(np.asarray(got)[real], expected[real])
    model.compile()
    words = [text.split() for text in TEXTS]
    tags = [["O"] * len(row) for row in words]
    tags[0][1] = "B-PER"
    before = model.test_on_batch(words, tags)
    for _ in range(3):
        model.train_on_batch(words, tags)
    assert model.test_on_batch(TEXTS, tags) < before


@pytest.mark.slow
def test_the_span_extractor_sentence_encoder_and_feature_extractor_take_text(datasets_dir):
    with open(os.path.join(datasets_dir, "squad_samples", "squad_v1_sample.json")) as f:
        paragraph = json.load(f)["data"][0]["paragraphs"][0]
    qas = paragraph["qas"][:2]
    x = {"question": [qa["question"] for qa in qas], "context": [paragraph["context"]] * 2}
    y = {
        "text": [qa["answers"][0]["text"] for qa in qas],
        "answer_start": [qa["answers"][0]["answer_start"] for qa in qas],
    }
    reader = BertSpanExtractor(tiny_encoder(), preprocessor=BertPreprocessor(VOCAB_FILE, 64))
    expected = reader.predict(x, verbose=0)  # one row per window
    close(reader(x), expected)
    close(reader((x["question"], x["context"])), expected)
    close(reader({name: tf.constant(rows) for name, rows in x.items()}), expected)
    close(reader.predict_on_batch(x), expected)
    with pytest.raises(ValueError, match="not on a tf.data.Dataset of text"):
        tf.function(lambda q, c: reader({"question": q, "context": c}))(
            tf.constant(x["question"]), tf.constant(x["context"])
        )
    reader.compile()
    reader.train_on_batch(x, y)
    assert np.isfinite(reader.test_on_batch(x, y)[0])

    encoder = BertSentenceEncoder(
        tiny_encoder(), pooling="mean", preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24)
    )
    embeddings = encoder.predict(TEXTS, verbose=0)
    close(encoder(TEXTS), embeddings)
    close(encoder(tf.constant(TEXTS)), embeddings)
    close(encoder.predict_on_batch(TEXTS), embeddings)
    with pytest.raises(ValueError, match="call it on each column"):
        encoder((TEXTS, PAIRS))
    encoder.compile(optimizer=keras.optimizers.Adam(1e-3))
    first = encoder.train_on_batch((TEXTS, PAIRS))
    assert encoder.test_on_batch((TEXTS, PAIRS)) < first

    features = BertFeatureExtractor(
        tiny_encoder(), num_top_layers=1, preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=16)
    )
    expected = features.predict(TEXTS, verbose=0)
    close(features(TEXTS), expected)
    close(features.predict_on_batch(TEXTS), expected)


def test_a_gradient_tape_loop_on_preprocess_inputs_trains_as_fit_does(datasets_dir):
    """The loop of docs/guides/finetuning-keras.md ("A training loop of your
    own"), on the tiny model: the same updates as `fit` on the same batches."""
    texts, labels = reviews(datasets_dir, 8)
    by_loop, by_fit = classifier(), classifier()
    # SGD: Adam's m / sqrt(v) would magnify the rounding between fit's trimmed,
    # padding-packed batches and the loop's full-width ones where v is tiny.
    optimizer = keras.optimizers.SGD(0.5)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = by_loop(x, training=True)
            loss = loss_fn(y, logits)
        gradients = tape.gradient(loss, by_loop.trainable_weights)
        optimizer.apply_gradients(zip(gradients, by_loop.trainable_weights))
        return loss

    for start in (0, 4):
        x, y, sample_weight = by_loop.preprocess_inputs(
            texts[start : start + 4], labels[start : start + 4]
        )
        assert sample_weight is None and set(x) == {"input_ids", "input_mask", "segment_ids"}
        assert list(y) == [NAMES.index(label) for label in labels[start : start + 4]]
        train_step(x, y)
    by_fit.compile(optimizer=keras.optimizers.SGD(0.5), metrics=[])
    by_fit.fit(texts, labels, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(by_loop.weights, by_fit.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=tolerance(64), err_msg=a.path)

    # Strings straight into the call under the tape: the same gradients.
    model = classifier()
    x, y, _ = model.preprocess_inputs(texts, labels)
    with tf.GradientTape(persistent=True) as tape:
        from_ids = loss_fn(y, model(x, training=True))
        from_text = loss_fn(model.encode_targets(labels), model(texts, training=True))
    for a, b in zip(
        tape.gradient(from_ids, model.trainable_weights),
        tape.gradient(from_text, model.trainable_weights),
    ):
        np.testing.assert_allclose(
            tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(), atol=tolerance(64)
        )
