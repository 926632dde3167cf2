"""LoRA on the task models: starts as the base model, trains only the adapters
and the head, saves and loads only those, merges into the same outputs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder
from keras_bert.kernels.dense import FastDense
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.lora import lora_projections
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier

from harness import running_plain_ops, small_config

H, F, L = 16, 32, 4
CONFIG = small_config(num_hidden_layers=L, max_position_embeddings=32)  # hidden H, feed-forward F
TASKS = {
    "classifier": lambda encoder: BertClassifier(encoder, num_classes=3),
    "tagger": lambda encoder: BertTokenClassifier(encoder, num_labels=5),
    "span_extractor": lambda encoder: BertSpanExtractor(encoder),
}


@pytest.fixture
def inputs():
    """Three rows of lengths 8, 6 and 3, the second one a pair."""
    lengths, pair_start = np.array([8, 6, 3]), np.array([8, 3, 3])
    positions = np.arange(8)[None, :]
    mask = (positions < lengths[:, None]).astype(np.int32)
    ids = np.random.default_rng(2).integers(5, 40, size=(3, 8)) * mask
    segments = ((positions >= pair_start[:, None]) & (mask == 1)).astype(np.int32)
    return {"input_ids": ids.astype(np.int32), "input_mask": mask, "segment_ids": segments}


def _outputs(model, inputs):
    return [np.asarray(t) for t in keras.tree.flatten(model(inputs, training=False))]


def _assert_outputs_close(first, second, tolerance):
    for a, b in zip(first, second, strict=True):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)


def _randomize_adapters(model, seed=1):
    """Non-zero B (A B = 0 at init would make every comparison trivial)."""
    rng = np.random.default_rng(seed)
    for layer in lora_projections(model.encoder):
        for variable in (layer.lora_kernel_a, layer.lora_kernel_b):
            variable.assign(rng.normal(0, 0.3, size=variable.shape).astype(np.float32))


def _twin(model, build):
    """The same task model on a copy of the same base encoder and head."""
    encoder = BertEncoder(CONFIG)
    base = {v.path: v for v in model.encoder.weights}
    for variable in encoder.weights:
        variable.assign(base[variable.path])
    return build(encoder)


@pytest.mark.parametrize("task", TASKS)
def test_lora_model_starts_equal_to_the_base_model(task, inputs):
    model = TASKS[task](BertEncoder(CONFIG))
    base = _outputs(model, inputs)
    model.enable_lora(4)
    assert model.lora_rank == 4
    _assert_outputs_close(_outputs(model, inputs), base, 1e-6)


def test_trainable_parameters_are_the_adapters_and_the_head():
    rank, classes = 2, 3
    model = BertClassifier(BertEncoder(CONFIG), num_classes=classes)
    model.enable_lora(rank)
    # Per block: query, key, value, attention output (H -> H), intermediate
    # (H -> F) and feed-forward output (F -> H), each r (I + O); the head H C + C.
    per_block = 4 * rank * (H + H) + rank * (H + F) + rank * (F + H)
    expected = L * per_block + H * classes + classes
    assert sum(int(np.prod(v.shape)) for v in model.trainable_weights) == expected == 1843


def test_training_changes_only_the_adapters_and_the_head(inputs):
    model = BertClassifier(BertEncoder(CONFIG), num_classes=3)
    model.enable_lora(2)
    before = {v.path: np.array(v) for v in model.weights}
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    model.fit(inputs, np.array([0, 2, 1]), epochs=3, batch_size=3, verbose=0)
    changed = {v.path for v in model.weights if not np.array_equal(np.array(v), before[v.path])}
    adapters = {
        f"{layer.path}/{name}"
        for layer in lora_projections(model.encoder)
        for name in ("lora_kernel_a", "lora_kernel_b")
    }
    assert changed == adapters | {"classifier_output/kernel", "classifier_output/bias"}


@pytest.mark.parametrize("task", TASKS)
def test_adapters_save_and_load_onto_the_same_base(task, inputs, tmp_path):
    model = TASKS[task](BertEncoder(CONFIG))
    model.enable_lora(3, alpha=6.0)
    _randomize_adapters(model)
    path = model.save_lora_weights(str(tmp_path / "adapters.npz"))
    other = _twin(model, TASKS[task])  # a fresh head: the file brings the trained one
    other.load_lora_weights(path)
    assert other.lora_rank == 3
    _assert_outputs_close(_outputs(other, inputs), _outputs(model, inputs), 0)
    # Only the adapters and the head: a fraction of the model.
    adapter_bytes = sum(v.numpy().nbytes for v in model.trainable_weights)
    model_bytes = sum(np.array(v).nbytes for v in model.weights)
    assert (tmp_path / "adapters.npz").stat().st_size < adapter_bytes + 20_000 < model_bytes


@pytest.mark.parametrize("task", TASKS)
def test_merged_model_equals_the_lora_model(task, inputs, tmp_path):
    model = TASKS[task](BertEncoder(CONFIG))
    model.enable_lora(2)
    _randomize_adapters(model)
    merged = model.merge_lora()
    assert type(merged) is type(model) and merged.lora_rank is None
    assert len(merged.weights) == len(model.weights) - 2 * 6 * L
    expected = _outputs(model, inputs)
    assert not np.allclose(expected[0], _outputs(TASKS[task](model.encoder), inputs)[0])
    _assert_outputs_close(_outputs(merged, inputs), expected, 1e-5)
    # A `.keras` file of a LoRA model holds the merged kernels (Keras' own saving).
    model.save(str(tmp_path / "model.keras"))
    loaded = keras.models.load_model(str(tmp_path / "model.keras"))
    assert loaded.lora_rank is None
    _assert_outputs_close(_outputs(loaded, inputs), expected, 1e-5)


def test_fast_lora_projection_equals_keras_lora_dense():
    """FastDense keeps the adapters apart (x W + s (x A) B); Keras' Dense merges
    W + s A B: the same values and gradients for the input, A and B."""
    rng = np.random.default_rng(0)
    layer = FastDense(24)
    layer.build((None, 5, 16))
    layer.enable_lora(3, lora_alpha=6.0)
    layer.lora_kernel_b.assign(rng.normal(size=(3, 24)).astype(np.float32))
    x = tf.constant(rng.normal(size=(2, 5, 16)), tf.float32)
    upstream = tf.constant(rng.normal(size=(2, 5, 24)), tf.float32)

    def values_and_gradients():
        @tf.function
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x)
            return y, tape.gradient(
                y, [x, layer.lora_kernel_a, layer.lora_kernel_b], output_gradients=upstream
            )

        y, gradients = run(x)
        return [y, *gradients]

    fast = values_and_gradients()
    with running_plain_ops(layer):
        plain = values_and_gradients()
    for mine, reference, name in zip(fast, plain, ("y", "d_x", "d_a", "d_b")):
        np.testing.assert_allclose(mine, reference, rtol=1e-5, atol=1e-5, err_msg=name)


def test_load_names_the_mismatch(inputs, tmp_path):
    model = BertClassifier(BertEncoder(CONFIG), num_classes=3)
    model.enable_lora(2)
    path = model.save_lora_weights(str(tmp_path / "adapters.npz"))

    other_rank = _twin(model, lambda e: BertClassifier(e, num_classes=3))
    other_rank.enable_lora(4)
    with pytest.raises(ValueError, match="rank 2 alpha 2, but the model's adapters have rank 4"):
        other_rank.load_lora_weights(path)

    other_base = BertClassifier(BertEncoder(CONFIG), num_classes=3)  # new random weights
    with pytest.raises(ValueError, match="trained on another base encoder"):
        other_base.load_lora_weights(path)

    other_head = _twin(model, lambda e: BertClassifier(e, num_classes=5))
    with pytest.raises(
        ValueError,
        match=r"classifier_output/kernel has shape \(16, 3\) in the "
        r"file, \(16, 5\) in the model",
    ):
        other_head.load_lora_weights(path)

    tagger = BertTokenClassifier(BertEncoder(CONFIG), num_labels=3)
    with pytest.raises(
        ValueError, match="adapters of a BertClassifier, not of a BertTokenClassifier"
    ):
        tagger.load_lora_weights(path)
    with pytest.raises(ValueError, match="must end in .npz"):
        model.save_lora_weights(str(tmp_path / "adapters.h5"))
    with pytest.raises(ValueError, match="already enabled"):
        model.enable_lora(2)
    with pytest.raises(ValueError, match="has no LoRA adapters"):
        BertClassifier(BertEncoder(CONFIG), num_classes=3).merge_lora()
    with pytest.raises(ValueError, match="positive integer"):
        BertClassifier(BertEncoder(CONFIG), num_classes=3).enable_lora(0)
