"""Every exported SavedModel loads and runs in a fresh process, and uses no
custom op that TensorFlow Serving's model server does not link.

Two fresh processes (tests/export/export_portability_check.py), each checking
every export at once: one as a model server (`keras` / `keras_bert` cannot be
imported, tensorflow-text's op libraries loaded alone), one as a Python user
who imports only `tensorflow` and `tensorflow_text` (the contract
docs/guides/serving.md states: without `import tensorflow_text` the tokenizer's ops are not
registered and loading fails).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from export_helpers import KINDS, SIGNATURES, call, export_path, keras_features

from keras_bert.features import ENCODER_INPUTS

try:
    from keras_bert.export.serving_ops import SERVING_TEXT_OPS
except ImportError:  # until keras_bert/serving_ops.py lands: the ops of tensorflow-text 2.12
    SERVING_TEXT_OPS = frozenset(
        {
            "CaseFoldUTF8",
            "FastWordpieceDetokenize",
            "FastWordpieceTokenizeWithOffsets",
            "NormalizeUTF8",
            "NormalizeUTF8WithOffsetsMap",
            "RegexSplitWithOffsets",
            "WhitespaceTokenizeWithOffsetsV2",
            "WordpieceTokenizeWithOffsets",
        }
    )

TEXTS = ["Emma Woodhouse, handsome, clever, and rich.", "naïve café — 東京", ""]
INPUTS = {
    "embeddings": {"serving_default": {"text": TEXTS}},
    "classifier": {"serving_default": {"text": TEXTS, "text_pair": ["a", "b", "c"]}},
    "regressor": {"serving_default": {"text": TEXTS, "text_pair": []}},
    "tagger": {"serving_default": {"text": TEXTS}},
    "squad": {"serving_default": {"question": ["Who is rich?"] * 3, "context": TEXTS}},
}


def save_model_with_a_newer_op(path):
    """A SavedModel using `TFText>RoundRobinTrim` (tensorflow-text >= 2.13): the
    check must flag it."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    class Trim(tf.Module):
        @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)])
        def trim(self, ids):
            return tf_text.RoundRobinTrimmer(4).trim([ids, ids])[0].to_tensor()

    module = Trim()
    tf.saved_model.save(module, path, signatures={"serving_default": module.trim})
    return path


def write_request(folder, kinds, newer_op=True):
    """The check's request: these exports, with inputs for their string and ids
    signatures (each signature's inputs in its order)."""
    models = {}
    if newer_op:
        models["newer_op"] = {
            "path": save_model_with_a_newer_op(str(folder / "newer_op" / "1")),
            "inputs": {},
        }
    for kind in kinds:
        inputs = dict(INPUTS[kind])
        features = keras_features(TEXTS, kind=kind)
        inputs["serve_ids"] = {name: features[name].numpy().tolist() for name in ENCODER_INPUTS}
        models[kind] = {"path": export_path(kind), "inputs": inputs}
    path = folder / "request.json"
    path.write_text(json.dumps({"allowed_ops": sorted(SERVING_TEXT_OPS), "models": models}))
    return path


@pytest.fixture(scope="module")
def request_file(tmp_path_factory):
    return write_request(tmp_path_factory.mktemp("portability"), KINDS)


def run_check(request_file, *flags):
    script = os.path.join(os.path.dirname(__file__), "export_portability_check.py")
    run = subprocess.run(
        [sys.executable, script, *flags, str(request_file)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=os.path.dirname(__file__),
    )
    assert run.stdout, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    result["_returncode"] = run.returncode
    return result


@pytest.fixture(scope="module")
def report(request_file):
    """As on a model server: no Keras, tensorflow-text's op libraries alone."""
    return run_check(request_file)


@pytest.fixture(scope="module")
def user_report(request_file):
    """As a Python user: `import tensorflow` and `import tensorflow_text` only."""
    return run_check(request_file, "--import-tensorflow-text")


@pytest.mark.slow
def test_loads_without_keras_and_keras_bert(report):
    process = report["_process"]
    assert process["loaded_blocked_modules"] == []
    assert report["_returncode"] == 0, report


def test_a_python_user_loads_the_classifier_with_only_tensorflow_text(tmp_path):
    """The fast suite's fresh process: the classifier export (the one the fast
    suite builds) loaded and called as the docs' Python example does."""
    report = run_check(
        write_request(tmp_path, ["classifier"], newer_op=False), "--import-tensorflow-text"
    )
    assert report["_process"]["tensorflow_text_imported"]
    assert report["_process"]["loaded_blocked_modules"] == []  # keras_bert
    assert report["_returncode"] == 0, report
    assert "Op type not registered" in report["classifier"]["load_without_tensorflow_text"]


@pytest.mark.slow
def test_loads_with_only_tensorflow_and_tensorflow_text_imported(user_report):
    process = user_report["_process"]
    assert process["tensorflow_text_imported"]
    assert process["loaded_blocked_modules"] == []  # keras_bert
    assert user_report["_returncode"] == 0, user_report


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_without_tensorflow_text_loading_names_the_missing_op(user_report, kind):
    """The failure the docs' `import tensorflow_text` line prevents: TensorFlow
    names one of the export's tensorflow-text ops as not registered."""
    entry = user_report[kind]
    error = entry["load_without_tensorflow_text"]
    assert error is not None and "Op type not registered" in error, error
    assert any(f"'{op}'" in error for op in entry["custom_ops"]), (error, entry["custom_ops"])


@pytest.mark.slow
@pytest.mark.parametrize("process", ["report", "user_report"])
@pytest.mark.parametrize("kind", KINDS)
def test_fresh_process_gives_the_same_outputs(request, process, kind):
    signatures = request.getfixturevalue(process)[kind]["signatures"]
    assert set(signatures) >= SIGNATURES
    for signature in ("serving_default", "serve_ids"):
        inputs = (
            INPUTS[kind][signature]
            if signature == "serving_default"
            else {k: np.array(v, np.int32) for k, v in keras_features(TEXTS, kind=kind).items()}
        )
        if kind in ("classifier", "regressor") and signature == "serving_default":
            inputs = {**inputs, "text_pair": np.array(inputs["text_pair"], dtype=object)}
        here = call(kind, signature, **inputs)
        for called in ("outputs", "outputs_in_order"):
            there = signatures[signature][called]
            assert set(there) == set(here), called
            for name, value in here.items():
                if value.dtype == object:
                    assert (
                        np.array(there[name], dtype=object).tolist()
                        == np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(
                            value
                        ).tolist()
                    )
                else:
                    np.testing.assert_allclose(
                        np.array(there[name], dtype=value.dtype),
                        value,
                        atol=1e-5,
                        err_msg=f"{kind}/{signature}/{name}/{called}",
                    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_custom_ops_are_all_linked_by_tensorflow_serving(report, kind):
    entry = report[kind]
    assert entry["not_allowed"] == [], entry["custom_ops"]
    assert entry["unregistered"] == []
    # The string signatures tokenize in the graph; the ids signature has no custom op.
    assert (
        "FastWordpieceTokenizeWithOffsets" in entry["signatures"]["serving_default"]["custom_ops"]
    )
    assert entry["signatures"]["serve_ids"]["custom_ops"] == []
    print(kind, {name: s["custom_ops"] for name, s in entry["signatures"].items()})


@pytest.mark.slow
def test_the_check_rejects_an_op_tensorflow_serving_lacks(report):
    assert report["newer_op"]["not_allowed"] == ["TFText>RoundRobinTrim"]
