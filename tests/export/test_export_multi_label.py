"""The export of a multi-label classifier (`BertClassifier(multi_label=True)`),
called as TensorFlow Serving and a Python user call it: a sigmoid per label
and the names above the export's threshold, checked against NumPy on the Keras
model's logits."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import (
    MULTI_LABEL_TEXTS,
    MULTI_LABEL_THRESHOLD,
    SEQ_LENGTH,
    TOPICS,
    call,
    decode,
    export_metadata,
    export_path,
    keras_features,
    keras_model,
    multi_label_classifier,
    signature_defs,
    tokenizer,
)

from keras_bert import BertClassifier
from keras_bert.export import export_saved_model

NO_PAIRS = tf.constant([], tf.string)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def expected_labels(probabilities, threshold):
    """Per row the names above the threshold, most probable first, padded with
    "" to the longest row (the signature's dense (B, M) output)."""
    rows = [
        [TOPICS[j] for j in np.argsort(-row, kind="stable") if row[j] > threshold]
        for row in probabilities
    ]
    width = max(len(row) for row in rows)
    return [row + [""] * (width - len(row)) for row in rows]


def keras_logits(texts=MULTI_LABEL_TEXTS, kind="multi_label"):
    return keras_model(kind)(keras_features(texts, kind=kind)).numpy()


def test_signatures_output_probabilities_and_the_labels_above_the_threshold():
    defs = signature_defs("multi_label")
    assert set(defs["serving_default"].outputs) == {"probabilities", "logits", "labels"}
    assert set(defs["serve_ids"].outputs) == {"probabilities", "logits", "labels"}
    assert set(defs["serve_examples"].outputs) == {"classes", "scores"}
    logits = keras_logits()
    served = call("multi_label", text=MULTI_LABEL_TEXTS, text_pair=NO_PAIRS)
    np.testing.assert_allclose(served["logits"], logits, atol=1e-5)
    probabilities = sigmoid(logits)
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    labels = decode(served["labels"]).tolist()
    assert labels == expected_labels(probabilities, MULTI_LABEL_THRESHOLD)
    counts = [sum(1 for name in row if name) for row in labels]
    assert max(counts) >= 2 and min(counts) == 0  # several, one and none per text


def test_the_export_answers_as_the_model_does():
    """Same probabilities and the same labels as `predict_proba` /
    `predict_labels` at the export's threshold (the model given the preprocessor
    the export was tokenized with)."""
    from keras_bert import BertPreprocessor

    model = keras_model("multi_label")
    with_text = BertClassifier.from_config(
        {
            **model.get_config(),
            "preprocessor": BertPreprocessor(
                tokenizer().vocab, seq_length=SEQ_LENGTH["multi_label"]
            ),
        }
    )
    with_text.set_weights(model.get_weights())
    served = call("multi_label", text=MULTI_LABEL_TEXTS, text_pair=NO_PAIRS)
    np.testing.assert_allclose(
        served["probabilities"], with_text.predict_proba(MULTI_LABEL_TEXTS), atol=1e-5
    )
    names = [[n for n in row if n] for row in decode(served["labels"]).tolist()]
    assert names == with_text.predict_labels(MULTI_LABEL_TEXTS, threshold=MULTI_LABEL_THRESHOLD)


def test_examples_and_ids_signatures():
    examples = [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[t.encode()]))
                }
            )
        ).SerializeToString()
        for t in MULTI_LABEL_TEXTS
    ]
    served = call("multi_label", "serve_examples", inputs=examples)
    probabilities = sigmoid(keras_logits())
    np.testing.assert_allclose(served["scores"], probabilities, atol=1e-5)
    assert decode(served["classes"]).tolist() == [TOPICS] * len(MULTI_LABEL_TEXTS)
    features = keras_features(MULTI_LABEL_TEXTS, kind="multi_label")
    ids = call("multi_label", "serve_ids", **{k: v.numpy() for k, v in features.items()})
    np.testing.assert_allclose(ids["probabilities"], probabilities, atol=1e-5)
    assert decode(ids["labels"]).tolist() == expected_labels(probabilities, MULTI_LABEL_THRESHOLD)


def test_a_request_where_no_label_passes_has_no_label_column():
    texts = [MULTI_LABEL_TEXTS[4]]  # its probabilities are all below the threshold
    served = call("multi_label", text=texts, text_pair=NO_PAIRS)
    assert served["labels"].shape == (1, 0)
    assert (served["probabilities"] <= MULTI_LABEL_THRESHOLD).all()


def test_metadata_and_readme_say_multi_label_and_the_threshold():
    metadata = export_metadata("multi_label")
    assert metadata["task"] == "multi_label_classification"
    assert metadata["multi_label"] is True
    assert metadata["threshold"] == MULTI_LABEL_THRESHOLD
    assert metadata["label_names"] == TOPICS
    with open(os.path.join(export_path("multi_label"), "assets.extra", "README.txt")) as f:
        readme = f.read()
    assert "serving_default(text, text_pair) -> labels, logits, probabilities" in readme


def test_a_threshold_is_refused_for_a_single_label_classifier_and_litert(tmp_path):
    with pytest.raises(ValueError, match="a threshold is for multi_label=True"):
        export_saved_model(
            keras_model("classifier"), tokenizer(), str(tmp_path / "c" / "1"), threshold=0.3
        )
    with pytest.raises(ValueError, match="threshold must be a probability"):
        export_saved_model(
            keras_model("multi_label"), tokenizer(), str(tmp_path / "m" / "1"), threshold=2
        )
    from keras_bert import BertPreprocessor
    from keras_bert.export.litert import export_litert

    model = multi_label_classifier()
    model.preprocessor = BertPreprocessor(tokenizer().vocab, seq_length=16)
    with pytest.raises(ValueError, match="export it as a SavedModel"):
        export_litert(model, str(tmp_path / "m.tflite"))


@pytest.mark.slow
def test_a_sigmoid_activation_exports_its_logits_not_probabilities_twice(tmp_path):
    """A model whose output is probabilities (activation="sigmoid") serves the
    same answers: the export starts from the logits before the activation."""
    model = multi_label_classifier(activation="sigmoid")
    path = export_saved_model(
        model, tokenizer(), str(tmp_path / "sigmoid" / "1"), seq_length=SEQ_LENGTH["multi_label"]
    )
    served = tf.saved_model.load(path).signatures["serving_default"](
        text=tf.constant(MULTI_LABEL_TEXTS), text_pair=NO_PAIRS
    )
    probabilities = model(keras_features(MULTI_LABEL_TEXTS, kind="multi_label")).numpy()
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    np.testing.assert_allclose(sigmoid(served["logits"].numpy()), probabilities, atol=1e-5)
    assert decode(served["labels"].numpy()).tolist() == expected_labels(probabilities, 0.5)


@pytest.mark.slow
def test_a_python_user_gets_the_same_answers_with_only_tensorflow_text(tmp_path):
    """Loaded in a fresh process that imports only tensorflow and
    tensorflow_text (tests/export/export_portability_check.py)."""
    from test_export_portability import run_check

    features = keras_features(MULTI_LABEL_TEXTS, kind="multi_label")
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps(
            {
                "allowed_ops": [],
                "models": {
                    "multi_label": {
                        "path": export_path("multi_label"),
                        "inputs": {
                            "serving_default": {"text": MULTI_LABEL_TEXTS, "text_pair": []},
                            "serve_ids": {k: v.numpy().tolist() for k, v in features.items()},
                        },
                    }
                },
            }
        )
    )
    report = run_check(request, "--import-tensorflow-text")
    assert report["_returncode"] == 0, report
    probabilities = sigmoid(keras_logits())
    for signature in ("serving_default", "serve_ids"):
        for called in ("outputs", "outputs_in_order"):
            there = report["multi_label"]["signatures"][signature][called]
            np.testing.assert_allclose(there["probabilities"], probabilities, atol=1e-5)
            assert there["labels"] == expected_labels(probabilities, MULTI_LABEL_THRESHOLD)


@pytest.mark.parametrize("activation", ["softmax", "sigmoid"])
def test_the_answers_start_from_the_logits_before_an_activation(activation):
    """A classifier whose outputs are probabilities is served from its logits:
    the signatures' `logits` are the output layer's, their probabilities the
    model's own outputs (traced here, not saved)."""
    from export_helpers import CLASS_NAMES, tiny_encoder

    from keras_bert.export.classifier import ClassifierServing

    if activation == "sigmoid":
        model = multi_label_classifier(activation="sigmoid")
        texts = MULTI_LABEL_TEXTS
    else:
        model = BertClassifier(
            tiny_encoder(0), len(CLASS_NAMES), label_names=CLASS_NAMES, activation="softmax"
        )
        texts = MULTI_LABEL_TEXTS[:3]
    features = keras_features(texts, kind="multi_label")
    serving = ClassifierServing(model, tokenizer(), SEQ_LENGTH["multi_label"])
    served = serving.classify(features)
    kernel, bias = model.get_layer("classifier_output").get_weights()
    pooled = model.encoder(features)["pooled_output"].numpy()
    np.testing.assert_allclose(served["logits"].numpy(), pooled @ kernel + bias, atol=1e-5)
    np.testing.assert_allclose(served["probabilities"].numpy(), model(features).numpy(), atol=1e-6)
