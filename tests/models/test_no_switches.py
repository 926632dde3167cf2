"""No switches: how a graph is built comes from the call's arguments, never from
attributes flipped around a call (GUIDE, "the fourth draft").

Padding removal used to be a setting each train / test / predict step turned on
and back off around its call. Under MirroredStrategy the two replica threads
did that at once, one restored the other's setting, and every later
`predict_labels` / `classify` failed on a tensor of a finished graph. Now the
steps pass `remove_padding` / `read_positions` to each call
(`TextTask.step_arguments`)."""

import ast
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf
from task_models import classifier

import keras_bert.models.encoder as encoder_module

from repo_paths import REPO_ROOT

MIRRORED = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path[:0] = sys.argv[1:]
    from task_models import classifier
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = classifier(seq_length=64)
        model.compile()
    texts, labels = ["A delight.", "A bore."], ["fresh", "rotten"]
    results = {}
    # As reported: evaluate, then the answers.
    model.evaluate(texts, labels, verbose=0)
    results["after_evaluate"] = list(model.predict_labels(["What a lovely film."]))
    # Every step in turn, then the answers again.
    model.evaluate(texts, labels, verbose=0)
    logits = model.predict(texts, verbose=0)
    features = model.preprocessor(tf.constant(texts))
    results["predict_matches_the_padded_call"] = bool(
        abs(logits - model(features, training=False).numpy()).max() < 1e-5
    )
    model.fit(texts * 4, labels * 4, epochs=1, batch_size=4, verbose=0)
    results["after_fit"] = list(model.predict_labels(["What a lovely film.", "A bore."]))
    results["proba_rows"] = model.predict_proba(texts).shape[0]
    print("RESULTS " + json.dumps(results))
""")


def test_mirrored_steps_leave_the_answers_working():
    """evaluate -> predict_labels, and evaluate -> predict -> fit ->
    predict_labels, under MirroredStrategy over 2 logical CPUs (configured
    before TensorFlow starts its devices: a process of its own)."""
    tests = os.path.join(REPO_ROOT, "tests")
    run = subprocess.run(
        [sys.executable, "-c", MIRRORED, os.path.join(tests, "models"), tests, REPO_ROOT],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULTS "))
    results = json.loads(line[len("RESULTS ") :])
    assert len(results["after_evaluate"]) == 1
    assert results["after_evaluate"][0] in ("fresh", "rotten")
    assert results["predict_matches_the_padded_call"]
    assert len(results["after_fit"]) == 2 and set(results["after_fit"]) <= {"fresh", "rotten"}
    assert results["proba_rows"] == 2


def test_the_steps_ask_for_the_unpadded_encoder_in_each_call(monkeypatch):
    """fit, evaluate and predict run the encoder unpadded, the classifier's last
    block on its pooler's row alone; the model's own call afterwards is padded."""
    seen = []
    forward = encoder_module.encoder_forward

    def spy(parts, inputs, **kwargs):
        seen.append((kwargs.get("packing") is not None, kwargs.get("read_positions") is not None))
        return forward(parts, inputs, **kwargs)

    monkeypatch.setattr(encoder_module, "encoder_forward", spy)
    model = classifier(seq_length=16)
    model.compile()
    texts, labels = ["A delight.", "A bore and a half."], ["fresh", "rotten"]
    for step in (
        lambda: model.fit(texts, labels, epochs=1, verbose=0),
        lambda: model.evaluate(texts, labels, verbose=0),
        lambda: model.predict(texts, verbose=0),
    ):
        seen.clear()
        step()
        assert seen and all(packed and read for packed, read in seen), seen
    seen.clear()
    outputs = model(model.preprocessor(tf.constant(texts)), training=False)
    assert seen == [] and np.all(np.isfinite(outputs))


# What a switch looks like in source: a context manager, or a `finally:` that
# puts attributes back (`before = self.x; self.x = ...; try: yield finally: self.x = before`).
SWITCH_PACKAGES = ("models", "layers", "kernels")


def _switches(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if "contextmanager" in ast.unparse(decorator):
                    yield f"{path}:{node.lineno}: @contextmanager {node.name}"
        if isinstance(node, ast.Try):
            for statement in node.finalbody:
                for target in getattr(statement, "targets", []):
                    if any(isinstance(t, ast.Attribute) for t in ast.walk(target)):
                        yield f"{path}:{statement.lineno}: attribute restored in finally"


def test_no_attribute_is_switched_around_a_call():
    """models/, layers/, kernels/: no context manager and no attribute put
    back in a `finally:` (the shape of a setting flipped around a call)."""
    found = []
    for package in SWITCH_PACKAGES:
        folder = os.path.join(REPO_ROOT, "keras_bert", package)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                found += _switches(os.path.join(folder, name))
    assert not found, "\n".join(found)


def test_the_scan_finds_a_switch(tmp_path):
    source = tmp_path / "switch.py"
    source.write_text(
        textwrap.dedent("""
            import contextlib

            class Setting:
                @contextlib.contextmanager
                def on(self):
                    before, self.enabled = self.enabled, True
                    try:
                        yield
                    finally:
                        self.enabled = before
        """)
    )
    assert len(list(_switches(str(source)))) == 2
