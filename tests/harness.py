"""A shared test harness in the spirit of keras-hub's TestCase: one tiny
encoder config, and `run_layer_test`, which puts a layer through what every
Keras layer must survive (shapes, a config round trip, mixed precision, one
training step).

Importable from every test module because tests/conftest.py's folder is on
sys.path (pytest's default "prepend" import mode), as tests/repo_paths.py is.
"""

import contextlib
import inspect

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


def tiny_config(**overrides):
    """The tiny encoder of the tests: hidden 32, 2 layers of 2 heads,
    feed-forward 64, a 40-token vocabulary (the `task_inputs` fixture's ids)
    and no dropout, so two runs of the same data give the same values.
    `overrides` are BertConfig fields (vocab_size=30522 for the real vocabulary)."""
    values = dict(
        vocab_size=40,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertConfig(**{**values, **overrides})


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
