"""`export_saved_model(..., precision=...)`: the encoder exported in the
precision it is named (the training rule of `keras_bert.kernels.precision`),
recorded in the export's metadata, and every form (float32, bfloat16, int8)
answering as the float32 export does, loaded in a fresh process that imports
only `tensorflow` and `tensorflow_text`.

Tolerances, from the dtype: bfloat16 keeps 8 bits of mantissa (epsilon 2^-7);
the tiny classifier's logits come out of about 12 roundings in a row (per
block: the attention's projections, scores, softmax and context, the output
projection, the feed-forward pair and two LayerNorms' inputs, over 2 blocks and
the pooler; the mixed policy keeps softmax and LayerNorm in float32), each a
relative error of up to epsilon of the logits' scale. int8: `INT8_TOLERANCE`
of test_export_options.py (1 / 255 per product, within 5 % of the logits' range).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import SEQ_LENGTH, classifier_form, keras_model, tokenizer
from test_export_options import INT8_TOLERANCE, TEXTS

from keras_bert.export import export_saved_model
from keras_bert.export.base import model_precision
from keras_bert.kernels.precision import CPU_FLAGS_ENV

from harness import tolerance

BFLOAT16_DEPTH = 12
FORMS = ("float32", "bfloat16", "int8")
PRODUCTS = ("MatMul", "BatchMatMulV2", "Einsum", "_MklMatMul", "_FusedMatMul")


@pytest.fixture(scope="module")
def exports():
    """The classifier in each form, padded to each request's longest
    (export_helpers.classifier_form, shared with test_export_options.py)."""
    return {name: classifier_form(name) for name in FORMS}


@pytest.fixture(scope="module")
def fresh_outputs(exports, tmp_path_factory):
    """Each form's serving_default answers from a process that imports only
    tensorflow and tensorflow_text (export_portability_check.py)."""
    request = tmp_path_factory.mktemp("precision_request") / "request.json"
    inputs = {"serving_default": {"text": TEXTS, "text_pair": [""] * len(TEXTS)}}
    request.write_text(
        json.dumps(
            {
                "allowed_ops": [],
                "models": {
                    name: {"path": path, "inputs": inputs} for name, path in exports.items()
                },
            }
        )
    )
    here = os.path.dirname(__file__)
    run = subprocess.run(
        [
            sys.executable,
            os.path.join(here, "export_portability_check.py"),
            "--import-tensorflow-text",
            str(request),
        ],
        capture_output=True,
        text=True,
        cwd=here,
    )
    assert run.stdout, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["_process"]["loaded_blocked_modules"] == []  # keras_bert
    return {name: report[name]["signatures"]["serving_default"]["outputs"] for name in exports}


def metadata(path):
    with open(os.path.join(path, "assets", "keras_bert_export.json"), encoding="utf-8") as f:
        return json.load(f)


def product_dtypes(path):
    """The dtypes (`T`) of every matrix product in the SavedModel's functions."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    found = set()
    for graph in saved.meta_graphs:
        for function in graph.graph_def.library.function:
            for node in function.node_def:
                if node.op in PRODUCTS and "T" in node.attr:
                    found.add(tf.dtypes.as_dtype(node.attr["T"].type).name)
    return found


def test_each_form_records_its_precision(exports):
    assert {name: metadata(path)["precision"] for name, path in exports.items()} == {
        "float32": "float32",
        "bfloat16": "bfloat16",
        "int8": "float32",
    }
    assert metadata(exports["int8"])["quantize"] == "int8"
    assert model_precision(keras_model("classifier")) == "float32"  # the model is unchanged


def test_the_bfloat16_form_multiplies_in_bfloat16(exports):
    assert "bfloat16" in product_dtypes(exports["bfloat16"])
    assert product_dtypes(exports["float32"]) == {"float32"}


@pytest.mark.parametrize("form", ["bfloat16", "int8"])
def test_each_form_answers_as_float32_in_a_fresh_process(fresh_outputs, form):
    expected = np.array(fresh_outputs["float32"]["logits"])
    got = np.array(fresh_outputs[form]["logits"])
    scale = np.abs(expected).max()
    bound = (
        tolerance(BFLOAT16_DEPTH, "bfloat16", scale)
        if form == "bfloat16"
        else INT8_TOLERANCE * (expected.max() - expected.min())
    )
    assert np.abs(got - expected).max() <= bound
    assert fresh_outputs[form]["label"] == fresh_outputs["float32"]["label"]


@pytest.mark.parametrize(
    "flags, expected",
    [("avx avx2 fma", "float32"), ("avx2 avx512_bf16 amx_bf16", "bfloat16")],
)
def test_auto_exports_what_the_cpu_multiplies_natively(tmp_path, monkeypatch, flags, expected):
    monkeypatch.setenv(CPU_FLAGS_ENV, flags)
    path = export_saved_model(
        keras_model("classifier"),
        tokenizer(),
        str(tmp_path / "auto" / "1"),
        seq_length=SEQ_LENGTH["classifier"],
        precision="auto",
    )
    assert metadata(path)["precision"] == expected


@pytest.mark.parametrize(
    "options, message",
    [
        ({"precision": "int4"}, "precision must be one of"),
        ({"precision": "mixed_bfloat16", "quantize": "int8"}, "export with one of the two"),
    ],
)
def test_bad_precisions_are_refused_by_name(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        export_saved_model(
            keras_model("classifier"), tokenizer(), str(tmp_path / "x" / "1"), **options
        )


def test_a_mixed_model_is_served_with_weights_in_its_compute_dtype(tmp_path):
    """A model trained in mixed_bfloat16, exported without `precision`: the
    same products, its weights stored as bfloat16 (no per-request casts)."""
    config = keras_model("classifier").get_config()
    config["encoder"]["config"]["dtype"] = "mixed_bfloat16"
    mixed = type(keras_model("classifier")).from_config(config)
    mixed.set_weights(keras_model("classifier").get_weights())
    path = export_saved_model(
        mixed, tokenizer(), str(tmp_path / "mixed" / "1"), seq_length=SEQ_LENGTH["classifier"]
    )
    assert metadata(path)["precision"] == "bfloat16"
    assert model_precision(mixed) == "mixed_bfloat16"


def test_the_export_command_takes_the_training_precision_flag(tmp_path, capsys):
    """`keras-bert export --mixed-precision bfloat16` of a fine-tuning output folder."""
    import shutil

    from keras_bert import cli
    from keras_bert.assets import VOCAB_FILE

    model_dir = tmp_path / "finetuned"
    model_dir.mkdir()
    keras_model("classifier").save(str(model_dir / "model.keras"))
    shutil.copy(VOCAB_FILE, model_dir / "vocab.txt")
    (model_dir / "finetune_config.json").write_text(
        json.dumps({"task": "classify", "seq_length": SEQ_LENGTH["classifier"], "lowercase": True})
    )
    output = tmp_path / "export" / "1"
    arguments = ["export", "--model-dir", str(model_dir), "--output", str(output)]
    assert cli.main([*arguments, "--mixed-precision", "bfloat16"]) == 0
    assert f"wrote {output}" in capsys.readouterr().out
    assert metadata(str(output))["precision"] == "bfloat16"
