"""`keras-bert pretrain --objective electra`: its config fields, what a run
writes (in this process; in a fresh one, then a classifier fine-tunes from
it), exact resume after SIGKILL, and MirroredStrategy over 2 logical CPUs
against one device."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.models.classifier import BertClassifier
from keras_bert.models.electra import ElectraGenerator
from keras_bert.models.electra_pretrainer import GENERATOR_FOLDER
from keras_bert.models.encoder import BertEncoder
from keras_bert.pretraining_data import PretrainingOptions, create_pretraining_data
from keras_bert.training import pretraining

from conftest import TINY_VOCAB
from harness import (
    SHORT_RUN,
    assert_electra_resumed_as_uninterrupted,
    assert_same_logs,
    command_process,
    killed_and_resumed,
    pretrain_fields,
    run_command,
    run_mirrored_pretraining,
    small_config,
)

# hidden 16: the generator is 4 wide, one head, on the 16-wide embeddings.
CONFIG = small_config(vocab_size=len(TINY_VOCAB), dropout=0.0)
WORDS = [w for w in TINY_VOCAB if not w.startswith(("[", "##"))]


def _export(model_dir, folder=""):
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "export", folder, "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _log(model_dir):
    return [json.loads(line) for line in open(os.path.join(model_dir, "train_log.jsonl"))]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Masked records of the tiny vocabulary's words (create-pretraining-data,
    no next-sentence labels) and the model's bert_config.json."""
    folder = tmp_path_factory.mktemp("electra_data")
    rng = np.random.default_rng(0)
    documents = [
        "\n".join(" ".join(rng.choice(WORDS, rng.integers(4, 9))) for _ in range(4))
        for _ in range(24)
    ]
    (folder / "corpus.txt").write_text("\n\n".join(documents) + "\n")
    (folder / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    options = PretrainingOptions(
        max_seq_length=16, max_predictions_per_seq=4, dupe_factor=3, objective="none"
    )
    create_pretraining_data(
        str(folder / "corpus.txt"),
        str(folder / "train.tfrecord"),
        str(folder / "vocab.txt"),
        options,
        num_workers=1,
    )
    CONFIG.to_json_file(str(folder / "bert_config.json"))
    return folder


def _fields(records, **fields):
    """A short run on `records` (the recipe's objective nsp: the command
    line's --objective changes it)."""
    values = pretrain_fields(
        model=str(records / "bert_config.json"),
        train_files=str(records / "train.tfrecord"),
        objective="nsp",
        **SHORT_RUN,
    )
    return {**values, **fields}


def _recipe(records, path, **fields):
    path.write_text(json.dumps(_fields(records, model_dir=str(path.parent / "run"), **fields)))
    return path


# === Config ===


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(objective="electric"), "objective must be one of .*'electra'"),
        (dict(generator_hidden_size=0.0), r"generator_hidden_size must be a fraction in \(0, 1\]"),
        (dict(generator_hidden_size=1.5), r"generator_hidden_size must be a fraction"),
        (dict(generator_num_layers=0), "generator_num_layers must be a positive integer"),
        (dict(discriminator_weight=0.0), "discriminator_weight must be > 0"),
        (dict(discriminator_weight=float("inf")), "discriminator_weight must be a finite"),
        (
            dict(objective="none", generator_hidden_size=0.5),
            "generator_hidden_size apply to objective electra only",
        ),
    ],
)
def test_electra_fields_are_checked(fields, message):
    values = dict(objective="electra", train_files="a.tfrecord", model_dir="out")
    with pytest.raises(ValueError, match=message):
        pretraining.load_config(None, **{**values, **fields})


def test_a_generator_width_its_heads_cannot_split_is_refused_before_any_work(tmp_path):
    config = pretraining.load_config(
        None,
        model="base",
        objective="electra",
        generator_hidden_size=0.3,  # 230 of 768, in 3 heads
        train_files=str(tmp_path / "missing.tfrecord"),
        model_dir=str(tmp_path / "run"),
    )
    with pytest.raises(ValueError, match="generator_hidden_size 0.3 of 768 gives a width of 230"):
        pretraining.pretrain(config)
    assert not (tmp_path / "run").exists()


# === A run from the command line ===


def _check_run(model_dir):
    """A finished 6-step ELECTRA run: its log, the discriminator as the encoder
    of `model_dir` and the generator reloaded on its own; returns the encoder."""
    logged = _log(model_dir)
    assert [r["step"] for r in logged] == [3, 6]
    for record in logged:
        # ELECTRA's 15 % of tokens masked; an untrained generator misses most.
        assert 0.02 < record["replaced_fraction"] < 0.3
        assert record["loss"] == pytest.approx(
            record["masked_lm_loss"] + 50 * record["discriminator_loss"], rel=0.05
        )
    assert json.load(open(model_dir / "pretrain_config.json"))["objective"] == "electra"
    # The discriminator: the encoder of the model_dir (no pooler: ELECTRA trains none).
    discriminator = _export(model_dir)
    assert "electra/embeddings/word_embeddings" in discriminator
    assert not any(name.startswith(("generator", "cls/")) for name in discriminator)
    encoder = BertEncoder.from_pretrained(str(model_dir))
    assert encoder.config == CONFIG
    np.testing.assert_array_equal(
        encoder.token_embedding.embeddings, discriminator["electra/embeddings/word_embeddings"]
    )
    # The generator, reloaded on its own: the same (shared) embeddings.
    generator = ElectraGenerator.from_pretrained(str(model_dir / "export" / GENERATOR_FOLDER))
    assert generator.encoder.config.hidden_size == 4 and len(generator.loaded_head_weights) == 5
    np.testing.assert_array_equal(
        generator.encoder.token_embedding.embeddings, encoder.token_embedding.embeddings
    )
    return encoder


def test_pretrain_electra_writes_the_discriminator_and_the_generator(records, tmp_path):
    recipe = _recipe(
        records, tmp_path / "recipe.json", train_steps=6, checkpoint_every=3, log_every=3
    )
    assert run_command("pretrain --config {config} --objective electra", config=recipe) == 0
    _check_run(tmp_path / "run")


@pytest.mark.slow
def test_the_command_in_a_fresh_process_then_a_classifier_fine_tunes(records, tmp_path):
    recipe = _recipe(
        records, tmp_path / "recipe.json", train_steps=6, checkpoint_every=3, log_every=3
    )
    run = command_process("pretrain --config {config} --objective electra", config=recipe)
    assert run.returncode == 0, run.stdout + run.stderr
    encoder = _check_run(tmp_path / "run")
    texts = ["quick " + " ".join(WORDS[i : i + 3]) for i in range(8)]
    texts += ["lazy " + " ".join(WORDS[i : i + 3]) for i in range(8)]
    labels = np.array([1] * 8 + [0] * 8)
    classifier = BertClassifier.from_pretrained(
        str(tmp_path / "run"),
        num_classes=2,
        vocab_file=str(records / "vocab.txt"),
        lowercase=True,
        seq_length=16,
    )
    np.testing.assert_array_equal(
        classifier.encoder.token_embedding.embeddings, encoder.token_embedding.embeddings
    )
    pretrained = [np.array(v) for v in classifier.encoder.trainable_variables]
    classifier.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = classifier.fit(texts, labels, batch_size=8, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    # The discriminator itself trains (not only the new head) ...
    moved = [
        not np.allclose(before, after)
        for before, after in zip(pretrained, classifier.encoder.trainable_variables)
    ]
    assert sum(moved) > len(moved) // 2
    # ... and the classifier answers text.
    probabilities = classifier.predict_proba(texts[:3])
    np.testing.assert_allclose(np.sum(probabilities, axis=-1), 1.0, rtol=1e-5)


# === Resume after SIGKILL ===


@pytest.mark.slow
def test_electra_resumes_after_sigkill_to_the_uninterrupted_weights(records, tmp_path):
    """The generator's samples are drawn from a seed generator saved in each
    checkpoint: a run killed and rerun draws the samples the whole run drew."""
    recipe = _recipe(
        records,
        tmp_path / "recipe.json",
        train_steps=120,
        warmup_steps=10,
        checkpoint_every=10,
        log_every=10,
        seed=7,
    )
    killed_at, _ = killed_and_resumed(recipe, tmp_path, 40, "--objective", "electra")
    assert 40 <= killed_at < 120
    assert_electra_resumed_as_uninterrupted(tmp_path, _export, 120)


# === MirroredStrategy ===


@pytest.mark.slow
def test_mirrored_two_cpus_follows_the_one_device_run(records, tmp_path):
    """2 replicas of 4 sequences (and 2 replicas accumulating 2 micro-batches
    of 2) = one device with the batch of 8: each sequence gets the samples it
    gets on one device, so losses and weights agree step by step."""
    fields = _fields(
        records, objective="electra", train_steps=6, checkpoint_every=6, log_every=1, seed=3
    )
    run_mirrored_pretraining(fields, tmp_path)
    one = _log(tmp_path / "one")
    for name in ("two", "accumulate"):
        logged = _log(tmp_path / name)
        assert [r["step"] for r in logged] == [r["step"] for r in one] == list(range(1, 7))
        metrics = ("loss", "masked_lm_loss", "discriminator_loss", "replaced_fraction")
        assert_same_logs(logged, one, metrics, name)
        for folder in ("", GENERATOR_FOLDER):
            expected, actual = _export(tmp_path / "one", folder), _export(tmp_path / name, folder)
            for variable in expected:
                np.testing.assert_allclose(
                    actual[variable], expected[variable], atol=1e-6, err_msg=f"{name}: {variable}"
                )
