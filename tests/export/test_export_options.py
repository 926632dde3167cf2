"""Export options: `padding="longest"` (same outputs as padding to
seq_length), `quantize="int8"` (the float32 outputs within a stated
tolerance) and `jit_compile=True` (XLA: the same outputs); all keep to the ops
TensorFlow Serving links."""

import json
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import (
    CLASS_NAMES,
    SEQ_LENGTH,
    call,
    classifier_form,
    keras_model,
    tokenizer,
)

from keras_bert.export import export_saved_model
from keras_bert.export.serving_ops import ops_in_saved_model, ops_serving_lacks
from keras_bert.kernels.int8_dense import int8_kernel_available

TEXTS = [
    "Emma Woodhouse, handsome, clever, and rich.",
    "naïve café — 東京",
    "",
    "She was the youngest of the two daughters of a most affectionate, indulgent "
    "father; and had, in consequence of her sister's marriage, been mistress of his "
    "house from a very early period.",
]
PAIRS = ["Was she?", "", "a b c", ""]
NO_PAIR = tf.constant([], tf.string)

# int8 tolerance: each kernel column is rounded to 255 levels of its largest
# magnitude and each product's activations to 256 levels of their range (oneDNN's
# kernel, `keras_bert.kernels.int8_dense`; Keras' own path: 255 levels per row), so
# each product carries a relative error of about 1 / 255 of its operands' scale;
# over the tiny encoder's 2 blocks and head that stays within 5 % of the logits' range.
INT8_TOLERANCE = 0.05
# This file's exports: the classifier's forms (export_helpers.CLASSIFIER_FORMS).
FORMS = {"longest": "float32", "int8": "int8", "xla": "xla"}


@pytest.fixture(scope="module")
def exports():
    """The classifier padded to each request's longest: in float32, in int8,
    and compiled with XLA (export_helpers.classifier_form, shared with
    test_export_precision.py)."""
    paths = {name: classifier_form(form) for name, form in FORMS.items()}
    return {name: tf.saved_model.load(path) for name, path in paths.items()} | {"paths": paths}


def run(served, signature="serving_default", **inputs):
    outputs = served.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in outputs.items()}


def examples(texts, pairs):
    def example(text, pair):
        feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))}
        if pair:
            feature["text_pair"] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[pair.encode()])
            )
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    return [example(t, p) for t, p in zip(texts, pairs)]


@pytest.mark.parametrize("pairs", [None, PAIRS])
def test_longest_padding_gives_the_fixed_length_outputs(exports, pairs):
    inputs = {"text": TEXTS, "text_pair": pairs or NO_PAIR}
    fixed = call("classifier", **inputs)
    longest = run(exports["longest"], **inputs)
    np.testing.assert_allclose(longest["logits"], fixed["logits"], atol=1e-5)
    np.testing.assert_array_equal(longest["label"], fixed["label"])
    # and the Keras model itself, fed ids padded to seq_length
    features = tokenizer().pack(
        tf.constant(TEXTS),
        None if pairs is None else tf.constant(pairs),
        seq_length=SEQ_LENGTH["classifier"],
    )
    np.testing.assert_allclose(longest["logits"], keras_model("classifier")(features), atol=1e-5)


def test_longest_padding_per_example_pairs(exports):
    serialized = examples(TEXTS, PAIRS)
    fixed = call("classifier", "serve_examples", inputs=serialized)
    longest = run(exports["longest"], "serve_examples", inputs=serialized)
    np.testing.assert_allclose(longest["scores"], fixed["scores"], atol=1e-6)


def test_int8_is_close_to_float32(exports):
    inputs = {"text": TEXTS, "text_pair": PAIRS}
    fixed = call("classifier", **inputs)["logits"]
    quantized = run(exports["int8"], **inputs)
    scale = fixed.max() - fixed.min()
    assert np.abs(quantized["logits"] - fixed).max() <= INT8_TOLERANCE * scale
    assert quantized["label"].tolist() == call("classifier", **inputs)["label"].tolist()
    if int8_kernel_available():  # the encoder's products on oneDNN's int8 kernel
        assert "QuantizedMatMulWithBiasAndDequantize" in ops_in_saved_model(
            exports["paths"]["int8"]
        )


def test_int8_export_without_the_onednn_kernel_says_how_to_get_it(monkeypatch):
    # TensorFlow leaves oneDNN off on AVX2-only CPUs: a script's int8 export there
    # falls to Keras' products, and is told how to get oneDNN's kernel instead.
    from keras_bert.export import saved_model

    monkeypatch.setattr("keras_bert.kernels.int8_dense.int8_kernel_available", lambda: False)
    with pytest.warns(UserWarning, match="set TF_ENABLE_ONEDNN_OPTS=1 before TensorFlow"):
        saved_model._warn_without_int8_kernel()
    monkeypatch.setattr("keras_bert.kernels.int8_dense.int8_kernel_available", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        saved_model._warn_without_int8_kernel()


def test_options_are_recorded_and_keep_to_serving_ops(exports):
    for name, path in exports["paths"].items():
        assert ops_serving_lacks(path) == []
        with open(os.path.join(path, "assets", "keras_bert_export.json")) as f:
            metadata = json.load(f)
        # remove_padding defaults to on, but not with XLA (one compile per token count).
        assert (
            metadata["padding"],
            metadata["quantize"],
            metadata["jit_compile"],
            metadata["remove_padding"],
        ) == {
            "longest": ("longest", None, False, True),
            "int8": ("longest", "int8", False, True),
            "xla": ("longest", None, True, False),
        }[name]
        assert metadata["label_names"] == CLASS_NAMES


def test_xla_gives_the_same_outputs_from_strings_and_ids(exports):
    inputs = {"text": TEXTS, "text_pair": PAIRS}
    fixed = call("classifier", **inputs)
    compiled = run(exports["xla"], **inputs)
    np.testing.assert_allclose(compiled["logits"], fixed["logits"], atol=1e-5)
    np.testing.assert_array_equal(compiled["label"], fixed["label"])
    features = tokenizer().pack(
        tf.constant(TEXTS), tf.constant(PAIRS), seq_length=SEQ_LENGTH["classifier"]
    )
    by_ids = run(exports["xla"], "serve_ids", **{k: v.numpy() for k, v in features.items()})
    np.testing.assert_allclose(by_ids["logits"], fixed["logits"], atol=1e-5)


def test_xla_marks_only_the_model_function_for_compilation(exports):
    from tensorflow.core.protobuf import saved_model_pb2

    compiled = {}
    for name in ("longest", "xla"):
        proto = saved_model_pb2.SavedModel()
        with open(os.path.join(exports["paths"][name], "saved_model.pb"), "rb") as f:
            proto.ParseFromString(f.read())
        library = proto.meta_graphs[0].graph_def.library
        compiled[name] = [f.signature.name for f in library.function if f.attr["_XlaMustCompile"].b]
    assert compiled["longest"] == []
    # the model's trace alone (the signatures around it hold the string ops)
    assert compiled["xla"] and all("run_model" in name for name in compiled["xla"])


def test_quantizing_leaves_the_model_float(exports):
    model = keras_model("classifier")
    assert all(
        getattr(layer, "quantization_mode", None) is None for layer in model._flatten_layers()
    )


@pytest.mark.parametrize(
    "options, field",
    [
        ({"quantize": "int4"}, "quantize"),
        ({"padding": "shortest"}, "padding"),
        ({"padding": "longest", "length_multiple": 0}, "length_multiple"),
        ({"jit_compile": "yes"}, "jit_compile"),
        ({"quantize": "int8", "jit_compile": True}, "jit_compile"),
    ],
)
def test_bad_options_name_the_field(tmp_path, options, field):
    with pytest.raises(ValueError, match=field):
        export_saved_model(
            keras_model("classifier"),
            tokenizer(),
            str(tmp_path / "m" / "1"),
            seq_length=SEQ_LENGTH["classifier"],
            **options,
        )
    assert not (tmp_path / "m" / "1").exists()


def test_longest_padding_is_refused_for_per_piece_outputs(tmp_path):
    with pytest.raises(ValueError, match="padding='longest'"):
        export_saved_model(
            keras_model("tagger"),
            tokenizer(),
            str(tmp_path / "t" / "1"),
            seq_length=SEQ_LENGTH["tagger"],
            padding="longest",
        )
