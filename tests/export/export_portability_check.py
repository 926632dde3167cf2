"""Loads and runs exported SavedModels in a fresh process, in one of two ways:

- as on a model server (default): `keras` and `keras_bert` cannot be imported,
  and tensorflow-text's op libraries are loaded alone, the way TensorFlow
  Serving links them;
- as a Python user does (`--import-tensorflow-text`): the process imports
  `tensorflow` and `tensorflow_text` (which itself pulls in Keras) and never
  `keras_bert`. It first tries to load every model before importing
  tensorflow_text and records the error: the contract docs/guides/serving.md and each
  export's `assets.extra/README.txt` state.

Run by tests/export/test_export_portability.py in a fresh process:

    python tests/export/export_portability_check.py [--import-tensorflow-text] REQUEST.json

REQUEST.json: {"allowed_ops": [...], "models": {NAME: {"path": DIR,
"inputs": {SIGNATURE: {INPUT: list}}}}}, each signature's inputs in its order.
Prints one JSON report on stdout: per model, the custom (non-core-TensorFlow)
ops of the whole graph and of each signature, ops outside `allowed_ops`, each
signature's outputs as lists (called by name, and positionally through the
loaded object's attribute of the same name) and,
with `--import-tensorflow-text`, the error of loading it without. Exits 1 when
a blocked module got imported after all (the report says which ops are not
allowed; the calling test decides).
"""

import json
import os
import sys

IMPORT_TEXT = "--import-tensorflow-text"
IMPORTS_TEXT = IMPORT_TEXT in sys.argv[1:]
# tensorflow_text's Python package imports Keras: a user's process has it.
BLOCKED = ("keras_bert",) if IMPORTS_TEXT else ("keras", "keras_bert", "tf_keras")


# `None` in sys.modules makes `import keras` raise ImportError and
# `importlib.util.find_spec("keras")` return None: exactly as if not installed.
for _name in BLOCKED:
    sys.modules[_name] = None
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402


def graph_ops(graph_def):
    """Op types used by a GraphDef and every function in its library, minus
    calls of those functions."""
    functions = {f.signature.name for f in graph_def.library.function}
    ops = {node.op for node in graph_def.node}
    ops |= {node.op for f in graph_def.library.function for node in f.node_def}
    return ops - functions


def custom_ops(ops):
    """Ops TensorFlow itself does not register (checked before tensorflow_text loads)."""
    return sorted(op for op in ops if op_def_registry.get(op) is None)


def load_text_ops():
    """Registers tensorflow-text's kernels the way a model server links them:
    the op libraries alone. (`import tensorflow_text` itself needs Keras: its
    Python package defines Keras layers.)"""
    import glob
    import importlib.util

    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None:
        raise ImportError("tensorflow_text is not installed")
    folder = os.path.join(spec.submodule_search_locations[0], "python", "ops")
    libraries = sorted(glob.glob(os.path.join(folder, "*.so")))
    for library in libraries:
        tf.load_op_library(library)
    return [os.path.basename(library) for library in libraries]


def load_error(path):
    """The first line of the error `tf.saved_model.load(path)` raises, or None
    when it loads."""
    try:
        tf.saved_model.load(path)
    except Exception as error:  # noqa: BLE001 (the report names whatever it was)
        return f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
    return None


def saved_model_ops(path):
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return graph_ops(saved_model.meta_graphs[0].graph_def)


def main(request_file):
    with open(request_file, encoding="utf-8") as f:
        request = json.load(f)
    allowed = set(request["allowed_ops"])
    report, failed = {}, False
    # Before tensorflow_text registers its ops: which ops are not core TensorFlow.
    whole_graph = {
        name: custom_ops(saved_model_ops(model["path"]))
        for name, model in request["models"].items()
    }
    without_text_ops = {}
    if IMPORTS_TEXT:
        for name, model in request["models"].items():
            without_text_ops[name] = load_error(model["path"])
        import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)
    else:
        load_text_ops()
    for name, model in request["models"].items():
        loaded = tf.saved_model.load(model["path"])
        entry = {
            "custom_ops": whole_graph[name],
            "not_allowed": sorted(set(whole_graph[name]) - allowed),
            "unregistered": [op for op in whole_graph[name] if op_def_registry.get(op) is None],
            "signatures": {},
        }
        for signature, function in loaded.signatures.items():
            ops = graph_ops(function.graph.as_graph_def())
            result = {"custom_ops": sorted(set(ops) & set(whole_graph[name]))}
            inputs = model["inputs"].get(signature)
            if inputs is not None:
                specs = function.structured_input_signature[1]
                tensors = {
                    key: tf.constant(value, dtype=specs[key].dtype) for key, value in inputs.items()
                }
                result["outputs"] = _jsonable_dict(function(**tensors))
                # The attribute of the same name (what Keras' TFSMLayer calls), the
                # inputs in the request's order, positionally.
                result["outputs_in_order"] = _jsonable_dict(
                    getattr(loaded, signature)(*tensors.values())
                )
            entry["signatures"][signature] = result
        if IMPORTS_TEXT:
            entry["load_without_tensorflow_text"] = without_text_ops[name]
        report[name] = entry
    leaked = sorted(
        m for m, module in sys.modules.items() if m.split(".")[0] in BLOCKED and module is not None
    )
    report["_process"] = {
        "loaded_blocked_modules": leaked,
        "tensorflow_text_imported": "tensorflow_text" in sys.modules,
        "tensorflow": tf.__version__,
    }
    failed |= bool(leaked)
    print(json.dumps(report))
    return 1 if failed else 0


def _jsonable_dict(outputs):
    return {key: _jsonable(value.numpy()) for key, value in outputs.items()}


def _jsonable(array):
    if array.dtype == object:
        return (
            [_jsonable(x) if hasattr(x, "dtype") else x.decode("utf-8", "replace") for x in array]
            if array.ndim
            else array.item().decode("utf-8", "replace")
        )
    return array.tolist()


if __name__ == "__main__":
    sys.exit(main([arg for arg in sys.argv[1:] if arg != IMPORT_TEXT][0]))
