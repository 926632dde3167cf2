"""`export_saved_model`'s default `remove_padding` (on but for span extractors):
every signature gives the answers of the same model exported with
`remove_padding=False`, from strings and from ids, and keeps to the ops
TensorFlow Serving links.
(test_export.py checks the default exports against Keras, seqeval and Model
Garden's run_squad.)"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import SEQ_LENGTH, SQUAD_OPTIONS, keras_features, keras_model, kinds, tokenizer

from keras_bert.export import export_saved_model
from keras_bert.export.serving_ops import ops_serving_lacks

TEXTS = [
    "Emma Woodhouse, handsome, clever, and rich.",
    "naïve café — 東京",
    "",
    "She was the youngest of the two daughters of a most affectionate, indulgent "
    "father; and had, in consequence of her sister's marriage, been mistress of his "
    "house from a very early period.",
]
PAIRS = ["Was she?", "", "a b c", ""]
QUESTIONS = ["Who was clever and rich?", "Where is Highbury?"]
CONTEXTS = [
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy "
    "disposition, seemed to unite some of the best blessings of existence.",
    "Highbury, the large and populous village, almost amounting to a town, to which "
    "Hartfield belonged.",
]
# Same products over the packed rows: float32 rounding only.
TOLERANCE = 1e-5

_loaded = {}


def exported(kind, **options):
    """The `kind` export with `options` (cached per kind and options)."""
    key = (kind, tuple(sorted(options.items())))
    if key not in _loaded:
        import tempfile

        path = os.path.join(tempfile.mkdtemp(prefix="keras_bert_unpadded_"), kind, "1")
        export_saved_model(
            keras_model(kind),
            tokenizer(),
            path,
            seq_length=SEQ_LENGTH[kind],
            **(SQUAD_OPTIONS if kind == "squad" else {}),
            **options,
        )
        _loaded[key] = (path, tf.saved_model.load(path))
    return _loaded[key]


def padded(kind, **options):
    """The reference: every position, padding included, through every layer."""
    return exported(kind, remove_padding=False, **options)[1]


def run(served, signature="serving_default", **inputs):
    function = served.signatures[signature]
    specs = function.structured_input_signature[1]
    outputs = function(**{k: tf.constant(v, dtype=specs[k].dtype) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in outputs.items()}


@pytest.mark.parametrize("padding", ["max_length", "longest"])
def test_classifier_answers_from_strings_and_ids(padding):
    path, served = exported("classifier", padding=padding)
    inputs = {"text": TEXTS, "text_pair": PAIRS}
    reference = run(padded("classifier", padding=padding), **inputs)
    outputs = run(served, **inputs)
    np.testing.assert_allclose(outputs["logits"], reference["logits"], atol=TOLERANCE)
    np.testing.assert_array_equal(outputs["label"], reference["label"])
    features = {k: v.numpy() for k, v in keras_features(TEXTS, PAIRS).items()}
    by_ids = run(served, "serve_ids", **features)
    np.testing.assert_allclose(by_ids["logits"], reference["logits"], atol=TOLERANCE)
    # And the Keras model itself, as a fine-tuned model is served.
    keras_logits = keras_model("classifier")(keras_features(TEXTS, PAIRS), training=False)
    np.testing.assert_allclose(outputs["logits"], np.asarray(keras_logits), atol=TOLERANCE)
    assert ops_serving_lacks(path) == []
    with open(os.path.join(path, "assets", "keras_bert_export.json")) as f:
        metadata = json.load(f)
    assert (metadata["remove_padding"], metadata["padding"]) == (True, padding)


@pytest.mark.parametrize("kind", kinds("embeddings", "tagger", "squad"))
def test_other_tasks_give_the_same_answers(kind):
    # Span extractors keep the padding by default (their logits there are the
    # padded model's, as run_squad's softmax spans them): asked for here.
    path, served = exported(kind, **({"remove_padding": True} if kind == "squad" else {}))
    inputs = {"question": QUESTIONS, "context": CONTEXTS} if kind == "squad" else {"text": TEXTS}
    reference, outputs = run(padded(kind), **inputs), run(served, **inputs)
    assert sorted(outputs) == sorted(reference)
    for name, value in reference.items():
        if value.dtype.kind in "fc":
            np.testing.assert_allclose(outputs[name], value, atol=TOLERANCE, err_msg=name)
        else:
            np.testing.assert_array_equal(outputs[name], value, err_msg=name)
    assert ops_serving_lacks(path) == []
    with open(os.path.join(exported(kind)[0], "assets", "keras_bert_export.json")) as f:
        assert json.load(f)["remove_padding"] == (kind != "squad")


@pytest.mark.parametrize(
    "options, fields",
    [
        ({"remove_padding": "yes"}, "remove_padding must be True, False or None"),
        ({"remove_padding": True, "jit_compile": True}, "remove_padding=True with jit_compile"),
    ],
)
def test_bad_options_name_the_field(tmp_path, options, fields):
    with pytest.raises(ValueError, match=fields):
        export_saved_model(
            keras_model("classifier"),
            tokenizer(),
            str(tmp_path / "m" / "1"),
            seq_length=SEQ_LENGTH["classifier"],
            **options,
        )
    assert not (tmp_path / "m" / "1").exists()
