"""The private Keras and TensorFlow names keras_bert relies on, each checked
for what we use it for, so that a Keras upgrade fails here, naming the
keras_bert module and what would break, instead of training differently.

setup.py pins the Keras minor these pass on; moving to the next one: bump the
pin, run these and `python3 run.py tests`, fix what they name.
"""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf


def parameters(function):
    return list(inspect.signature(function).parameters)


def small_model(dropout=True):
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(3, name="inner")(inputs)
    inner = keras.Sequential([keras.layers.Dense(3, name="deep")], name="nested")
    hidden = inner(hidden)
    if dropout:
        hidden = keras.layers.Dropout(0.5, name="drop")(hidden)
    return keras.Model(inputs, keras.layers.Dense(2, name="out")(hidden))


# === keras_bert.training.checkpointing: the dropout RNG in checkpoints ===


def test_layers_list_their_seed_generators():
    message = (
        "keras_bert.training.checkpointing.dropout_seed_states reads "
        "Layer._seed_generators to save the dropout RNG: resumed runs would draw "
        "other dropout masks"
    )
    dropout = keras.layers.Dropout(0.1)
    assert isinstance(getattr(dropout, "_seed_generators", None), list), message
    assert dropout._seed_generators, message
    for generator in dropout._seed_generators:
        assert isinstance(generator, keras.random.SeedGenerator), message
        assert isinstance(generator.state, keras.Variable), message
        assert isinstance(generator.state.path, str), message
        assert isinstance(generator.state.value, tf.Variable), message  # what tf.train saves
    assert keras.layers.Dense(2)._seed_generators == [], message  # every layer has the list


def test_flatten_layers_reaches_nested_layers():
    message = (
        "keras_bert.training.checkpointing and keras_bert.models.update_step "
        "(computes_in_float16) walk Layer._flatten_layers(include_self, recursive): "
        "nested layers' dropout RNG and float16 policies would be missed"
    )
    assert parameters(keras.Layer._flatten_layers) == ["self", "include_self", "recursive"], message
    model = small_model()
    names = {layer.name for layer in model._flatten_layers(include_self=True, recursive=True)}
    assert {model.name, "inner", "nested", "deep", "drop", "out"} <= names, message
    assert {layer.name for layer in model._flatten_layers()} == names, message


def test_dropout_seed_states_are_the_dropout_rng():
    from keras_bert.training.checkpointing import dropout_seed_states

    model = small_model()
    states = dropout_seed_states(model)
    assert len(states) == 1 and isinstance(states[0], tf.Variable)
    before = states[0].numpy().copy()
    model(np.ones((2, 4), np.float32), training=True)  # a dropout draw advances it
    assert not np.array_equal(before, states[0].numpy()), (
        "the seed generator states saved in checkpoints are not what Dropout draws from"
    )


def test_dropout_seed_states_follow_the_layers_whatever_the_counters():
    from keras_bert.training.checkpointing import dropout_seed_states

    def build():
        inputs = keras.Input((4,))
        hidden = inputs
        for i in range(3):
            hidden = keras.layers.Dropout(0.5, name=f"d{i}")(hidden)
        return keras.Model(inputs, hidden)

    first = build()
    for _ in range(8):  # generator counters cross a digit (seed_generator_9, _10) between builds
        keras.random.SeedGenerator(0)
    second = build()
    for model in (first, second):
        states = dropout_seed_states(model)
        assert len(states) == 3 and all(
            state is model.get_layer(f"d{i}")._seed_generators[0].state.value
            for i, state in enumerate(states)
        )


# === keras_bert.training.optimization: AdamW and LAMB ===


class Recording(keras.optimizers.SGD):
    def __init__(self, **kwargs):
        super().__init__(learning_rate=0.1, **kwargs)
        self.calls = []

    def _clip_gradients(self, grads):
        self.calls.append(("_clip_gradients", len(grads)))
        return super()._clip_gradients(grads)

    def _apply_weight_decay(self, variables):
        self.calls.append(("_apply_weight_decay", len(variables)))
        return super()._apply_weight_decay(variables)


def test_optimizer_calls_the_clipping_and_weight_decay_hooks():
    message = (
        "keras_bert.training.optimization overrides Optimizer._clip_gradients(grads) "
        "(global-batch clipping; without it Keras clips each replica's gradient) and "
        "_apply_weight_decay(variables) (AdamW's one-pass decay; LAMB's decay inside "
        "its trust ratio)"
    )
    assert parameters(keras.optimizers.Optimizer._clip_gradients) == ["self", "grads"], message
    assert parameters(keras.optimizers.Optimizer._apply_weight_decay) == ["self", "variables"], (
        message
    )
    variables = [keras.Variable(np.ones(3, np.float32)), keras.Variable(np.ones(2, np.float32))]
    optimizer = Recording(global_clipnorm=1.0, weight_decay=0.01)
    optimizer.apply_gradients(
        [(tf.fill((3,), 5.0), variables[0]), (tf.fill((2,), 5.0), variables[1])]
    )
    assert ("_clip_gradients", 2) in optimizer.calls, message
    assert ("_apply_weight_decay", 2) in optimizer.calls, message
    # Clipping's result is what is applied: a list of gradients in, a list out.
    clipped = keras.optimizers.SGD(global_clipnorm=1.0)._clip_gradients(
        [tf.fill((3,), 5.0), tf.fill((2,), 5.0)]
    )
    assert len(clipped) == 2, message
    np.testing.assert_allclose(
        np.sqrt(sum(float(tf.reduce_sum(g * g)) for g in clipped)), 1.0, rtol=1e-5, err_msg=message
    )


def test_optimizer_moment_slots_and_their_index():
    message = (
        "keras_bert.training.optimization (AdamW.update_step, Lamb) reads "
        "_momentums / _velocities by _get_variable_index(variable), tests "
        "_use_weight_decay(variable), and Lamb builds its slots with "
        "add_optimizer_variables(var_list, names)"
    )
    variables = [
        keras.Variable(np.ones(3, np.float32), name="kernel"),
        keras.Variable(np.ones(2, np.float32), name="bias"),
    ]
    adamw = keras.optimizers.AdamW(weight_decay=0.01)
    adamw.exclude_from_weight_decay(var_names=["bias"])
    adamw.build(variables)
    for attribute in ("_momentums", "_velocities"):
        slots = getattr(adamw, attribute, None)
        assert isinstance(slots, list) and len(slots) == 2, f"{message}: {attribute}"
    for index, variable in enumerate(variables):
        assert adamw._get_variable_index(variable) == index, message
        assert adamw._momentums[index].shape == variable.shape, message
    assert adamw._use_weight_decay(variables[0]) and not adamw._use_weight_decay(variables[1]), (
        message
    )
    plain = keras.optimizers.Optimizer(learning_rate=0.1)
    plain.build(variables)
    momentums, velocities = plain.add_optimizer_variables(variables, ["momentum", "velocity"])
    assert [m.shape for m in momentums] == [v.shape for v in variables], message
    assert len(velocities) == 2, message


def test_maybe_merge_call_and_the_optimizer_strategy():
    message = (
        "keras_bert.training.optimization (AdamW._apply_weight_decay) calls "
        "tf.__internal__.distribute.interim.maybe_merge_call(fn, "
        "optimizer._distribution_strategy, variables) to decay each replica's copy"
    )
    assert parameters(tf.__internal__.distribute.interim.maybe_merge_call)[:2] == [
        "fn",
        "strategy",
    ], message
    optimizer = keras.optimizers.AdamW()
    strategy = optimizer._distribution_strategy
    assert isinstance(strategy, tf.distribute.Strategy), message
    seen = []
    tf.__internal__.distribute.interim.maybe_merge_call(
        lambda distribution, values: seen.append((distribution, values)), strategy, [1, 2]
    )
    assert len(seen) == 1 and seen[0][1] == [1, 2], message
    assert isinstance(seen[0][0], tf.distribute.Strategy), message


def test_keras_bert_optimizers_train_through_those_hooks():
    from keras_bert.training.optimization import AdamW, Lamb

    for optimizer in (
        AdamW(learning_rate=0.1, weight_decay=0.1, global_clipnorm=1.0),
        Lamb(learning_rate=0.1),
    ):
        variable = keras.Variable(np.ones(3, np.float32), name="kernel")
        optimizer.apply_gradients([(tf.fill((3,), 10.0), variable)])
        assert np.all(variable.numpy() < 1.0), type(optimizer).__name__


# === keras_bert.models.update_step: the models' own train_step ===


def test_model_loss_tracker_and_compile_metrics():
    message = (
        "keras_bert.models.update_step.UpdateStep.apply_update updates Model._loss_tracker "
        "(reported as `loss`) and Model._compile_metrics: fit would log no loss "
        "or no metrics"
    )
    model = small_model(dropout=False)
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    tracker = getattr(model, "_loss_tracker", None)
    assert isinstance(tracker, keras.metrics.Mean) and tracker.name == "loss", message
    assert any(metric is tracker for metric in model.metrics), message
    assert model._compile_metrics is not None, message
    tracker.update_state(3.0, sample_weight=2)
    assert float(tracker.result()) == 3.0, message
    model._compile_metrics.update_state(np.zeros((2, 2)), np.ones((2, 2)), None)
    assert float(model.get_metrics_result()["mae"]) == pytest.approx(1.0), message


def test_call_context_arguments_reach_a_layer_inside_a_functional_model():
    message = (
        "keras_bert.models.encoder and update_step register `remove_padding` / "
        "`read_positions` with Layer._register_call_context_args, so that a task "
        "model's call hands them to its encoder (the unpadded steps and exports): "
        "without it the steps would run padded, or fail on the arguments"
    )

    class Inner(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._register_call_context_args("flag", "positions")

        def call(self, x, flag=None, positions=None):
            if flag:
                return x * 0.0 + (2.0 if positions is None else positions)
            return x

    class Outer(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._register_call_context_args("flag", "positions")

    inputs = keras.Input((3,))
    model = Outer(inputs=inputs, outputs=keras.layers.Dense(3, name="after")(Inner()(inputs)))
    x = np.ones((2, 3), np.float32)
    bias = model.get_layer("after").bias
    bias.assign(np.ones(3, np.float32))
    model.get_layer("after").kernel.assign(np.eye(3, dtype=np.float32))
    positions = tf.fill((2, 3), 5.0)
    assert np.allclose(model(x), 2.0), message  # no arguments: the default path
    assert np.allclose(model(x, flag=True), 3.0), message
    assert np.allclose(model(x, flag=True, positions=positions), 6.0), message
    traced = tf.function(lambda v: model(v, training=False, flag=True, positions=positions))
    assert np.allclose(traced(x), 6.0), message
    assert np.allclose(model(x), 2.0), message  # nothing stays behind


# === keras_bert.kernels.dense and keras_bert.models.lora: Dense's kernel ===


def test_dense_stored_kernel_apart_from_the_lora_kernel():
    message = (
        "keras_bert.kernels.dense (FastDense.call) and keras_bert.models.lora "
        "(merged_copy) read Dense._kernel, the stored kernel, apart from `kernel`, "
        "which adds the LoRA product: adapters would be counted twice or merged wrong"
    )
    layer = keras.layers.Dense(3)
    layer.build((None, 4))
    assert layer._kernel is layer.kernel, message  # no LoRA: one variable
    layer.enable_lora(2)
    assert isinstance(layer._kernel, keras.Variable) and layer._kernel is not layer.kernel, message
    layer.lora_kernel_b.assign(np.ones((2, 3), np.float32))
    scale = layer.lora_alpha / layer.lora_rank
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer.kernel),
        layer._kernel.numpy() + scale * layer.lora_kernel_a.numpy() @ layer.lora_kernel_b.numpy(),
        rtol=1e-5,
        err_msg=message,
    )


def test_dense_int8_hooks_are_called():
    message = (
        "keras_bert.kernels.dense (FastDense) overrides Dense._int8_build(kernel_shape, "
        "config) to add its column sums and Dense._int8_call(inputs, training) to run "
        "oneDNN's int8 kernel, and reads kernel_scale / variable_serialization_spec"
    )
    assert parameters(keras.layers.Dense._int8_build) == ["self", "kernel_shape", "config"], message
    assert parameters(keras.layers.Dense._int8_call) == ["self", "inputs", "training"], message
    calls = []

    class Recording(keras.layers.Dense):
        def _int8_build(self, kernel_shape, config=None):
            calls.append("_int8_build")
            super()._int8_build(kernel_shape, config)

        def _int8_call(self, inputs, training=None):
            calls.append("_int8_call")
            return super()._int8_call(inputs, training=training)

    layer = Recording(3)
    layer.build((None, 4))
    layer.quantize("int8", type_check=False)  # a subclass: Keras checks for Dense itself
    layer(np.ones((2, 4), np.float32))
    assert calls == ["_int8_build", "_int8_call"], message
    assert layer._kernel.dtype == "int8" and layer.kernel_scale.shape == (3,), message
    assert "int8" in layer.variable_serialization_spec, message


def test_fast_dense_int8_matches_keras():
    from keras_bert.kernels.dense import FastDense

    keras.utils.set_random_seed(0)
    inputs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    fast, plain = FastDense(3), keras.layers.Dense(3)
    fast.build((None, 4))
    plain.build((None, 4))
    plain.set_weights(fast.get_weights())
    fast.quantize("int8", type_check=False)
    plain.quantize("int8")
    assert fast.kernel_column_sums.shape == (3,)  # created by its _int8_build
    np.testing.assert_allclose(fast(inputs).numpy(), plain(inputs).numpy(), rtol=2e-2, atol=2e-2)


# === elsewhere in keras_bert ===


def test_strategies_say_whether_they_span_workers():
    message = (
        "keras_bert.training.distribute.is_multi_worker calls "
        "strategy.extended._in_multi_worker_mode(): multi-worker runs would all "
        "write checkpoints as the chief"
    )
    for strategy in (tf.distribute.get_strategy(), tf.distribute.OneDeviceStrategy("/cpu:0")):
        assert callable(getattr(strategy.extended, "_in_multi_worker_mode", None)), message
        assert strategy.extended._in_multi_worker_mode() is False, message
    from tensorflow.python.distribute.collective_all_reduce_strategy import (
        CollectiveAllReduceExtended,
    )

    assert callable(getattr(CollectiveAllReduceExtended, "_in_multi_worker_mode", None)), message


def test_keras_custom_object_registry():
    import importlib

    from keras_bert._registration import REGISTRY_MODULE

    message = (
        f"keras_bert._registration registers its classes lazily in "
        f"{REGISTRY_MODULE}.GLOBAL_CUSTOM_OBJECTS: saved .keras files would not "
        "load without importing keras_bert's modules first"
    )
    registry = importlib.import_module(REGISTRY_MODULE)
    assert isinstance(getattr(registry, "GLOBAL_CUSTOM_OBJECTS", None), dict), message

    @keras.saving.register_keras_serializable(package="keras_bert_internals_test")
    class Probe(keras.layers.Layer):
        pass

    assert registry.GLOBAL_CUSTOM_OBJECTS.get("keras_bert_internals_test>Probe") is Probe, message
    del registry.GLOBAL_CUSTOM_OBJECTS["keras_bert_internals_test>Probe"]
