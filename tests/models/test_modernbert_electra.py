"""ModernBertElectraPretrainer: the forward pass against the models it is made
of (the generator a ModernBertMaskedLM, the discriminator a ModernBertEncoder
of the export), the loss against NumPy, the labels (a sample equal to the
original is original; padding never replaced), one copy of the shared
embeddings, no gradient through the samples, the loss going down, saving and
reloading in a fresh process, and the refusals."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder, ModernBertEncoder, ModernBertMaskedLM
from keras_bert.checkpoints.modernbert import read_config
from keras_bert.models.electra_pretrainer import DRAWS, GENERATOR_FOLDER
from keras_bert.models.modernbert_electra import ModernBertElectraPretrainer, generator_config
from keras_bert.training.modernbert_pretraining import export

from harness import (
    assert_the_samples_carry_no_gradient,
    masked_lm_batch,
    python_script,
    tolerance,
)
from repo_paths import TESTS_DIR

# 3 layers (global, local, global), hidden 32, a window of 4 each side, a
# vocabulary of 256, biases everywhere (norms too): the generator has 1 layer.
TINY = read_config(os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_mlm_biases"))[0]
B, T, P = 4, 12, 3


def tiny_batch(seed=0, rows=B):
    """Right-padded rows ([CLS] first, at least 7 tokens) with P masked
    positions among the first 6, the last prediction of odd rows padding
    (position 0, weight 0), [MASK] (4) at the others."""
    return masked_lm_batch(seed, rows, T, P, TINY.vocab_size, shortest=7, candidates=5)


def originals(x):
    """The input with the masked positions' original ids back: what the
    discriminator would see if the generator guessed every one."""
    ids = x["input_ids"].copy()
    for row, column in zip(*np.nonzero(x["masked_lm_weights"])):
        ids[row, x["masked_lm_positions"][row, column]] = x["masked_lm_ids"][row, column]
    return ids


@pytest.fixture(scope="module")
def pretrainer():
    keras.utils.set_random_seed(1)
    return ModernBertElectraPretrainer(ModernBertEncoder(TINY))


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


# === The forward pass ===


def test_outputs_are_the_generator_then_the_discriminator_on_its_samples(pretrainer, tmp_path):
    """The export's two folders, reloaded as the plain models: the generator
    (a ModernBertMaskedLM) gives the pretrainer's masked-LM logits at the
    masked positions, the discriminator (a ModernBertEncoder, the head's
    tensors beside it) its replaced-token logits on the replaced ids."""
    x = tiny_batch()
    outputs = {name: np.asarray(value) for name, value in pretrainer(x).items()}
    assert outputs["masked_lm_logits"].shape == (B, P, TINY.vocab_size)
    assert outputs["replaced_token_logits"].shape == outputs["replaced_ids"].shape == (B, T)
    assert outputs["masked_lm_logits"].dtype == outputs["replaced_token_logits"].dtype == np.float32

    folder = export(pretrainer, str(tmp_path / "export"))
    assert sorted(os.listdir(folder)) == ["config.json", GENERATOR_FOLDER, "model.safetensors"]
    encoder_inputs = {name: x[name] for name in ("input_ids", "input_mask")}
    generator = ModernBertMaskedLM.from_pretrained(os.path.join(folder, GENERATOR_FOLDER))
    assert generator.encoder.config.num_hidden_layers == 1
    everywhere = np.asarray(generator(encoder_inputs))  # (B, T, V)
    np.testing.assert_allclose(
        np.take_along_axis(everywhere, x["masked_lm_positions"][..., None], axis=1),
        outputs["masked_lm_logits"],
        atol=tolerance(100, scale=10),
    )
    discriminator = ModernBertEncoder.from_pretrained(folder)
    sequence_output = discriminator({**encoder_inputs, "input_ids": outputs["replaced_ids"]})[
        "sequence_output"
    ]
    np.testing.assert_allclose(
        pretrainer.discriminator_head(sequence_output),
        outputs["replaced_token_logits"],
        atol=tolerance(100, scale=10),
    )


def test_labels_and_loss_against_numpy(pretrainer):
    x = tiny_batch(seed=2)
    outputs = {name: np.asarray(value) for name, value in pretrainer(x).items()}
    # The samples go to the masked positions only; padded predictions write nothing.
    sampled = np.take_along_axis(outputs["replaced_ids"], x["masked_lm_positions"], axis=1)
    replaced = x["input_ids"].copy()
    for row, column in zip(*np.nonzero(x["masked_lm_weights"])):
        replaced[row, x["masked_lm_positions"][row, column]] = sampled[row, column]
    np.testing.assert_array_equal(outputs["replaced_ids"], replaced)
    labels = (replaced != originals(x)).astype(np.float64)
    np.testing.assert_array_equal(outputs["replaced_token_labels"], labels)
    assert labels.sum() > 0 and not labels[x["input_mask"] == 0].any()

    weights, real = x["masked_lm_weights"], x["input_mask"].astype(np.float64)
    log_p = _log_softmax(outputs["masked_lm_logits"].astype(np.float64))
    cross_entropy = -np.take_along_axis(log_p, x["masked_lm_ids"][..., None], axis=-1)[..., 0]
    generator_loss = (cross_entropy * weights).sum() / weights.sum()
    z = outputs["replaced_token_logits"].astype(np.float64)
    bce = np.maximum(z, 0) - z * labels + np.log1p(np.exp(-np.abs(z)))
    expected = generator_loss + 50.0 * (bce * real).sum() / real.sum()
    assert float(pretrainer.compute_loss(x=x, y_pred=outputs)) == pytest.approx(expected, rel=1e-5)


def test_a_sample_equal_to_the_original_counts_as_original():
    """A generator that surely proposes id 7: masked positions whose original
    is 7 are labelled original, the others replaced; padded predictions and
    padding stay as they are, labelled original."""
    keras.utils.set_random_seed(2)
    model = ModernBertElectraPretrainer(ModernBertEncoder(TINY))
    bias = np.full(TINY.vocab_size, -1e4, np.float32)
    bias[7] = 0.0
    model.generator_head.output_bias.assign(bias)
    x = tiny_batch(seed=3)
    x["masked_lm_ids"][:, 0] = 7  # the first prediction of every row: 7 is the original
    outputs = model(x)
    ids, labels = np.asarray(outputs["replaced_ids"]), np.asarray(outputs["replaced_token_labels"])
    expected_ids = x["input_ids"].copy()
    expected_labels = np.zeros((B, T), np.int32)
    for row, column in zip(*np.nonzero(x["masked_lm_weights"])):
        position = x["masked_lm_positions"][row, column]
        expected_ids[row, position] = 7
        expected_labels[row, position] = int(x["masked_lm_ids"][row, column] != 7)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(labels, expected_labels)
    assert expected_labels[:, 1:].sum() > 0  # some replaced, some not


def test_the_samples_carry_no_gradient_to_the_generator(pretrainer):
    assert_the_samples_carry_no_gradient(pretrainer, tiny_batch(seed=4))


def test_the_generator_reads_the_discriminators_embeddings_one_copy(pretrainer):
    encoder, generator = pretrainer.encoder, pretrainer.generator_layers
    assert generator.token_embedding is encoder.token_embedding
    assert generator.embeddings_layer_norm is encoder.embeddings_layer_norm
    assert pretrainer.generator_head.token_embedding is encoder.token_embedding
    assert generator.transformer_blocks[0] is not encoder.transformer_blocks[0]
    assert len({id(w) for w in pretrainer.weights}) == len(pretrainer.weights)
    # The pretrainer's weights: the discriminator's, the replaced-token head's
    # (2 dense layers) and a standalone masked LM of the generator's config,
    # less its embeddings and their LayerNorm (shared) and its pooler (none).
    alone = ModernBertMaskedLM(ModernBertEncoder(generator_config(TINY)))
    shared = [alone.encoder.token_embedding, alone.encoder.embeddings_layer_norm]
    unused = shared + [alone.encoder.pooler]
    hidden = TINY.hidden_size
    head = (hidden * hidden + hidden) + (hidden + 1)  # dense H -> H, then H -> 1
    assert pretrainer.count_params() == (
        encoder.count_params()
        + head
        + alone.count_params()
        - sum(layer.count_params() for layer in unused)
    )


def test_mixed_precision_gives_float32_logits():
    model = ModernBertElectraPretrainer(ModernBertEncoder(TINY, dtype="mixed_bfloat16"))
    assert model.generator_model.layers[-1].compute_dtype == "bfloat16"
    outputs = model(tiny_batch())
    assert outputs["masked_lm_logits"].dtype == outputs["replaced_token_logits"].dtype == tf.float32


def test_generator_depth_is_half_the_discriminators_by_default():
    assert generator_config(TINY).num_hidden_layers == 1
    large = generator_config(TINY.__class__.preset("base"))
    assert (large.num_hidden_layers, large.hidden_size) == (11, 768)
    assert generator_config(TINY, 5).num_hidden_layers == 5


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        (dict(generator_num_layers=0), ValueError, "generator_num_layers must be a positive"),
        (dict(discriminator_weight=0.0), ValueError, "discriminator_weight must be a positive"),
    ],
)
def test_bad_arguments_are_refused(arguments, error, message):
    with pytest.raises(error, match=message):
        ModernBertElectraPretrainer(ModernBertEncoder(TINY), **arguments)


def test_a_bert_encoder_is_refused():
    from harness import tiny_config

    with pytest.raises(TypeError, match="encoder must be a ModernBertEncoder"):
        ModernBertElectraPretrainer(BertEncoder(tiny_config()))


# === Training ===


def test_the_loss_goes_down_on_a_tiny_batch():
    keras.utils.set_random_seed(5)
    model = ModernBertElectraPretrainer(ModernBertEncoder(TINY))
    x = tiny_batch(seed=6)
    x[DRAWS] = np.random.default_rng(0).uniform(size=(B, P)).astype(np.float32)

    def losses():
        loss = float(model.update_loss(x)[0])
        return loss, float(model.masked_lm_loss_tracker.result())

    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    before, masked_lm_before = losses()
    model.fit(tf.data.Dataset.from_tensors(x).repeat(8), epochs=1, verbose=0, shuffle=False)
    model.masked_lm_loss_tracker.reset_state()
    after, masked_lm_after = losses()
    assert after < 0.95 * before
    assert masked_lm_after < masked_lm_before
    assert {m.name for m in model.metrics} >= {
        "masked_lm_loss",
        "masked_lm_accuracy",
        "discriminator_loss",
        "discriminator_accuracy",
        "replaced_fraction",
    }


# === Saving ===


# Loads the file with only keras and keras_bert imported; writes the
# generator's logits and the loss of the update with the given draws.
FRESH_PROCESS = """
import sys
import keras
import keras_bert
import numpy as np

path, batch, out = sys.argv[1:]
model = keras.models.load_model(path)
x = dict(np.load(batch))
logits = model(x)["masked_lm_logits"]
loss = model.update_loss({name: keras.ops.convert_to_tensor(v) for name, v in x.items()})[0]
np.savez(out, masked_lm_logits=logits, loss=loss, kind=type(model).__name__)
"""


def test_config_round_trip_and_a_fresh_process_reload(pretrainer, tmp_path):
    clone = ModernBertElectraPretrainer.from_config(pretrainer.get_config())
    assert clone.get_config() == pretrainer.get_config()
    assert clone.generator_config == pretrainer.generator_config
    path = str(tmp_path / "electra.keras")
    pretrainer.save(path)
    x = tiny_batch(seed=7)
    x[DRAWS] = np.random.default_rng(1).uniform(size=(B, P)).astype(np.float32)
    np.savez(tmp_path / "batch.npz", **x)
    python_script(
        FRESH_PROCESS,
        path,
        tmp_path / "batch.npz",
        tmp_path / "out.npz",
        cwd=tmp_path,
        installed=True,
    )
    reloaded = np.load(tmp_path / "out.npz")
    assert str(reloaded["kind"]) == "ModernBertElectraPretrainer"
    tensors = {name: tf.convert_to_tensor(value) for name, value in x.items()}
    np.testing.assert_array_equal(reloaded["masked_lm_logits"], pretrainer(x)["masked_lm_logits"])
    assert float(reloaded["loss"]) == pytest.approx(
        float(pretrainer.update_loss(tensors)[0]), rel=1e-6
    )
    # The discriminator is the file's encoder.
    loaded = keras.models.load_model(path)
    np.testing.assert_array_equal(
        loaded.encoder.token_embedding.embeddings, pretrainer.encoder.token_embedding.embeddings
    )
