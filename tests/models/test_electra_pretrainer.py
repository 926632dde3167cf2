"""ElectraPretrainer: its loss against an independent NumPy computation, the
samples (their distribution, no gradient, equal ones counted as original), the
shared embeddings, accumulation, saving and its export read back by the
ELECTRA models."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.electra_heads import ReplacedTokens, sample_from_softmax
from keras_bert.models.electra import ElectraDiscriminator, ElectraGenerator
from keras_bert.models.electra_pretrainer import (
    DRAWS,
    GENERATOR_FOLDER,
    SHARED_TENSORS,
    ElectraPretrainer,
    electra_generator_config,
)
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.unpadded import may_pack_padding
from keras_bert.training.pretraining import export_electra

from harness import (
    assert_the_samples_carry_no_gradient,
    layer_policies,
    masked_lm_batch,
    tiny_config,
    tolerance,
)

# Generator: hidden 8 (a quarter of 32), 1 head, on the 32-wide embeddings.
TINY = tiny_config(max_position_embeddings=16)
B, T, P = 4, 10, 3


def tiny_pretrainer(**config):
    encoder = BertEncoder(tiny_config(max_position_embeddings=16, **config))
    return ElectraPretrainer(encoder, electra_generator_config(encoder.config))


def tiny_batch(seed=0, rows=B):
    """Padded sequences (at least 6 tokens) with P masked positions among the
    first 5; the last prediction of odd rows is padding (position 0, weight 0)."""
    x = masked_lm_batch(seed, rows, T, P, TINY.vocab_size, shortest=6, candidates=4)
    return {**x, "segment_ids": np.zeros((rows, T), np.int32)}


@pytest.fixture(scope="module")
def pretrainer():
    keras.utils.set_random_seed(1)
    return tiny_pretrainer()


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


# === The loss ===


def test_loss_equals_an_independent_numpy_computation(pretrainer):
    x = tiny_batch()
    outputs = {k: np.asarray(v) for k, v in pretrainer(x).items()}
    weights, real = x["masked_lm_weights"], x["input_mask"].astype(np.float64)
    # The generator's masked-LM loss, weighted by masked_lm_weights.
    log_p = _log_softmax(outputs["masked_lm_logits"].astype(np.float64))  # (B, P, V)
    cross_entropy = -np.take_along_axis(log_p, x["masked_lm_ids"][..., None], axis=-1)[..., 0]
    generator_loss = (cross_entropy * weights).sum() / weights.sum()
    # The discriminator's input: the original, its masked positions the samples.
    original = x["input_ids"].copy()
    replaced = x["input_ids"].copy()
    sampled = np.take_along_axis(outputs["replaced_ids"], x["masked_lm_positions"], axis=1)
    for row in range(B):
        for p in np.flatnonzero(weights[row]):
            original[row, x["masked_lm_positions"][row, p]] = x["masked_lm_ids"][row, p]
            replaced[row, x["masked_lm_positions"][row, p]] = sampled[row, p]
    np.testing.assert_array_equal(outputs["replaced_ids"], replaced)
    assert (outputs["replaced_ids"][:, 0] == 2).all()  # padded predictions write nothing
    labels = (replaced != original).astype(np.float64)
    np.testing.assert_array_equal(outputs["replaced_token_labels"], labels)
    assert labels.sum() > 0  # an untrained generator replaces some
    z = outputs["replaced_token_logits"].astype(np.float64)
    bce = np.maximum(z, 0) - z * labels + np.log1p(np.exp(-np.abs(z)))
    discriminator_loss = (bce * real).sum() / real.sum()
    expected = generator_loss + 50.0 * discriminator_loss
    loss = pretrainer.compute_loss(x=x, y_pred=pretrainer(x))  # samples again: other labels
    assert float(pretrainer.compute_loss(x=x, y_pred=outputs)) == pytest.approx(expected, rel=1e-5)
    assert np.isfinite(float(loss))


def test_samples_follow_the_generator_softmax_by_its_inverse_cdf():
    logits = np.array([[[2.0, 0.5, -1.0, 1.0, -1e9]]], np.float32)  # (1, 1, V): id 4 impossible
    rng = np.random.default_rng(0)
    draws = rng.uniform(size=(1, 20000)).astype(np.float32)
    sampled = np.asarray(sample_from_softmax(np.repeat(logits, 20000, axis=1), draws))[
        0
    ]  # (20000,)
    probabilities = np.exp(_log_softmax(logits[0, 0].astype(np.float64)))
    # An independent inverse CDF of the same draws: the same ids, one by one.
    expected = np.searchsorted(np.cumsum(probabilities), draws[0], side="right")
    np.testing.assert_array_equal(sampled, expected)
    frequencies = np.bincount(sampled, minlength=5) / sampled.size
    np.testing.assert_allclose(frequencies, probabilities, atol=0.01)
    assert frequencies[4] == 0


def test_samples_of_a_full_vocabulary_are_those_of_float64():
    """30,522 ids: a float32 running sum over them all would put 4.5 % of these
    samples on a neighbouring id; the two-level sum matches float64."""
    rng = np.random.default_rng(1)
    logits = (3 * rng.normal(size=(4, 50, 30522))).astype(np.float32)
    draws = rng.uniform(size=(4, 50)).astype(np.float32)
    sampled = np.asarray(sample_from_softmax(logits, draws)).reshape(-1)
    probabilities = np.exp(_log_softmax(logits.reshape(200, -1).astype(np.float64)))
    expected = [
        np.searchsorted(np.cumsum(row), draw, side="right")
        for row, draw in zip(probabilities, draws.reshape(-1))
    ]
    np.testing.assert_array_equal(sampled, expected)


def test_a_sample_equal_to_the_original_counts_as_original():
    vocabulary = 12
    logits = np.full((2, 2, vocabulary), -30.0, np.float32)
    logits[:, :, 7] = 30.0  # the generator surely proposes id 7
    input_ids = np.array([[2, 4, 4, 5, 6], [2, 4, 9, 4, 0]], np.int32)
    positions = np.array([[1, 2], [1, 3]], np.int32)
    original = np.array([[7, 8], [7, 7]], np.int32)
    replaced_ids, labels = ReplacedTokens(seed=1)(
        logits, input_ids, positions, original, np.array([[1, 1], [1, 0]], np.float32)
    )
    # Row 0: 7 over the original 7 (original), 7 over 8 (replaced); row 1's
    # second prediction is padding, so position 3 keeps its [MASK] and label 0.
    np.testing.assert_array_equal(replaced_ids, [[2, 7, 7, 5, 6], [2, 7, 9, 4, 0]])
    np.testing.assert_array_equal(labels, [[0, 0, 1, 0, 0], [0, 0, 0, 0, 0]])


def test_the_samples_carry_no_gradient_to_the_generator(pretrainer):
    assert_the_samples_carry_no_gradient(pretrainer, tiny_batch(seed=1))


# === The model ===


def test_the_generator_reads_the_discriminators_embeddings(pretrainer):
    encoder, generator = pretrainer.encoder, pretrainer.generator_layers
    for name in ("token_embedding", "segment_embedding", "position_embedding"):
        assert getattr(generator, name) is getattr(encoder, name)
    assert generator.embeddings_layer_norm is encoder.embeddings_layer_norm
    assert pretrainer.generator_head.token_embedding is encoder.token_embedding
    assert generator.embeddings_projection.kernel.shape == (32, 8)  # its own, to its width
    # One copy of each variable: the discriminator's and the generator's
    # standalone models, less the shared embeddings and the generator's pooler
    # (ELECTRA's generator has none).
    discriminator = ElectraDiscriminator(BertEncoder(TINY))
    alone = ElectraGenerator(BertEncoder(pretrainer.generator_config))
    assert len({id(w) for w in pretrainer.weights}) == len(pretrainer.weights)
    assert len(pretrainer.weights) == (
        len(discriminator.weights) + len(alone.weights) - len(SHARED_TENSORS) - 2
    )
    assert pretrainer.count_params() == (
        discriminator.count_params()
        + alone.count_params()
        - sum(np.prod(v.shape) for v in alone.encoder.weights[:5])  # the shared tables
        - alone.encoder.pooler.count_params()
    )


def test_generator_sizes_are_electras():
    base = electra_generator_config(BertEncoder(TINY).config.__class__.preset("base"), 1 / 3)
    assert (base.hidden_size, base.num_attention_heads, base.intermediate_size) == (256, 4, 1024)
    assert (base.embedding_size, base.num_hidden_layers) == (768, 12)
    assert electra_generator_config(TINY, 0.5, num_layers=1).num_hidden_layers == 1
    assert electra_generator_config(TINY, 1.0).embedding_size is None  # no projection
    with pytest.raises(ValueError, match=r"fraction in \(0, 1\]"):
        electra_generator_config(TINY, 2)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(vocab_size=41), "generator's vocab_size is 41, the discriminator's 40"),
        (dict(max_position_embeddings=32), "max_position_embeddings is 32"),
        (dict(embedding_size=16), "embedding width is 16, the discriminator's 32"),
        (dict(attention="left_to_right"), "needs bidirectional attention"),
    ],
)
def test_a_generator_that_cannot_share_the_embeddings_is_refused(change, message):
    import dataclasses

    encoder = BertEncoder(TINY)
    generator = dataclasses.replace(electra_generator_config(TINY), **change)
    with pytest.raises(ValueError, match=message):
        ElectraPretrainer(encoder, generator)
    with pytest.raises(ValueError, match="discriminator_weight must be a positive number"):
        ElectraPretrainer(encoder, electra_generator_config(TINY), discriminator_weight=0)


def test_accumulated_micro_batches_train_as_one_batch():
    """2 micro-batches of 4 = one batch of 8: the same draws (one per
    prediction of the whole update), the same update."""
    keras.utils.set_random_seed(3)
    models = [tiny_pretrainer(), tiny_pretrainer()]
    models[1].set_weights(models[0].get_weights())
    x = tiny_batch(seed=2, rows=8)
    for model, steps in zip(models, (1, 2)):
        model.replaced_tokens.seed_generator.state.assign([5, 0])
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            gradient_accumulation_steps=steps,
            jit_compile=False,  # the discriminator packs the padding out
        )
        model.fit(tf.data.Dataset.from_tensors(x), epochs=1, verbose=0, shuffle=False)
    for ours, theirs in zip(models[1].get_weights(), models[0].get_weights()):
        np.testing.assert_allclose(ours, theirs, atol=tolerance(100))
    logs = [{m.name: float(m.result()) for m in model.metrics} for model in models]
    assert logs[0]["replaced_fraction"] > 0
    for name in ("loss", "masked_lm_loss", "discriminator_loss", "replaced_fraction"):
        assert logs[1][name] == pytest.approx(logs[0][name], rel=1e-5), name


def test_each_update_draws_anew_and_its_draws_reach_the_loss(pretrainer):
    x = tiny_batch(seed=4)
    first = pretrainer.replaced_tokens.update_draws(x["masked_lm_positions"])
    second = pretrainer.replaced_tokens.update_draws(x["masked_lm_positions"])
    assert first.shape == (B, P) and not np.allclose(first, second)
    losses = [
        float(pretrainer.update_loss({**x, DRAWS: draws})[0]) for draws in (first, first, second)
    ]
    assert losses[0] == losses[1] != losses[2]


def test_the_discriminator_skips_the_padding_where_shapes_may_vary(pretrainer):
    """Packed (keras_bert.models.unpadded) or padded, the same training loss:
    the discriminator's loss reads the real tokens only."""
    x = tiny_batch(seed=6)
    assert x["input_mask"].sum() < x["input_mask"].size  # some padding to skip
    x[DRAWS] = np.random.default_rng(0).uniform(size=(B, P)).astype(np.float32)
    losses = {}
    for jit_compile in (False, True):  # XLA needs static shapes: no packing
        pretrainer.jit_compile = jit_compile
        assert may_pack_padding(pretrainer) is not jit_compile
        losses[jit_compile] = float(pretrainer.update_loss(x)[0])
    assert losses[False] == pytest.approx(losses[True], abs=tolerance(100, scale=50))


# === Saving and the export ===


def test_config_round_trip_saved_file_and_mixed_precision(pretrainer, tmp_path):
    clone = ElectraPretrainer.from_config(pretrainer.get_config())
    assert clone.get_config() == pretrainer.get_config()
    path = str(tmp_path / "electra.keras")
    pretrainer.save(path)
    loaded = keras.models.load_model(path)
    for ours, theirs in zip(loaded.weights, pretrainer.weights):
        np.testing.assert_array_equal(ours, theirs, err_msg=theirs.path)
    x = tiny_batch()
    np.testing.assert_array_equal(loaded(x)["masked_lm_logits"], pretrainer(x)["masked_lm_logits"])
    # The discriminator is the file's encoder.
    encoder = BertEncoder.from_pretrained(path)
    np.testing.assert_array_equal(
        encoder.token_embedding.embeddings, pretrainer.encoder.token_embedding.embeddings
    )
    mixed = ElectraPretrainer(
        BertEncoder(TINY, dtype="mixed_bfloat16"), electra_generator_config(TINY)
    )
    outputs = mixed(x)
    assert outputs["masked_lm_logits"].dtype == outputs["replaced_token_logits"].dtype == tf.float32
    # Both heads compute as the encoders do; the sampling reads float32 logits.
    assert layer_policies(mixed.generator_head) | layer_policies(mixed.discriminator_head) == {
        "mixed_bfloat16"
    }
    assert mixed.generator_head.dtype_policy.name == "mixed_bfloat16"


def test_the_export_reads_back_as_electras_models(pretrainer, tmp_path):
    export = export_electra(pretrainer, str(tmp_path / "export"))
    x = tiny_batch(seed=5)
    outputs = pretrainer(x)
    encoder_inputs = {k: x[k] for k in ("input_ids", "input_mask", "segment_ids")}
    # The generator alone, at every position: the pretrainer's logits where masked.
    generator = ElectraGenerator.from_pretrained(os.path.join(export, GENERATOR_FOLDER))
    assert len(generator.loaded_head_weights) == 5
    everywhere = generator(encoder_inputs)["masked_lm_logits"]
    np.testing.assert_allclose(
        tf.gather(everywhere, x["masked_lm_positions"], batch_dims=1),
        outputs["masked_lm_logits"],
        atol=tolerance(200),
    )
    # The discriminator on the replaced ids: the pretrainer's replaced-token logits.
    discriminator = ElectraDiscriminator.from_pretrained(export)
    assert len(discriminator.loaded_head_weights) == 4
    np.testing.assert_allclose(
        discriminator({**encoder_inputs, "input_ids": np.asarray(outputs["replaced_ids"])})[
            "replaced_token_logits"
        ],
        outputs["replaced_token_logits"],
        atol=tolerance(200),
    )
    # The next phase: every weight back in place.
    again = ElectraPretrainer.from_pretrained(export)
    assert len(again.loaded_head_weights) == 9
    for ours, theirs in zip(again.original_variables(), pretrainer.original_variables()):
        assert ours.keys() == theirs.keys()
        for name in theirs:
            np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
