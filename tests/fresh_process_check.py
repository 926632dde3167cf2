"""Loads `.keras` files as a user's fresh script would: this process imports
only `keras_bert` and `keras` (in that order: `import keras_bert` must work
before Keras exists), then `keras.models.load_model`, `predict` and `compile()` (the task's
default loss and metrics).

    python fresh_process_check.py MANIFEST.json RESULTS.json

MANIFEST: {name: {"file": path, "inputs": what to predict on}}; RESULTS: {name:
{"outputs": ..., "class": ..., "config": ..., "error": None or the message}}, compared by
tests/harness.py's `fresh_process_results` with what the models that wrote
the files answer.
"""

import json
import sys

import keras

import keras_bert  # noqa: F401  (registers keras_bert's classes with Keras)


def jsonable(value):
    """predict's outputs (arrays, dicts, lists of dicts) -> JSON values."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def inputs_of(spec):
    """JSON inputs -> what predict takes: a dict of lists stays a dict; a
    {"pair": [a, b]} becomes the (text, text_pair) tuple."""
    if isinstance(spec, dict) and set(spec) == {"pair"}:
        return tuple(spec["pair"])
    return spec


def compiled_defaults(model):
    """What `compile()` with no arguments gives the model: its loss's class
    and its metrics' names (a task model's defaults, which its config decides:
    a multi-label classifier's are BinaryCrossentropy and f1_micro)."""
    try:
        model.compile()
    except NotImplementedError:  # a model with no default loss (a feature extractor)
        return None
    if not hasattr(model, "default_metrics"):
        return None
    return {
        "loss": type(model.loss).__name__,
        "metrics": [metric.name for metric in model.default_metrics()],
    }


def main(manifest_path, results_path):
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    results = {}
    for name, entry in manifest.items():
        try:
            model = keras.models.load_model(entry["file"])
            outputs = model.predict(inputs_of(entry["inputs"]), verbose=0)
            results[name] = {
                "outputs": jsonable(outputs),
                "error": None,
                "class": type(model).__name__,
                "config": jsonable(model.get_config()),
                "compiled": compiled_defaults(model),
            }
        except Exception as e:  # reported per model, asserted by the test
            results[name] = {"outputs": None, "error": f"{type(e).__name__}: {e}"}
    with open(results_path, "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
