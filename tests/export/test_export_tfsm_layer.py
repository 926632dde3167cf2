"""Keras' `TFSMLayer(path, call_endpoint=NAME)` runs every endpoint of every
export, strings in.

TFSMLayer calls its endpoint with the inputs positionally
(`call_endpoint_fn(inputs, **kwargs)`), and a loaded signature of two or more
inputs is keyword-only; it looks NAME up as an attribute of the loaded object
first, so the export keeps each signature function there under its name. The
layer's outputs are the signatures' (what TensorFlow Serving runs), and so the
Keras model's, called alone and inside a Sequential / functional model.
"""

import functools
import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from export_helpers import (
    CLASS_NAMES,
    KINDS,
    SIGNATURES,
    decode,
    export_path,
    keras_features,
    keras_model,
    kinds,
    loaded,
    normalized_mean,
)

from keras_bert.features import ENCODER_INPUTS

TEXTS = ["Emma Woodhouse, handsome, clever, and rich.", "naïve café — 東京", "", "short"]
PAIRS = ["A second sentence.", "x", "Another one, a bit longer.", "Élan vital"]
QUESTIONS = ["Who was rich?", "Where?", "What?", "Who?"]
NO_PAIR = tf.constant([], tf.string)


@functools.lru_cache(maxsize=None)
def tfsm_layer(kind, endpoint):
    return keras.layers.TFSMLayer(export_path(kind), call_endpoint=endpoint)


def example(**features):
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
                for name, value in features.items()
            }
        )
    ).SerializeToString()


def endpoint_inputs(kind, endpoint, pairs=None):
    """The endpoint's inputs for TEXTS, in the signature's order (a dict keeps it)."""
    if endpoint == "serve_ids":
        features = (
            keras_features(QUESTIONS, TEXTS, kind)
            if kind == "squad"
            else keras_features(TEXTS, pairs, kind)
        )
        return {name: features[name] for name in ENCODER_INPUTS}
    if kind == "squad":
        if endpoint == "serve_examples":
            return {
                "inputs": tf.constant(
                    [example(question=q, context=c) for q, c in zip(QUESTIONS, TEXTS)]
                )
            }
        return {"question": tf.constant(QUESTIONS), "context": tf.constant(TEXTS)}
    if endpoint == "serve_examples":
        rows = (
            [{"text": t} for t in TEXTS]
            if pairs is None
            else [{"text": t, "text_pair": p} for t, p in zip(TEXTS, pairs)]
        )
        return {"inputs": tf.constant([example(**row) for row in rows])}
    if kind in ("classifier", "regressor"):
        return {
            "text": tf.constant(TEXTS),
            "text_pair": NO_PAIR if pairs is None else tf.constant(pairs),
        }
    return {"text": tf.constant(TEXTS)}


def through_layer(kind, endpoint, inputs):
    """TFSMLayer's call: the first input positionally, the others by name
    (a second positional argument would be TFSMLayer's `training`)."""
    first, *others = inputs
    return numpy(tfsm_layer(kind, endpoint)(inputs[first], **{k: inputs[k] for k in others}))


def numpy(outputs):
    return {name: np.asarray(value) for name, value in outputs.items()}


def assert_same(got, expected):
    assert set(got) == set(expected)
    for name, value in expected.items():
        if value.dtype == object:
            assert got[name].tolist() == value.tolist(), name
        else:
            np.testing.assert_allclose(got[name], value, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("endpoint", sorted(SIGNATURES))
@pytest.mark.parametrize("kind", kinds(*KINDS))
def test_every_endpoint_gives_the_signatures_outputs(kind, endpoint):
    inputs = endpoint_inputs(kind, endpoint)
    expected = numpy(loaded(kind).signatures[endpoint](**inputs))
    assert_same(through_layer(kind, endpoint, inputs), expected)
    # A text_pair left out takes the signature's default (single sentences), as
    # TensorFlow Serving fills it in.
    if kind in ("classifier", "regressor") and endpoint == "serving_default":
        assert_same(numpy(tfsm_layer(kind, endpoint)(inputs["text"])), expected)


@pytest.mark.parametrize("pairs", [None, PAIRS])
def test_classifier_endpoints_give_the_keras_models_answers(pairs):
    logits = keras_model("classifier")(keras_features(TEXTS, pairs)).numpy()
    for endpoint in ("serving_default", "serve_ids"):
        served = through_layer(
            "classifier", endpoint, endpoint_inputs("classifier", endpoint, pairs)
        )
        np.testing.assert_allclose(served["logits"], logits, atol=1e-5)
        np.testing.assert_allclose(served["probabilities"], tf.nn.softmax(logits), atol=1e-5)
        assert decode(served["label"]).tolist() == [CLASS_NAMES[i] for i in logits.argmax(1)]
    served = through_layer(
        "classifier", "serve_examples", endpoint_inputs("classifier", "serve_examples", pairs)
    )
    np.testing.assert_allclose(served["scores"], tf.nn.softmax(logits), atol=1e-5)


@pytest.mark.slow
def test_embeddings_endpoint_gives_the_keras_models_embedding():
    features = keras_features(TEXTS, kind="embeddings")
    expected = normalized_mean(
        keras_model("embeddings")(features)["sequence_output"], features["input_mask"]
    )
    for endpoint in ("serving_default", "serve_ids"):
        served = through_layer("embeddings", endpoint, endpoint_inputs("embeddings", endpoint))
        np.testing.assert_allclose(served["embedding"], expected, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tagger", "squad"])
def test_ids_endpoint_gives_the_keras_models_logits(kind):
    """The string endpoints equal the signatures (above), which equal the Keras
    model with seqeval's / run_squad's post-processing (test_export.py)."""
    inputs = endpoint_inputs(kind, "serve_ids")
    outputs = keras_model(kind)(inputs)
    served = through_layer(kind, "serve_ids", inputs)
    if kind == "tagger":  # padding is packed out of the encoder: its logits are 0
        real = inputs["input_mask"].numpy().astype(bool)
        np.testing.assert_allclose(served["logits"][real], outputs.numpy()[real], atol=1e-5)
    else:
        for name in ("start_logits", "end_logits"):
            np.testing.assert_allclose(served[name], outputs[name].numpy(), atol=1e-5)


def test_classifier_inside_keras_models_predict():
    logits = keras_model("classifier")(keras_features(TEXTS)).numpy()
    path = export_path("classifier")
    sequential = keras.Sequential(
        [
            keras.Input(shape=(), dtype="string"),
            keras.layers.TFSMLayer(path, call_endpoint="serving_default"),
        ]
    )
    # Keras takes strings as an object array or a tensor (its dtypes have no "<U").
    predicted = sequential.predict(np.array(TEXTS, dtype=object), batch_size=2, verbose=0)
    np.testing.assert_allclose(predicted["probabilities"], tf.nn.softmax(logits), atol=1e-5)
    assert decode(predicted["label"]).tolist() == [CLASS_NAMES[i] for i in logits.argmax(1)]

    text = keras.Input(shape=(), dtype="string", name="text")
    text_pair = keras.Input(shape=(), dtype="string", name="text_pair")
    outputs = keras.layers.TFSMLayer(path, call_endpoint="serving_default")(
        text, text_pair=text_pair
    )
    functional = keras.Model([text, text_pair], outputs["probabilities"])
    predicted = functional.predict(
        [np.array(TEXTS, dtype=object), np.array(PAIRS, dtype=object)], batch_size=2, verbose=0
    )
    pair_logits = keras_model("classifier")(keras_features(TEXTS, PAIRS)).numpy()
    np.testing.assert_allclose(predicted, tf.nn.softmax(pair_logits), atol=1e-5)


# A user's script in a fresh process, importing only TensorFlow, tensorflow-text
# and Keras: a new head on the export through TFSMLayer, trained by `fit`, on a
# frozen export and on a trainable one (its variables then train with the head).
HEAD_ON_THE_EXPORT = """
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer's ops)
import keras

path = sys.argv[1]
texts = np.array(["a fine film", "a dull one", "witty and warm", "two hours lost"], dtype=object)
labels = np.array([1, 0, 1, 0])
served = tf.saved_model.load(path).signatures["serving_default"]
expected = served(text=tf.constant(texts), text_pair=tf.constant([], tf.string))["logits"].numpy()
results = {}
for trainable in (False, True):
    keras.utils.set_random_seed(0)
    export = keras.layers.TFSMLayer(path, call_endpoint="serving_default", trainable=trainable)
    text = keras.Input(shape=(), dtype="string", name="text")
    logits = export(text)["logits"]
    head = keras.layers.Dense(2, name="head")
    model = keras.Model(text, head(logits))
    model.compile(
        optimizer=keras.optimizers.SGD(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    before = export(tf.constant(texts))["logits"].numpy()
    head_before = [w.numpy().copy() for w in head.weights]
    losses = model.fit(texts, labels, batch_size=4, epochs=5, verbose=0).history["loss"]
    after = export(tf.constant(texts))["logits"].numpy()
    prediction = model.predict(texts, verbose=0)
    results[str(trainable)] = {
        "trainable_weights": len(export.trainable_weights),
        "weights": len(export.weights),
        "losses": losses,
        "head_moved": max(float(np.abs(a - b.numpy()).max()) for a, b in zip(head_before, head.weights)),
        "before_vs_signature": float(np.abs(before - expected).max()),
        "export_moved": float(np.abs(after - before).max()),
        "prediction_vs_head": float(np.abs(prediction - head(tf.constant(after)).numpy()).max()),
    }
print(json.dumps(results))
"""


# Slow (a fresh process tracing two fits through the loaded graph, 20-90 s on 2
# cores): the fast tests above call the export through TFSMLayer inside Keras
# models; this one trains through it.
@pytest.mark.slow
def test_a_head_trains_on_the_export_through_tfsm_layer_in_a_fresh_process(tmp_path):
    script = tmp_path / "head_on_the_export.py"
    script.write_text(HEAD_ON_THE_EXPORT)
    done = subprocess.run(
        [sys.executable, str(script), export_path("classifier")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    frozen, trainable = results["False"], results["True"]
    for run in (frozen, trainable):
        assert run["losses"][-1] < run["losses"][0], run["losses"]
        assert run["head_moved"] > 0
        assert run["before_vs_signature"] <= 1e-5  # the layer is the signature
        assert run["prediction_vs_head"] <= 1e-5
    # Frozen: the export's variables are tracked, not trained.
    assert frozen["trainable_weights"] == 0 and frozen["weights"] > 0
    assert frozen["export_moved"] == 0.0
    # Trainable: they are the layer's trainable weights, as for keras.Model.export().
    assert trainable["trainable_weights"] == frozen["weights"]
    assert trainable["export_moved"] > 0
