"""Loads and runs exported SavedModels where only `tensorflow` and
`tensorflow_text` are installed and `keras` / `keras_bert` cannot be imported,
as on a model server.

Run by tests/export/test_export_portability.py in a fresh process:

    python tests/export/export_portability_check.py REQUEST.json

REQUEST.json: {"allowed_ops": [...], "models": {NAME: {"path": DIR,
"inputs": {SIGNATURE: {INPUT: list}}}}}. Prints one JSON report on stdout:
per model, the custom (non-core-TensorFlow) ops of the whole graph and of each
signature, ops outside `allowed_ops`, and each signature's outputs as lists.
Exits 1 when `keras` / `keras_bert` got imported after all (the report says
which ops are not allowed; the calling test decides).
"""

import json
import os
import sys

BLOCKED = ("keras", "keras_bert", "tf_keras")


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
    whole_graph = {name: custom_ops(saved_model_ops(model["path"]))
                   for name, model in request["models"].items()}
    load_text_ops()
    for name, model in request["models"].items():
        loaded = tf.saved_model.load(model["path"])
        entry = {"custom_ops": whole_graph[name],
                 "not_allowed": sorted(set(whole_graph[name]) - allowed),
                 "unregistered": [op for op in whole_graph[name] if op_def_registry.get(op) is None],
                 "signatures": {}}
        for signature, function in loaded.signatures.items():
            ops = graph_ops(function.graph.as_graph_def())
            result = {"custom_ops": sorted(set(ops) & set(whole_graph[name]))}
            inputs = model["inputs"].get(signature)
            if inputs is not None:
                specs = function.structured_input_signature[1]
                tensors = {key: tf.constant(value, dtype=specs[key].dtype)
                           for key, value in inputs.items()}
                outputs = function(**tensors)
                result["outputs"] = {key: _jsonable(value.numpy())
                                     for key, value in outputs.items()}
            entry["signatures"][signature] = result
        report[name] = entry
    leaked = sorted(m for m, module in sys.modules.items()
                    if m.split(".")[0] in BLOCKED and module is not None)
    report["_process"] = {"loaded_blocked_modules": leaked,
                          "tensorflow": tf.__version__}
    failed |= bool(leaked)
    print(json.dumps(report))
    return 1 if failed else 0


def _jsonable(array):
    if array.dtype == object:
        return [_jsonable(x) if hasattr(x, "dtype") else x.decode("utf-8", "replace")
                for x in array] if array.ndim else array.item().decode("utf-8", "replace")
    return array.tolist()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
