"""ModernBertPretrainer: the masked LM at the masked positions equals
ModernBertMaskedLM's (and HuggingFace's) logits there, its loss a NumPy
weighted cross-entropy of those logits; checkpoint heads, saving, and `fit`
with gradient accumulation and mixed_bfloat16."""

import os

import keras
import numpy as np
import pytest

from keras_bert import ModernBertEncoder, ModernBertMaskedLM, ModernBertPretrainer
from keras_bert.checkpoints.modernbert import encoder_variables, read_config
from keras_bert.pretraining_data import inputs
from keras_bert.training import optimization

from harness import layer_policies
from repo_paths import TESTS_DIR
from synthetic_pretraining import write_records

FIXTURES = os.path.join(TESTS_DIR, "fixtures", "modernbert")
WITH_HEAD = os.path.join(FIXTURES, "tiny_mlm_biases")  # ModernBertForMaskedLM, biases everywhere
WITHOUT_HEAD = os.path.join(FIXTURES, "tiny_model")  # ModernBertModel
# Its config: 3 layers (global, local, global), a window of 4 each side, a
# vocabulary of 256, biases everywhere.
TINY = read_config(WITH_HEAD)[0]


def masked_batch(expected, predictions=6, seed=0):
    """The fixture's padded rows as a pretraining batch: `predictions` positions
    per row among its real tokens (fewer where it has fewer; those padded,
    weight 0), random labels, weights of 1 or 0.5."""
    rng = np.random.default_rng(seed)
    ids, mask = expected["input_ids"], expected["input_mask"]
    positions = np.zeros((len(ids), predictions), np.int32)
    weights = np.zeros((len(ids), predictions), np.float32)
    for row, length in enumerate(mask.sum(axis=1)):
        count = min(predictions, int(length))
        positions[row, :count] = np.sort(rng.choice(int(length), count, replace=False))
        weights[row, :count] = rng.choice([1.0, 0.5], count)
    return {
        "input_ids": ids.astype(np.int32),
        "input_mask": mask.astype(np.int32),
        "segment_ids": np.zeros_like(ids, np.int32),  # in the records; not read
        "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(0, 256, positions.shape).astype(np.int32),
        "masked_lm_weights": weights,
    }


def numpy_masked_lm(logits, x):
    """Weighted cross-entropy and accuracy of full logits (B, T, V) gathered at
    the masked positions, in float64."""
    rows = np.arange(len(logits))[:, None]
    at = logits[rows, x["masked_lm_positions"]].astype(np.float64)  # (B, P, V)
    shifted = at - at.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    labels = x["masked_lm_ids"]
    cross_entropy = -np.take_along_axis(log_p, labels[..., None], axis=-1)[..., 0]  # (B, P)
    weights = x["masked_lm_weights"]
    correct = at.argmax(axis=-1) == labels
    return (cross_entropy * weights).sum() / weights.sum(), (
        correct * weights
    ).sum() / weights.sum()


@pytest.fixture(scope="module")
def expected():
    return dict(np.load(WITH_HEAD + "_outputs.npz"))


def test_masked_positions_loss_equals_the_masked_lm_logits_loss(expected):
    pretrainer = ModernBertPretrainer.from_pretrained(WITH_HEAD)
    assert "decoder.bias" in pretrainer.loaded_head_weights
    x = masked_batch(expected)
    # A second, separately built model: HuggingFace's head at every position.
    full = ModernBertMaskedLM.from_pretrained(WITH_HEAD).predict(
        {"input_ids": x["input_ids"], "input_mask": x["input_mask"]}, verbose=0
    )  # (B, T, V)
    rows = np.arange(len(full))[:, None]
    logits = keras.ops.convert_to_numpy(pretrainer(x)["masked_lm_logits"])  # (B, P, V)
    assert logits.shape == (4, 6, 256) and logits.dtype == np.float32
    scale = np.abs(full).max()
    np.testing.assert_allclose(logits, full[rows, x["masked_lm_positions"]], atol=1e-6 * scale)
    # And HuggingFace's own logits there (real positions only: the fixture's rows are padded).
    hf = expected["mlm_logits"][rows, x["masked_lm_positions"]]
    real = x["masked_lm_weights"] > 0
    assert np.abs(logits - hf)[real].max() < 1e-5 * np.abs(hf[real]).max()

    want_loss, want_accuracy = numpy_masked_lm(full, x)
    y_pred = pretrainer(x)
    assert float(pretrainer.compute_loss(x=x, y_pred=y_pred)) == pytest.approx(want_loss, rel=1e-5)
    loss, predictions = pretrainer.update_loss(x)  # training's path, the same one update
    assert predictions is None
    assert float(loss) == pytest.approx(want_loss, rel=1e-5)
    metrics = {name: float(value) for name, value in pretrainer.get_metrics_result().items()}
    assert metrics["masked_lm_loss"] == pytest.approx(want_loss, rel=1e-5)
    assert metrics["masked_lm_accuracy"] == pytest.approx(want_accuracy, rel=1e-6)


def test_a_folder_without_the_head_loads_the_encoder_and_draws_the_head():
    pretrainer = ModernBertPretrainer.from_pretrained(WITHOUT_HEAD)
    assert pretrainer.loaded_head_weights == []
    want = encoder_variables(ModernBertEncoder.from_pretrained(WITHOUT_HEAD))
    for name, (variable, _) in encoder_variables(pretrainer.encoder).items():
        np.testing.assert_array_equal(variable.numpy(), want[name][0].numpy(), err_msg=name)
    with pytest.raises(TypeError, match="must be a ModernBertEncoder"):
        ModernBertPretrainer(keras.layers.Dense(2))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "train.tfrecord"
    return write_records(path, 24, vocab_size=TINY.vocab_size, seed=5)


def dataset(records, batch_size=8):
    return inputs.pretraining_dataset(
        records, 16, 4, batch_size, is_training=False, with_next_sentence=False
    )


def test_saves_and_reloads_as_built(records, tmp_path):
    keras.utils.set_random_seed(0)
    pretrainer = ModernBertPretrainer(ModernBertEncoder(TINY), name="mlm")
    x = next(iter(dataset(records)))
    want = pretrainer(x)["masked_lm_logits"].numpy()
    again = ModernBertPretrainer.from_config(pretrainer.get_config())
    assert again.name == "mlm" and again.encoder.config == TINY
    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, ModernBertPretrainer)
    np.testing.assert_array_equal(loaded(x)["masked_lm_logits"].numpy(), want)


def _weights_after_updates(batches, accumulation, dtype=None, updates=3):
    keras.utils.set_random_seed(3)
    pretrainer = ModernBertPretrainer(ModernBertEncoder(TINY, dtype=dtype))
    pretrainer.compile(
        optimizer=optimization.create_optimizer("adamw", 1e-2, total_steps=10, warmup_steps=2),
        gradient_accumulation_steps=accumulation,
    )
    history = pretrainer.fit(batches, steps_per_epoch=updates, epochs=1, verbose=0, shuffle=False)
    assert int(pretrainer.optimizer.iterations) == updates
    return [w.numpy() for w in pretrainer.trainable_weights], history.history


def test_gradient_accumulation_equals_one_big_batch(records):
    # Random numbers of real predictions per sequence: the micro-batches carry
    # different weight sums, each normalised by the update's.
    batches = dataset(records)
    assert len({float(b["masked_lm_weights"][:4].numpy().sum()) for b in batches}) > 1
    big, big_history = _weights_after_updates(batches, 1)
    accumulated, history = _weights_after_updates(batches, 2)
    assert set(big_history) == {"loss", "masked_lm_loss", "masked_lm_accuracy"}
    for one, other in zip(big, accumulated):
        # BertPretrainer's bound (tests/training/test_steps.py): float32 sums in another order.
        np.testing.assert_allclose(other, one, rtol=1e-5, atol=2e-6)
    for name, values in big_history.items():
        np.testing.assert_allclose(history[name], values, rtol=1e-5, err_msg=name)


@pytest.mark.precision
def test_mixed_bfloat16_trains_with_float32_logits(records):
    x = next(iter(dataset(records)))
    keras.utils.set_random_seed(0)
    pretrainer = ModernBertPretrainer(ModernBertEncoder(TINY, dtype="mixed_bfloat16"))
    assert pretrainer.encoder.transformer_blocks[0].compute_dtype == "bfloat16"
    assert layer_policies(pretrainer) == {"mixed_bfloat16"}  # the heads' too
    assert pretrainer(x)["masked_lm_logits"].dtype == "float32"
    before = float(pretrainer.compute_loss(x=x, y_pred=pretrainer(x)))
    pretrainer.compile(optimizer=keras.optimizers.Adam(1e-2), gradient_accumulation_steps=2)
    history = pretrainer.fit(
        dataset(records).take(1).repeat(), steps_per_epoch=8, epochs=1, verbose=0, shuffle=False
    ).history
    assert np.isfinite(history["loss"]).all()
    # Eight updates on this one batch lower its loss (about ln(256) = 5.5 at first).
    assert float(pretrainer.compute_loss(x=x, y_pred=pretrainer(x))) < 0.9 * before
