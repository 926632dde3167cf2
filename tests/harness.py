"""A shared test harness in the spirit of keras-hub's TestCase:

- configs: `tiny_config` (the tests' encoder), `small_config` (half its width,
  BERT's dropout: the fine-tuning tests'), `tolerance` (bounds from the dtype),
  `assert_same_values_and_gradients` (a fast kernel against the plain ops),
  `assert_same_gradients` (a model's, variable by variable);
- `run_layer_test`: what every Keras layer must survive (shapes, a config round
  trip, mixed precision, one training step);
- task models (keras-hub's `run_task_test` / `run_model_saving_test`):
  `run_task_test` (fit on raw text, predict, config round trip),
  `fresh_process_results` + `assert_reloaded_as_saved` (`.keras` files
  reloaded by a new Python process), `run_export_test` (the SavedModel's serving
  signature called with strings, as TensorFlow Serving calls it);
- the command and runs: `run_command` / `run_predict` (`keras-bert` in this
  process), `command_process` (in a new one), `output_locked_by_another_process`,
  `finetune_fields` / `pretrain_fields`, `write_sentiment`.

Importable from every test module because tests/conftest.py's folder is on
sys.path (pytest's default "prepend" import mode), as tests/repo_paths.py is.
"""

import contextlib
import inspect
import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert import BertConfig

# What keras.layers.Layer itself puts in a config (name, dtype, trainable, ...):
# every layer has them, none is a constructor argument of the layer under test.
BASE_LAYER_KEYS = frozenset(keras.layers.Layer().get_config())

# Mixed precision: the compute dtype each policy must give the layer.
MIXED_POLICIES = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


# === Tolerances ===
#
# Two computations of the same value that differ only in the order of their
# sums (another CPU's SIMD width, oneDNN against Eigen, a batch cut in chunks,
# two replicas) agree to about one rounding per operation on the longest path
# from input to output: |a - b| <= eps(dtype) * depth * scale, where eps is the
# dtype's machine epsilon (float32 1.19e-7, bfloat16 7.8e-3), depth counts the
# roundings (each matmul, sum, normalisation and update step adds its own, a
# sum over n terms about log2(n)), and scale is the size of the values
# compared. Write the depth, not the digits one CPU printed: AVX-512 and
# AVX2 kernels sum in another order, and a bound tuned on one fails on the other.


EPSILON = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def tolerance(depth, dtype="float32", scale=1.0):
    """The absolute tolerance for values `depth` roundings of `dtype` deep, of size `scale`."""
    return EPSILON[dtype] * depth * scale


def assert_same_values_and_gradients(ours, theirs, names, tol):
    """A fast path's outputs and gradients against the plain ops' (autodiff),
    one by one (`names`): the same dtype, equal within `tol`, relative and
    absolute."""
    for mine, reference, name in zip(ours, theirs, names, strict=True):
        assert mine.dtype == reference.dtype, name
        np.testing.assert_allclose(
            tf.cast(mine, tf.float32),
            tf.cast(reference, tf.float32),
            rtol=tol,
            atol=tol,
            err_msg=name,
        )


def assert_same_gradients(variables, gradients, expected, rtol=1e-4, atol=1e-7):
    """`gradients` against `expected`, variable by variable (a failure names
    it); a variable the loss does not reach has None in both."""
    assert [g is None for g in gradients] == [g is None for g in expected]
    for variable, got, want in zip(variables, gradients, expected, strict=True):
        if want is not None:
            np.testing.assert_allclose(
                tf.convert_to_tensor(got),
                tf.convert_to_tensor(want),
                rtol=rtol,
                atol=atol,
                err_msg=variable.path,
            )


def layer_policies(model):
    """The dtype policy names of every layer under `model` (inputs and the
    model itself left out): one name when heads compute as the encoder does."""
    return {
        layer.dtype_policy.name
        for layer in model._flatten_layers(include_self=False)
        if not isinstance(layer, keras.layers.InputLayer)
    }


def tiny_config(**overrides):
    """The tiny encoder of the tests: hidden 32, 1 layer of 2 heads,
    feed-forward 64, a 40-token vocabulary (the `task_inputs` fixture's ids)
    and no dropout, so two runs of the same data give the same values.
    `overrides` are BertConfig fields (vocab_size=30522 for the real vocabulary).
    One layer: tracing a model is most of a test's time and grows with its
    layers; what depends on the stacking (weights of layer i feeding i + 1,
    checkpoint names per layer, per-layer outputs) is tested with
    `num_hidden_layers=2` or more, named in those tests."""
    values = dict(vocab_size=40, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    values.update(intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertConfig(**{**values, **overrides})


# BERT's dropout, which tiny_config leaves out.
BERT_DROPOUT = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def small_config(dropout=0.1, **overrides):
    """tiny_config at half its width (hidden 16, feed-forward 32) and 64
    positions, with BERT's dropout (`dropout`, both kinds; 0.0 for runs that
    must take the same steps): the fine-tuning and command tests' encoder.
    `overrides` as for tiny_config."""
    values = dict(hidden_size=16, intermediate_size=32, max_position_embeddings=64)
    dropouts = dict(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return tiny_config(**{**values, **dropouts, **overrides})


@contextlib.contextmanager
def running_plain_ops(*layers):
    """These layers (and every layer inside them) run the plain ops while
    inside, their weights unchanged: the fast and the plain path of one layer
    compared on the same weights. (Users choose with `fast_kernels=False`, or
    KERAS_BERT_FAST_KERNELS=0, when a layer is built.)"""
    switched = [
        inner
        for layer in layers
        for inner in layer._flatten_layers(include_self=True)
        if hasattr(inner, "runs_fast_kernels")
    ]
    before = [inner.runs_fast_kernels for inner in switched]
    for inner in switched:
        inner.runs_fast_kernels = False
    try:
        yield
    finally:
        for inner, value in zip(switched, before):
            inner.runs_fast_kernels = value


def _call(layer, input_data, training=None):
    """input_data: a dict (the call's keyword arguments, in order, the first
    one positional, as Keras passes a layer's inputs), or one argument (an
    array, or a list such as WeightedLayerSum's layers)."""
    kwargs = {} if training is None else {"training": training}
    if isinstance(input_data, dict):
        first, *rest = input_data
        return layer(input_data[first], **{name: input_data[name] for name in rest}, **kwargs)
    return layer(input_data, **kwargs)


def _as_tensors(input_data):
    """input_data with its arrays as tf.Tensors, the tape's sources."""
    if isinstance(input_data, dict):
        return {key: tf.convert_to_tensor(x) for key, x in input_data.items()}
    if isinstance(input_data, list):
        return [tf.convert_to_tensor(x) for x in input_data]
    return tf.convert_to_tensor(input_data)


def _shapes(outputs):
    return keras.tree.map_structure(lambda x: tuple(x.shape), outputs)


def _as_shapes(structure):
    """A shape (a tuple of ints or None), or a tuple / list of them -> tuples."""
    if all(d is None or isinstance(d, int) for d in structure):
        return tuple(structure)
    return tuple(_as_shapes(s) for s in structure)


def _assert_finite(outputs, what):
    for x in keras.tree.flatten(outputs):
        values = keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))
        assert np.all(np.isfinite(values)), f"{what}: non-finite values"


def _assert_same_values(actual, expected, what):
    for a, e in zip(keras.tree.flatten(actual), keras.tree.flatten(expected), strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(e), err_msg=what
        )


def _check_config(layer_cls, init_kwargs, config):
    """get_config() returns exactly the constructor arguments: each one the
    test passed, with its value (a Keras object such as an initializer or a
    layer as `keras.saving.serialize_keras_object` writes it), and, for a
    constructor keras_bert defines, every argument it names and nothing else.
    A layer that inherits Keras' constructor (FastDense: Dense's) inherits
    its config too, which Keras leaves out arguments of (Dense's lora_rank
    while LoRA is off)."""
    own = {key: value for key, value in config.items() if key not in BASE_LAYER_KEYS}
    for key, value in init_kwargs.items():
        assert key in config, f"{layer_cls.__name__}.get_config() lacks {key!r}"
        if hasattr(value, "get_config"):  # a Keras object (initializer, layer): its serialized form
            value = keras.saving.serialize_keras_object(value)
        assert config[key] == value, (
            f"{layer_cls.__name__}.get_config()[{key!r}] is {config[key]!r}, "
            f"the constructor got {value!r}"
        )
    if "__init__" in vars(layer_cls):
        parameters = inspect.signature(layer_cls.__init__).parameters
        named = {
            name
            for name, p in parameters.items()
            if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        }
        # `*args` passes the Keras parent's arguments on (FastDense(fast_kernels=...,
        # *Dense's)): its own must be in the config, the parent's are as above.
        passes_on = any(p.kind == p.VAR_POSITIONAL for p in parameters.values())
        assert named <= set(own) if passes_on else named == set(own), (
            f"{layer_cls.__name__}.get_config() returns {sorted(own)}, "
            f"its constructor takes {sorted(named)}"
        )


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    expected_num_trainable_weights=None,
    expected_output_dtype=None,
    run_precision_test=True,
    run_training_test=True,
    check_input_gradients=True,
):
    """Builds `layer_cls(**init_kwargs)`, calls it on `input_data` and checks:

    - the output shapes (a structure of tuples for several outputs), and
      `compute_output_shape` agrees;
    - `get_config()` returns exactly the constructor arguments, and
      `from_config(get_config())` gives an equal config and, with the weights
      copied over, equal outputs;
    - under the `mixed_float16` and `mixed_bfloat16` policies, the layer's
      compute dtype is the policy's and its outputs are finite, in
      `expected_output_dtype` (default: the compute dtype; "float32" for a
      layer that returns float32 on purpose, such as logits);
    - one training step: for every trainable weight and every floating-point
      input, a gradient exists, is finite and is not all zeros (`check_input_gradients=False`
      for a layer whose outputs do not depend on its input's values).

    input_data: an array, a list (passed as one argument) or a dict (the
    call's arguments by name, the first one passed positionally).
    Returns the layer, built, for tests to check more.
    """
    name = layer_cls.__name__

    # === Shapes ===
    layer = layer_cls(**init_kwargs)
    outputs = _call(layer, input_data)
    assert _shapes(outputs) == _as_shapes(expected_output_shape), (
        f"{name} output shapes {_shapes(outputs)}, expected {expected_output_shape}"
    )
    if isinstance(input_data, dict):
        input_shapes = [tuple(np.shape(x)) for x in input_data.values()]
    else:
        input_shapes = [keras.tree.map_structure(lambda x: tuple(np.shape(x)), input_data)]
    computed = layer.compute_output_shape(*input_shapes)
    assert _as_shapes(computed) == _shapes(outputs), (
        f"{name}.compute_output_shape gives {computed}, the call {_shapes(outputs)}"
    )
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights

    # === Config round trip ===
    config = layer.get_config()
    _check_config(layer_cls, init_kwargs, config)
    restored = layer_cls.from_config(config)
    assert restored.get_config() == config, f"{name}: from_config(get_config()) changed the config"
    _call(restored, input_data)  # builds its weights
    restored.set_weights(layer.get_weights())
    _assert_same_values(
        _call(restored, input_data),
        outputs,
        f"{name}: from_config(get_config()) with the same weights",
    )
    # And through Keras' own serialization (what a saved .keras file holds).
    serialized = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(serialized) is layer_cls and serialized.get_config() == config

    # === Mixed precision ===
    if run_precision_test:
        for policy, compute_dtype in MIXED_POLICIES.items():
            mixed = layer_cls(**{**init_kwargs, "dtype": policy})
            mixed_outputs = _call(mixed, input_data)
            assert mixed.compute_dtype == compute_dtype and mixed.variable_dtype == "float32"
            for x in keras.tree.flatten(mixed_outputs):
                assert keras.backend.standardize_dtype(x.dtype) == (
                    expected_output_dtype or compute_dtype
                ), f"{name} under {policy} returns {x.dtype}"
            _assert_finite(mixed_outputs, f"{name} under {policy}")

    # === One training step ===
    if run_training_test:
        trained = layer_cls(**init_kwargs)
        _call(trained, input_data)  # builds it, so its weights exist before the tape
        watched = _as_tensors(input_data)
        inputs = [x for x in keras.tree.flatten(watched) if x.dtype.is_floating]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            # A fixed random projection of the outputs: a loss whose gradient is
            # not zero by symmetry (as the mean square of a LayerNorm's output is).
            rng = np.random.default_rng(0)
            loss = sum(
                tf.reduce_sum(tf.cast(x, "float32") * rng.normal(size=x.shape))
                for x in keras.tree.flatten(_call(trained, watched, training=True))
            )
        sources = list(trained.trainable_weights) + (inputs if check_input_gradients else [])
        gradients = tape.gradient(loss, sources)
        for source, gradient in zip(sources, gradients):
            what = getattr(source, "path", "an input")
            assert gradient is not None, f"{name}: no gradient for {what}"
            gradient = tf.convert_to_tensor(gradient)  # an embedding's IndexedSlices too
            _assert_finite(gradient, f"{name}: the gradient of {what}")
            assert np.any(gradient.numpy() != 0), f"{name}: the gradient of {what} is zero"
    return layer


# === Task models ===
#
# keras-hub's `run_task_test` / `run_model_saving_test`, for keras_bert's task
# models (classifier, tagger, span extractor, sentence encoder, feature
# extractor): a tiny task fits a few rows of raw text, predicts, survives its
# config, a `.keras` file and a SavedModel export. The answers compared are
# the model's own (random weights), so every bound is a float32 tolerance.

# Predictions of the same weights through another graph (from_config, a
# reloaded file, the SavedModel's signatures): the same products summed in
# another order, about a hundred roundings deep on a 2-layer encoder.
TASK_ATOL = tolerance(100)
FRESH_PROCESS_CHECK = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "fresh_process_check.py"
)


def assert_same_answers(got, want, what, atol=TASK_ATOL):
    """Two answers of the same model (dicts, lists, arrays, strings):
    numbers within `atol`, everything else equal."""
    got, want = (
        x.tolist() if isinstance(x, np.ndarray) and not _numeric(x) else x for x in (got, want)
    )
    if isinstance(want, dict):
        assert set(got) == set(want), f"{what}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_same_answers(got[key], want[key], f"{what}[{key!r}]", atol)
    elif isinstance(want, (list, tuple)) and not _numeric(want):
        assert len(got) == len(want), f"{what}: {len(got)} items, expected {len(want)}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same_answers(a, b, f"{what}[{i}]", atol)
    elif _numeric(want):
        np.testing.assert_allclose(
            np.asarray(got, np.float64),
            np.asarray(want, np.float64),
            rtol=0,
            atol=atol,
            err_msg=what,
        )
    else:
        assert _text(got) == _text(want), f"{what}: {got!r} != {want!r}"


def _numeric(value):
    """Numbers, or an array / (nested) list of them of one shape."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        return False
    try:
        return np.asarray(value).dtype.kind in "fiu"
    except ValueError:  # ragged: compared item by item
        return False


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _weights_by_path(model):
    return {weight.path: weight.numpy() for weight in model.weights}


def run_task_test(
    task_cls,
    init_kwargs,
    train_data,
    predict_data,
    expected_output_shape=None,
    epochs=3,
    batch_size=None,
    learning_rate=1e-3,
    run_training_test=True,
):
    """Builds `task_cls(**init_kwargs)` (a task model with its preprocessor)
    and checks, as a user meets it:

    - `predict` on raw text gives finite outputs of `expected_output_shape`
      (a shape, or a dict of them), the same as `predict` on the ids the
      model's own `preprocess_inputs` makes of that text (preprocessing
      inside the model = preprocessing outside);
    - `get_config()` holds the constructor arguments, and
      `from_config(get_config())` with the same weights predicts the same;
    - `compile()` with its default loss and `fit` on the raw text
      `train_data` (`(x, y)`, or `(x,)` for a model that needs no targets)
      for `epochs`: the loss is finite, goes down from the first epoch to
      the last, and the trainable weights change. A few rows are one batch
      (`batch_size` None: Keras' 32), so each epoch is one gradient step on
      the same loss: without dropout, a small step lowers it.

    Returns the fitted model (for saving and export tests to share).
    """
    name = task_cls.__name__
    model = task_cls(**init_kwargs)

    # === Predict on raw text ===
    outputs = model.predict(predict_data, verbose=0)
    if expected_output_shape is not None:
        assert keras.tree.map_structure(np.shape, outputs) == expected_output_shape, (
            f"{name}.predict shapes {keras.tree.map_structure(np.shape, outputs)}, "
            f"expected {expected_output_shape}"
        )
    _assert_finite(outputs, f"{name}.predict")
    features = model.preprocess_inputs(predict_data)[0]
    assert_same_answers(
        model.predict(features, verbose=0), outputs, f"{name}: predict on its preprocessed ids"
    )

    # === Config round trip ===
    config = model.get_config()
    _check_config(task_cls, init_kwargs, config)
    restored = task_cls.from_config(config)
    assert restored.get_config() == config, f"{name}: from_config(get_config()) changed the config"
    if getattr(restored, "preprocessor", None) is not None:
        # The vocabulary is an asset of a saved file, not config: given back
        # as `keras.models.load_model` gives it.
        assert not restored.preprocessor.has_vocabulary
        restored.preprocessor.set_vocabulary(model.preprocessor.vocabulary)
    restored.predict(predict_data, verbose=0)  # builds its weights
    restored.set_weights(model.get_weights())
    assert_same_answers(
        restored.predict(predict_data, verbose=0), outputs, f"{name}: from_config, same weights"
    )

    # === Fit on raw text ===
    if run_training_test:
        model.compile(optimizer=keras.optimizers.Adam(learning_rate))
        before = {w.path: w.numpy() for w in model.trainable_weights}
        history = model.fit(
            *train_data, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0
        ).history["loss"]
        assert np.all(np.isfinite(history)), f"{name}: losses {history}"
        assert history[-1] < history[0], f"{name}: the loss did not go down: {history}"
        changed = [w.path for w in model.trainable_weights if np.any(w.numpy() != before[w.path])]
        assert changed, f"{name}: fit changed no trainable weight"
    return model


def fresh_process_results(models, folder, timeout=600):
    """Saves each model (`{name: (model, inputs)}`, inputs JSON-able: a list of
    texts, a dict of lists, {"pair": [texts, pairs]} for (text, text_pair))
    to `folder/NAME.keras`; a new Python process (tests/fresh_process_check.py,
    importing only keras_bert and keras) loads every file and predicts.
    Returns {name: (expected, result)}: what this process's model answered and
    what the reloaded one did (its class, outputs, config or error)."""
    from fresh_process_check import compiled_defaults, inputs_of, jsonable

    manifest, expected = {}, {}
    for name, (model, inputs) in models.items():
        path = os.path.join(str(folder), f"{name}.keras")
        model.save(path)
        expected[name] = {
            "class": type(model).__name__,
            "outputs": jsonable(model.predict(inputs_of(inputs), verbose=0)),
            "config": json.loads(json.dumps(jsonable(model.get_config()))),
            "file": path,
        }
        # compile() with the defaults, on a copy: the model's own compile state stays.
        expected[name]["compiled"] = compiled_defaults(type(model).from_config(model.get_config()))
        manifest[name] = {"file": path, "inputs": inputs}
    manifest_path = os.path.join(str(folder), "manifest.json")
    results_path = os.path.join(str(folder), "results.json")
    with open(manifest_path, "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # keras_bert as installed
    run = subprocess.run(
        [sys.executable, FRESH_PROCESS_CHECK, manifest_path, results_path],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(folder),
        timeout=timeout,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with open(results_path, encoding="utf-8") as f:
        results = json.load(f)
    assert set(results) == set(models)
    return {name: (expected[name], results[name]) for name in models}


def assert_reloaded_as_saved(expected, result, atol=TASK_ATOL):
    """One model of `fresh_process_results`: reloaded in the new process as
    the same class, with the same config, predicting the same outputs and
    compiling with the same default loss and metrics."""
    assert result["error"] is None, result["error"][:2000]
    assert result["class"] == expected["class"]
    assert result["config"] == expected["config"], "the reloaded model's config differs"
    assert result["compiled"] == expected["compiled"], "compile() chose other defaults"
    assert_same_answers(result["outputs"], expected["outputs"], "reloaded in a fresh process", atol)


def served_signature(path, name="serving_default"):
    """The SignatureDef TensorFlow Serving reads from the SavedModel at `path`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return saved_model.meta_graphs[0].signature_def[name]


def run_export_test(
    model, path, request, model_answers, served_answers, atol=TASK_ATOL, **export_options
):
    """Exports `model` (`keras_bert.export.export_saved_model`, tokenization
    inside) to `path`; its `serving_default` SignatureDef takes exactly the
    string inputs of `request` ({input name: list of str}, what a TensorFlow
    Serving request carries); `tf.saved_model.load` and that signature, called
    with string tensors, answer as the model does: `served_answers(outputs)`
    (outputs as NumPy) equals `model_answers` (from the model's own Python
    methods). Returns the served outputs."""
    from keras_bert.export import export_saved_model

    export_saved_model(model, path, **export_options)
    signature = served_signature(path)
    assert set(signature.inputs) == set(request), (
        f"serving_default takes {sorted(signature.inputs)}, the request {sorted(request)}"
    )
    for name, tensor in signature.inputs.items():
        assert tensor.dtype == tf.string.as_datatype_enum, f"input {name} is not a string"
    function = tf.saved_model.load(path).signatures["serving_default"]
    outputs = function(**{name: tf.constant(texts, tf.string) for name, texts in request.items()})
    assert set(outputs) == set(signature.outputs)
    served = served_answers({name: value.numpy() for name, value in outputs.items()})
    assert_same_answers(served, model_answers, f"{type(model).__name__}'s export", atol)
    return outputs


# === Commands and processes ===


def command_argv(line, **values):
    """A command line as a user types it -> its arguments: `line` split at
    spaces, each `{name}` word replaced by `str(values[name])` (a path with
    spaces in it stays one argument)."""
    return [
        str(values[word[1:-1]]) if word.startswith("{") and word.endswith("}") else word
        for word in line.split()
    ]


def run_command(line, **values):
    """`keras-bert LINE` in this process (`keras_bert.cli.main`; `line` and
    `values` as for `command_argv`) -> its exit code."""
    from keras_bert import cli

    return cli.main(command_argv(line, **values))


def command_process(line, limit_file_size=None, **values_and_options):
    """`python -m keras_bert.cli LINE` in a new process (as a user's shell runs
    `keras-bert`), from the checkout -> its CompletedProcess (text).
    `values_and_options`: the `{name}` values of `line` (see `command_argv`),
    and subprocess.run options (timeout=...); `limit_file_size`: the largest
    file it may write (RLIMIT_FSIZE, bytes)."""
    import resource

    from repo_paths import REPO_ROOT

    options = {k: values_and_options.pop(k) for k in ("timeout",) if k in values_and_options}

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    return subprocess.run(
        [sys.executable, "-m", "keras_bert.cli", *command_argv(line, **values_and_options)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=limit if limit_file_size else None,
        **options,
    )


def run_predict(model_dir, inputs, output, *flags):
    """`keras-bert predict --model-dir MODEL_DIR --input INPUTS --output OUTPUT
    FLAGS` in this process -> its exit code."""
    line = "predict --model-dir {model} --input {inputs} --output {output} " + " ".join(flags)
    return run_command(line, model=model_dir, inputs=inputs, output=output)


_LOCK_HOLDER = """
import sys
from keras_bert import safe_output
with safe_output.output_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.readline()  # until the test says so
"""


@contextlib.contextmanager
def output_locked_by_another_process(folder):
    """Another Python process holds keras_bert's output lock on `folder`
    (as a running command does) while inside; yields that process's pid.
    Leaving, it lets the process go and checks it ended well."""
    from repo_paths import REPO_ROOT

    holder = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder.pid
    finally:
        holder.communicate("done\n")
    assert holder.returncode == 0, "the lock's holder failed"


# === Fine-tuning runs ===

# The fine-tuning tests' run: sentence classification on 16 tokens, batches of
# 8, no progress lines.
FINETUNE_FIELDS = dict(task="classify", seq_length=16, batch_size=8, verbose=0)


# What a finished fine-tuning run leaves in its output folder (and "logs", the
# TensorBoard files, unless tensorboard=False), sorted.
FINISHED_RUN_FILES = ["dev_results.json", "finetune_config.json", "model.keras", "vocab.txt"]


def finetune_fields(**fields):
    """FINETUNE_FIELDS with `fields` added or replaced: the keyword arguments
    of a `FinetuneConfig` (train, vocab_file, epochs, ... given by the test)."""
    return {**FINETUNE_FIELDS, **fields}


# Words around the cue of `write_sentiment`'s sentences.
SENTIMENT_FILLER = ["the", "brown", "fox", "dog", "over", "a", "jumps"]


def write_sentiment(path, n, seed):
    """A TSV (label, sentence) of `n` rows, alternately pos and neg: a
    sentence starting with `quick` is positive, with `lazy` negative, then 2
    to 8 filler words drawn by `random.Random(seed)`. Returns the path."""
    import random

    rng = random.Random(seed)
    lines = ["label\tsentence"]
    for i in range(n):
        label = ("pos", "neg")[i % 2]
        words = [rng.choice(SENTIMENT_FILLER) for _ in range(rng.randrange(2, 9))]
        words.insert(0, "quick" if label == "pos" else "lazy")
        lines.append(f"{label}\t{' '.join(words)}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


# === Pretraining runs ===

# The pretraining tests' run: 16 tokens, 4 predictions a sequence, no XLA
# compile (seconds per shape on 2 cores), no progress lines.
PRETRAIN_FIELDS = dict(seq_length=16, max_predictions_per_seq=4, jit_compile=False, verbose=0)


# A short pretraining run of the tests: 10 steps of 8 sequences, a
# checkpoint and a log record every 5.
SHORT_RUN = dict(
    batch_size=8,
    learning_rate=1e-3,
    train_steps=10,
    warmup_steps=2,
    checkpoint_every=5,
    log_every=5,
)


def pretrain_fields(**fields):
    """PRETRAIN_FIELDS with `fields` added or replaced: a pretraining
    config's fields (model, train_files, batch_size, steps ...)."""
    return {**PRETRAIN_FIELDS, **fields}


def assert_same_logs(logged, expected, metrics, what):
    """Two runs' train_log.jsonl records (lists of dicts) give each metric
    the same values step by step, to float32 summation order (two
    half-batch sums all-reduced instead of one)."""
    for metric in metrics:
        np.testing.assert_allclose(
            [r[metric] for r in logged],
            [r[metric] for r in expected],
            rtol=2e-6,
            atol=1e-6,
            err_msg=f"{what}: {metric}",
        )


# Pretraining runs of one global batch of 8, each in `folder/NAME`: on one
# device ("one"), as 2 MirroredStrategy replicas of 4 on 2 logical CPUs ("two")
# and as 2 replicas each accumulating 2 micro-batches of 2 ("accumulate").
_MIRRORED_PRETRAINING = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[2])
from keras_bert.training import pretraining
fields = json.loads(sys.argv[1])
runs = {"one": ("one_device", {}), "two": ("mirrored", {}),
        "accumulate": ("mirrored", {"batch_size": 4, "gradient_accumulation_steps": 2})}
for name in sys.argv[4].split(","):
    strategy, extra = runs[name]
    pretraining.pretrain(pretraining.load_config(
        **{**fields, **extra}, strategy=strategy, model_dir=sys.argv[3] + "/" + name,
        devices=["/cpu:0", "/cpu:1"] if strategy == "mirrored" else None))
"""


def run_mirrored_pretraining(fields, folder, timeout=600):
    """Pretrains the config `fields` (batch_size 8) one device, two replicas
    and two replicas accumulating, into folder/one, folder/two and
    folder/accumulate. Each MirroredStrategy gets a process of its own: a
    second one in a process meets the first's collectives (TF 2.20 aborts)."""
    from repo_paths import REPO_ROOT

    for runs in ("one,two", "accumulate"):
        run = subprocess.run(
            [sys.executable, "-c", _MIRRORED_PRETRAINING, json.dumps(fields), REPO_ROOT]
            + [str(folder), runs],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert run.returncode == 0, run.stdout + run.stderr


def python_script(code, *args, cwd, installed=False, timeout=300):
    """`python -c CODE ARGS` in a new process (keras_bert from this checkout,
    or as installed with `installed`), run in `cwd` to its end -> its
    CompletedProcess (text), which must exit 0."""
    from repo_paths import REPO_ROOT

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if not installed:
        env["PYTHONPATH"] = REPO_ROOT
    run = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(cwd),
        timeout=timeout,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def masked_lm_batch(seed, rows, length, predictions, vocab_size, shortest, candidates):
    """Right-padded rows of random ids ([CLS], 2, first), at least `shortest`
    real tokens each (the first row exactly that: some padding in every
    batch), `predictions` masked positions ([MASK], 4) drawn from 1 ..
    `candidates`, the last prediction of odd rows padding (position 0, weight
    0): input_ids, input_mask and the masked_lm_* features."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = rng.integers(shortest, length + 1, size=rows)
    lengths[0] = shortest
    mask = (np.arange(length)[None] < lengths[:, None]).astype(np.int32)
    original = rng.integers(5, vocab_size, size=(rows, length)).astype(np.int32)
    original[:, 0] = 2
    positions = np.stack(
        [
            np.sort(rng.choice(np.arange(1, candidates + 1), predictions, replace=False))
            for _ in range(rows)
        ]
    )
    weights = np.ones((rows, predictions), np.float32)
    weights[1::2, -1] = 0.0
    positions[1::2, -1] = 0
    ids = np.take_along_axis(original, positions, axis=1) * (weights > 0)
    input_ids = original.copy()
    np.put_along_axis(input_ids, positions, np.where(weights > 0, 4, 2), axis=1)
    return {
        "input_ids": input_ids * mask,
        "input_mask": mask,
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": ids.astype(np.int32),
        "masked_lm_weights": weights,
    }


def assert_the_samples_carry_no_gradient(pretrainer, x):
    """ELECTRA: the generator's samples are ids, so the discriminator's loss
    sends no gradient into the generator's own variables, its masked-LM loss
    does, and the token table they share learns from both."""
    import numpy as np

    shared = {id(v) for v in pretrainer.encoder.trainable_variables}
    generator_own = [
        v
        for v in pretrainer.generator_model.trainable_variables
        + pretrainer.generator_head.trainable_variables
        if id(v) not in shared
    ]
    assert len(generator_own) > 10
    with tf.GradientTape(persistent=True) as tape:
        outputs = pretrainer(x, training=True)
        labels = tf.cast(outputs["replaced_token_labels"], tf.float32)
        discriminator_loss = tf.reduce_mean(
            tf.nn.sigmoid_cross_entropy_with_logits(labels, outputs["replaced_token_logits"])
        )
        generator_loss = tf.reduce_mean(outputs["masked_lm_logits"] ** 2)
    for gradient in tape.gradient(discriminator_loss, generator_own):
        assert gradient is None or not np.any(np.asarray(tf.convert_to_tensor(gradient)))
    assert all(g is not None for g in tape.gradient(generator_loss, generator_own))
    table = pretrainer.encoder.token_embedding.embeddings
    for loss in (discriminator_loss, generator_loss):
        assert np.any(np.asarray(tf.convert_to_tensor(tape.gradient(loss, table))))


def pretrain_process(recipe, model_dir, *flags):
    """`keras-bert pretrain --config RECIPE FLAGS --set model_dir=MODEL_DIR` in
    a new process, running: its Popen (stdout and stderr together, text)."""
    from repo_paths import REPO_ROOT

    return subprocess.Popen(
        [sys.executable, "-m", "keras_bert.cli", "pretrain", "--config", str(recipe), *flags]
        + ["--set", f"model_dir={model_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def killed_and_resumed(recipe, tmp_path, step, *flags):
    """`recipe` run twice in new processes: uninterrupted in
    tmp_path/reference, and in tmp_path/interrupted SIGKILLed once a
    checkpoint at `step` or later is written, then run again there. Both
    end 0 and the rerun says it resumed where it was killed; returns that
    step and the rerun's output."""
    reference = pretrain_process(recipe, tmp_path / "reference", *flags)
    interrupted = pretrain_process(recipe, tmp_path / "interrupted", *flags)
    killed_at = kill_after_checkpoint(interrupted, tmp_path / "interrupted", step)
    resumed = pretrain_process(recipe, tmp_path / "interrupted", *flags)
    output = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, output
    assert f"at step {killed_at}" in output
    assert reference.wait(timeout=600) == 0, reference.stdout.read()
    return killed_at, output


def train_log(model_dir):
    """The records of a run's train_log.jsonl."""
    with open(os.path.join(model_dir, "train_log.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def assert_electra_resumed_as_uninterrupted(tmp_path, exported, last_step, every=10):
    """After `killed_and_resumed`: both ELECTRA exports (discriminator, and
    generator/) hold the uninterrupted run's tensors (`exported(model_dir,
    folder)` -> {name: array}), and the resumed log has each step once with
    the uninterrupted run's figures."""
    import numpy as np

    from keras_bert.models.electra_pretrainer import GENERATOR_FOLDER

    for folder in ("", GENERATOR_FOLDER):
        expected = exported(tmp_path / "reference", folder)
        actual = exported(tmp_path / "interrupted", folder)
        assert expected.keys() == actual.keys()
        for name in expected:
            np.testing.assert_allclose(actual[name], expected[name], atol=1e-6, err_msg=name)
    whole, resumed = train_log(tmp_path / "reference"), train_log(tmp_path / "interrupted")
    assert [r["step"] for r in resumed] == list(range(every, last_step + 1, every))
    for name in ("loss", "replaced_fraction", "discriminator_accuracy"):
        np.testing.assert_allclose(
            [r[name] for r in resumed], [r[name] for r in whole], rtol=1e-5, err_msg=name
        )


def kill_after_checkpoint(process, model_dir, step, timeout=300):
    """SIGKILLs the pretraining `process` once the latest checkpoint in
    `model_dir` is at `step` or later (a kill at any moment after it) and
    returns that checkpoint's step; fails if the process ends first."""
    index = os.path.join(model_dir, "checkpoints")
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        state = tf.train.get_checkpoint_state(index) if os.path.exists(index) else None
        if state and int(state.model_checkpoint_path.rsplit("-", 1)[1]) >= step:
            break
        time.sleep(0.05)
    assert process.poll() is None, "training finished before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    return int(tf.train.get_checkpoint_state(index).model_checkpoint_path.rsplit("-", 1)[1])
