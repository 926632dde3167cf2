"""Requests as TensorFlow Serving receives them map onto the exported signatures:
gRPC `PredictRequest`, `ClassificationRequest` and
`RegressionRequest` protos built with `tensorflow-serving-api`, and the REST
API's JSON (row and columnar formats) shown in docs/guides/serving.md.

No model server runs here (TensorFlow Serving is a Docker image / C++ binary);
the functions below do what it does between the wire and the SavedModel, after
tensorflow_serving/servables/tensorflow/{predict_util,classifier,regressor}.cc
and the REST API reference: pick the signature, check the input names, fill a
left-out input from the SignatureDef's defaults, convert the tensors, validate
the Classify / Regress signature and output shapes, build the response.
"""

import base64
import json

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("tensorflow_serving", reason="pip install tensorflow-serving-api")
from export_helpers import (  # noqa: E402
    CLASS_NAMES,
    MULTI_LABEL_TEXTS,
    TOPICS,
    call,
    loaded,
    signature_defs,
)
from tensorflow_serving.apis import classification_pb2, predict_pb2, regression_pb2  # noqa: E402

# === What the model server does ===


def predict(kind, request):
    """PredictRequest -> PredictResponse, as predict_util.cc's RunPredict."""
    name = request.model_spec.signature_name or "serving_default"
    signature = signature_defs(kind)[name]
    unknown = set(request.inputs) - set(signature.inputs)
    if unknown:
        raise ValueError(f"input(s) {sorted(unknown)} not in signature {name}")
    inputs = {}
    for alias in signature.inputs:
        if alias in request.inputs:
            proto = request.inputs[alias]
        elif alias in signature.defaults:  # left out: the SignatureDef's default
            proto = signature.defaults[alias]
        else:
            raise ValueError(f"input {alias} not in request and without a default")
        inputs[alias] = tf.constant(tf.make_ndarray(proto))
    outputs = loaded(kind).signatures[name](**inputs)
    response = predict_pb2.PredictResponse()
    response.model_spec.signature_name = name
    for key in request.output_filter or outputs:
        response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key].numpy()))
    return response


def _examples_tensor(request_input):
    return tf.constant([e.SerializeToString() for e in request_input.example_list.examples])


def classify(kind, request):
    """ClassificationRequest -> ClassificationResponse, as classifier.cc."""
    name = request.model_spec.signature_name or "serving_default"
    signature = signature_defs(kind)[name]
    assert list(signature.inputs) == ["inputs"]  # PreProcessClassification's rules
    assert 1 <= len(signature.outputs) <= 2
    assert set(signature.outputs) <= {"classes", "scores"}
    outputs = loaded(kind).signatures[name](inputs=_examples_tensor(request.input))
    classes, scores = outputs.get("classes"), outputs.get("scores")
    count = len(request.input.example_list.examples)
    for tensor, dtype in ((classes, tf.string), (scores, tf.float32)):
        if tensor is not None:  # PostProcessClassificationResult's checks
            assert tensor.shape.rank == 2 and tensor.dtype == dtype and tensor.shape[0] == count
    response = classification_pb2.ClassificationResponse()
    for row in range(count):
        classifications = response.result.classifications.add()
        for column in range(scores.shape[1]):
            entry = classifications.classes.add()
            entry.label = classes[row, column].numpy().decode("utf-8")
            entry.score = float(scores[row, column])
    return response


def regress(kind, request):
    """RegressionRequest -> RegressionResponse, as regressor.cc."""
    name = request.model_spec.signature_name or "serving_default"
    signature = signature_defs(kind)[name]
    assert list(signature.inputs) == ["inputs"] and list(signature.outputs) == ["outputs"]
    outputs = loaded(kind).signatures[name](inputs=_examples_tensor(request.input))["outputs"]
    count = len(request.input.example_list.examples)
    assert outputs.dtype == tf.float32 and outputs.shape in ((count,), (count, 1))
    response = regression_pb2.RegressionResponse()
    for value in tf.reshape(outputs, [-1]).numpy():
        response.result.regressions.add().value = float(value)
    return response


def _from_json(value):
    """A JSON value of a string input: {"b64": ...} for binary, else UTF-8 text."""
    if isinstance(value, dict):
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value.encode("utf-8") if isinstance(value, str) else value


def _to_json(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    return value


def rest(kind, body):
    """POST /v1/models/NAME:predict with a JSON body -> the JSON response."""
    body = json.loads(body)
    name = body.get("signature_name", "serving_default")
    signature = signature_defs(kind)[name]
    aliases = list(signature.inputs)
    if "instances" in body:  # row format: one object (or bare value) per example
        rows = body["instances"]
        if rows and (not isinstance(rows[0], dict) or set(rows[0]) == {"b64"}):
            assert len(aliases) == 1, "bare instances need a one-input signature"
            rows = [{aliases[0]: row} for row in rows]
        columns = {key: [_from_json(row[key]) for row in rows] for key in (rows[0] if rows else {})}
    else:  # columnar format
        columns = body["inputs"]
        if not isinstance(columns, dict):
            columns = {aliases[0]: columns}
        columns = {key: _from_json(value) for key, value in columns.items()}
    unknown = set(columns) - set(aliases)
    if unknown:
        raise ValueError(f"input(s) {sorted(unknown)} not in signature {name}")
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = name
    for key, value in columns.items():
        dtype = tf.dtypes.as_dtype(signature.inputs[key].dtype)
        request.inputs[key].CopyFrom(
            tf.make_tensor_proto(np.array(value, dtype=dtype.as_numpy_dtype))
        )
    response = predict(kind, request)
    outputs = {key: tf.make_ndarray(proto) for key, proto in response.outputs.items()}
    listed = {
        key: np.vectorize(_to_json, otypes=[object])(v).tolist()
        if v.dtype == object
        else v.tolist()
        for key, v in outputs.items()
    }
    if "instances" in body:
        count = len(body["instances"])
        predictions = [{key: value[row] for key, value in listed.items()} for row in range(count)]
        if len(listed) == 1:
            predictions = [next(iter(row.values())) for row in predictions]
        return json.dumps({"predictions": predictions})
    return json.dumps({"outputs": listed if len(listed) > 1 else next(iter(listed.values()))})


# === gRPC ===


def test_predict_request_without_text_pair_uses_the_default():
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "classifier"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(["Emma is clever.", "It rained."]))
    response = predict("classifier", request)
    expected = call(
        "classifier", text=["Emma is clever.", "It rained."], text_pair=tf.constant([], tf.string)
    )
    np.testing.assert_allclose(
        tf.make_ndarray(response.outputs["probabilities"]), expected["probabilities"], atol=1e-6
    )
    assert tf.make_ndarray(response.outputs["label"]).tolist() == expected["label"].tolist()


@pytest.mark.parametrize(
    "kind, inputs",
    [
        ("classifier", {"text": ["Is it?", "Yes."], "text_pair": ["It is.", "No."]}),
        pytest.param("embeddings", {"text": ["Emma Woodhouse"]}, marks=pytest.mark.slow),
        pytest.param(
            "tagger", {"text": ["Emma Woodhouse lives in Highbury"]}, marks=pytest.mark.slow
        ),
        pytest.param(
            "squad",
            {
                "question": ["Who lives in Highbury?"],
                "context": ["Emma Woodhouse lives in Highbury, near London."],
            },
            marks=pytest.mark.slow,
        ),
    ],
)
def test_predict_request_per_task(kind, inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = kind
    request.model_spec.signature_name = "serving_default"
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    response = predict(kind, request)
    expected = call(kind, **inputs)
    assert set(response.outputs) == set(expected)
    for key, value in expected.items():
        got = tf.make_ndarray(response.outputs[key])
        if value.dtype == object:
            assert got.tolist() == value.tolist()
        else:
            np.testing.assert_allclose(got, value, atol=1e-6)


@pytest.mark.slow
def test_predict_request_on_the_ids_signature():
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = "serve_ids"
    ids = np.array([[2, 7592, 2088, 3, 0]], np.int32)  # [CLS] hello world [SEP] [PAD]
    request.inputs["input_ids"].CopyFrom(tf.make_tensor_proto(ids))
    request.inputs["input_mask"].CopyFrom(tf.make_tensor_proto((ids > 0).astype(np.int32)))
    request.inputs["segment_ids"].CopyFrom(tf.make_tensor_proto(np.zeros_like(ids)))
    request.output_filter.append("embedding")
    response = predict("embeddings", request)
    assert list(response.outputs) == ["embedding"]
    assert tf.make_ndarray(response.outputs["embedding"]).shape == (1, 32)


def _example(**features):
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode("utf-8")]))
                for key, value in features.items()
            }
        )
    )


def test_classification_request():
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "classifier"
    request.model_spec.signature_name = "serve_examples"
    for text in ("Emma is clever.", "It rained all day."):
        request.input.example_list.examples.add().CopyFrom(_example(text=text))
    response = classify("classifier", request)
    expected = call(
        "classifier",
        text=["Emma is clever.", "It rained all day."],
        text_pair=tf.constant([], tf.string),
    )["probabilities"]
    for row, classifications in enumerate(response.result.classifications):
        assert [c.label for c in classifications.classes] == CLASS_NAMES
        np.testing.assert_allclose(
            [c.score for c in classifications.classes], expected[row], atol=1e-6
        )


def test_multi_label_predict_and_classification_requests():
    """A multi-label export through the Predict API (text_pair left out: the
    SignatureDef's default) and the Classify API (every label's probability)."""
    texts = MULTI_LABEL_TEXTS[:4]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "multi_label"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts))
    response = predict("multi_label", request)
    expected = call("multi_label", text=texts, text_pair=tf.constant([], tf.string))
    assert set(response.outputs) == {"probabilities", "logits", "labels"}
    np.testing.assert_allclose(
        tf.make_ndarray(response.outputs["probabilities"]), expected["probabilities"], atol=1e-6
    )
    assert tf.make_ndarray(response.outputs["labels"]).tolist() == expected["labels"].tolist()
    classification = classification_pb2.ClassificationRequest()
    classification.model_spec.signature_name = "serve_examples"
    for text in texts:
        classification.input.example_list.examples.add().CopyFrom(_example(text=text))
    answered = classify("multi_label", classification)
    for row, classifications in enumerate(answered.result.classifications):
        assert [c.label for c in classifications.classes] == TOPICS
        np.testing.assert_allclose(
            [c.score for c in classifications.classes], expected["probabilities"][row], atol=1e-6
        )


@pytest.mark.slow
def test_regression_request():
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "regressor"
    request.model_spec.signature_name = "serve_examples"
    request.input.example_list.examples.add().CopyFrom(
        _example(text="A man is playing a guitar.", text_pair="A man plays the guitar.")
    )
    response = regress("regressor", request)
    expected = call(
        "regressor", text=["A man is playing a guitar."], text_pair=["A man plays the guitar."]
    )["score"]
    np.testing.assert_allclose([r.value for r in response.result.regressions], expected, atol=1e-6)


@pytest.mark.slow
def test_predict_api_on_serialized_examples():
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = "serve_examples"
    example = _example(question="Who lives in Highbury?", context="Emma lives in Highbury.")
    request.inputs["inputs"].CopyFrom(tf.make_tensor_proto([example.SerializeToString()]))
    response = predict("squad", request)
    expected = call(
        "squad", question=["Who lives in Highbury?"], context=["Emma lives in Highbury."]
    )
    assert tf.make_ndarray(response.outputs["answer"]).tolist() == expected["answer"].tolist()


# === REST (docs/guides/serving.md's examples) ===

REST_EXAMPLES = {
    "classifier": '{"instances": [{"text": "What a lovely day!"}, {"text": "Dull and grey."}]}',
    "classifier_pairs": '{"inputs": {"text": ["Is it raining?"], "text_pair": ["It pours."]}}',
    "embeddings": '{"instances": ["Emma Woodhouse, handsome, clever, and rich."]}',
    "tagger": '{"instances": [{"text": "Emma Woodhouse lives in Highbury"}]}',
    "squad": (
        '{"instances": [{"question": "Where does Emma live?", '
        '"context": "Emma Woodhouse lives in Highbury, near London."}]}'
    ),
    "binary": '{"instances": [{"b64": "Y2Fmw6kg/w=="}]}',  # "café \\xff": not UTF-8
}


@pytest.mark.parametrize(
    "example",
    [
        pytest.param(name, marks=() if name.startswith("classifier") else pytest.mark.slow)
        for name in sorted(REST_EXAMPLES)
    ],
)
def test_rest_examples(example):
    kind = {"classifier_pairs": "classifier", "binary": "embeddings"}.get(example, example)
    response = json.loads(rest(kind, REST_EXAMPLES[example]))
    body = json.loads(REST_EXAMPLES[example])
    if "instances" in body:
        assert len(response["predictions"]) == len(body["instances"])
        first = response["predictions"][0]
    else:
        first = {key: value[0] for key, value in response["outputs"].items()}
    if kind == "classifier":
        assert first["label"] in CLASS_NAMES and abs(sum(first["probabilities"]) - 1) < 1e-5
    elif kind == "embeddings":
        assert abs(np.linalg.norm(first) - 1) < 1e-5
    elif kind == "tagger":
        assert first["tokens"][: first["num_tokens"]] == "Emma Woodhouse lives in Highbury".split()
    else:
        context = body["instances"][0]["context"]
        assert first["answer"] == (
            context[first["start"] : first["end"]] if first["start"] >= 0 else ""
        )
