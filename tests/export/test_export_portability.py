"""Every exported SavedModel loads and runs in a fresh process where only
`tensorflow` and `tensorflow_text` can be imported, and uses no custom op that
TensorFlow Serving's model server does not link (issue 6, part 2).

One subprocess checks all exports at once (tests/export/export_portability_check.py).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from export_helpers import KINDS, SIGNATURES, call, export_path, keras_features

try:
    from keras_bert.export.serving_ops import SERVING_TEXT_OPS
except ImportError:  # until keras_bert/serving_ops.py lands: the ops of tensorflow-text 2.12
    SERVING_TEXT_OPS = frozenset({
        "CaseFoldUTF8", "FastWordpieceDetokenize", "FastWordpieceTokenizeWithOffsets",
        "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap", "RegexSplitWithOffsets",
        "WhitespaceTokenizeWithOffsetsV2", "WordpieceTokenizeWithOffsets"})

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


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("portability")
    request = {"allowed_ops": sorted(SERVING_TEXT_OPS), "models": {
        "newer_op": {"path": save_model_with_a_newer_op(str(folder / "newer_op" / "1")),
                     "inputs": {}}}}
    for kind in KINDS:
        inputs = dict(INPUTS[kind])
        features = {k: v.numpy().tolist() for k, v in keras_features(TEXTS, kind=kind).items()}
        inputs["serve_ids"] = features
        request["models"][kind] = {"path": export_path(kind), "inputs": inputs}
    request_file = folder / "request.json"
    request_file.write_text(json.dumps(request))
    script = os.path.join(os.path.dirname(__file__), "export_portability_check.py")
    run = subprocess.run([sys.executable, script, str(request_file)], capture_output=True,
                         text=True, timeout=600, cwd=os.path.dirname(__file__))
    assert run.stdout, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    result["_returncode"] = run.returncode
    return result


@pytest.mark.slow
def test_loads_without_keras_and_keras_bert(report):
    process = report["_process"]
    assert process["loaded_blocked_modules"] == []
    assert report["_returncode"] == 0, report


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_fresh_process_gives_the_same_outputs(report, kind):
    signatures = report[kind]["signatures"]
    assert set(signatures) >= SIGNATURES
    for signature in ("serving_default", "serve_ids"):
        inputs = INPUTS[kind][signature] if signature == "serving_default" else {
            k: np.array(v, np.int32) for k, v in keras_features(TEXTS, kind=kind).items()}
        if kind in ("classifier", "regressor") and signature == "serving_default":
            inputs = {**inputs, "text_pair": np.array(inputs["text_pair"], dtype=object)}
        here = call(kind, signature, **inputs)
        there = signatures[signature]["outputs"]
        assert set(there) == set(here)
        for name, value in here.items():
            if value.dtype == object:
                assert np.array(there[name], dtype=object).tolist() == np.vectorize(
                    lambda b: b.decode("utf-8", "replace"), otypes=[object])(value).tolist()
            else:
                np.testing.assert_allclose(np.array(there[name], dtype=value.dtype), value,
                                           atol=1e-5, err_msg=f"{kind}/{signature}/{name}")


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_custom_ops_are_all_linked_by_tensorflow_serving(report, kind):
    entry = report[kind]
    assert entry["not_allowed"] == [], entry["custom_ops"]
    assert entry["unregistered"] == []
    # The string signatures tokenize in the graph; the ids signature has no custom op.
    assert "FastWordpieceTokenizeWithOffsets" in entry["signatures"]["serving_default"]["custom_ops"]
    assert entry["signatures"]["serve_ids"]["custom_ops"] == []
    print(kind, {name: s["custom_ops"] for name, s in entry["signatures"].items()})


@pytest.mark.slow
def test_the_check_rejects_an_op_tensorflow_serving_lacks(report):
    assert report["newer_op"]["not_allowed"] == ["TFText>RoundRobinTrim"]
