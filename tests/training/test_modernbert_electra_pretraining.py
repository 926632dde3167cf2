"""`keras-bert pretrain` with `architecture: modernbert` and `objective: electra`:
the fields it refuses, a run from the command line whose export
`ModernBertEncoder.from_pretrained` reads (the sequence outputs of the
pretrainer's own encoder) and a classifier fine-tunes, a second phase from
that export, exact resume after SIGKILL, and MirroredStrategy on 2 CPUs
against one device."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml
from safetensors.numpy import load_file
from test_modernbert_pretraining import TINY, modern_fields, tiny_records

from keras_bert import BertClassifier, ModernBertEncoder
from keras_bert.checkpoints.modernbert import read_config
from keras_bert.models.electra_pretrainer import GENERATOR_FOLDER
from keras_bert.models.modernbert_electra import ModernBertElectraPretrainer
from keras_bert.pretraining_data import inputs
from keras_bert.training import pretraining

from conftest import TINY_VOCAB
from harness import (
    assert_electra_resumed_as_uninterrupted,
    assert_same_logs,
    killed_and_resumed,
    run_command,
    run_mirrored_pretraining,
    train_log,
)


# The masked-LM tests' tiny model (test_modernbert_pretraining: 3 layers, a
# window of 4 each side, a vocabulary of 256; the generator has 1 layer), on
# records of its own.
@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tiny_records(tmp_path_factory.mktemp("modernbert_electra"), seed=1)


def electra_fields(data_dir, model_dir, **fields):
    """A tiny ModernBERT ELECTRA run: 10 steps of 8 sequences, a checkpoint
    every 5, every step logged."""
    return modern_fields(data_dir, model_dir, **{"objective": "electra", **fields})


def exported(model_dir, folder=""):
    return load_file(os.path.join(model_dir, "export", folder, "model.safetensors"))


# === Config fields ===


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            dict(generator_hidden_size=0.5),
            r"generator_hidden_size \(0.5\) applies to architecture bert only",
        ),
        (dict(objective="nsp"), "objective: none .* or objective: electra"),
        (dict(generator_num_layers=0), "generator_num_layers must be a positive integer"),
        (dict(discriminator_weight=0.0), "discriminator_weight must be > 0"),
        (dict(objective="none", generator_num_layers=1), "apply to objective electra only"),
    ],
)
def test_fields_that_make_no_sense_here_are_refused_naming_them(
    data_dir, tmp_path, fields, message
):
    with pytest.raises(ValueError, match=message):
        pretraining.load_config(**electra_fields(data_dir, tmp_path, **fields))


def test_the_generator_is_the_encoders_width_and_half_its_depth(data_dir, tmp_path):
    for fields, layers in ((dict(), 1), (dict(generator_num_layers=2), 2)):
        config = pretraining.load_config(**electra_fields(data_dir, tmp_path, **fields))
        model = pretraining.build_model(config)
        assert isinstance(model, ModernBertElectraPretrainer)
        assert model.generator_config.num_hidden_layers == layers
        assert model.generator_config.hidden_size == TINY.hidden_size
    # The generator's width written as the whole of the encoder's is the same run.
    same = electra_fields(data_dir, tmp_path, generator_hidden_size=1.0)
    assert pretraining.load_config(**same).generator_hidden_size == 1.0


# === A run from the command line, its export, fine-tuning, a second phase ===


@pytest.fixture(scope="module")
def finished_run(data_dir, tmp_path_factory):
    """A 4-step run from the command line (in this process): its recipe and model_dir."""
    folder = tmp_path_factory.mktemp("electra_run")
    recipe = folder / "recipe.yaml"
    fields = electra_fields(
        data_dir, folder / "run", train_steps=4, checkpoint_every=2, warmup_steps=1
    )
    del fields["architecture"], fields["objective"]  # given on the command line
    recipe.write_text(yaml.safe_dump(fields))
    line = "pretrain --config {recipe} --set architecture=modernbert --set objective=electra"
    assert run_command(line, recipe=recipe) == 0
    return recipe, folder / "run"


def test_a_run_exports_what_from_pretrained_reads(data_dir, finished_run):
    recipe, run_dir = finished_run
    records = train_log(run_dir)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for record in records:
        assert 0 < record["replaced_fraction"] < 0.5
        assert record["loss"] == pytest.approx(
            record["masked_lm_loss"] + 50 * record["discriminator_loss"], rel=0.05
        )
    export = run_dir / "export"
    assert sorted(os.listdir(export)) == ["config.json", GENERATOR_FOLDER, "model.safetensors"]
    assert json.load(open(export / "config.json"))["architectures"] == ["ModernBertModel"]
    generator_config = read_config(str(export / GENERATOR_FOLDER))[0]
    assert generator_config.num_hidden_layers == 1
    assert generator_config.hidden_size == TINY.hidden_size

    # The pretrainer at its last checkpoint, and the encoder of its export:
    # the same sequence outputs.
    config = pretraining.load_config(str(recipe), ["architecture=modernbert", "objective=electra"])
    pretrainer = pretraining.build_model(config)
    latest = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    assert latest.endswith("ckpt-4")
    tf.train.Checkpoint(model=pretrainer).read(latest).expect_partial()
    batch = next(
        iter(
            inputs.pretraining_dataset(
                str(data_dir / "train.tfrecord"),
                16,
                4,
                8,
                is_training=False,
                with_next_sentence=False,
            )
        )
    )
    features = {name: batch[name] for name in ("input_ids", "input_mask")}
    encoder = ModernBertEncoder.from_pretrained(str(export))
    np.testing.assert_array_equal(
        encoder(features)["sequence_output"], pretrainer.encoder(features)["sequence_output"]
    )
    np.testing.assert_array_equal(
        exported(run_dir)["discriminator_predictions.dense_prediction.bias"],
        pretrainer.discriminator_head.prediction.bias,
    )


@pytest.mark.slow
def test_a_classifier_fine_tunes_and_a_second_phase_goes_on(data_dir, finished_run, tmp_path):
    _, run_dir = finished_run
    export = run_dir / "export"
    # A classifier from the run's folder (the replaced-token head is left).
    vocab_file = tmp_path / "vocab.txt"
    unused = [f"[unused{i}]" for i in range(TINY.vocab_size - len(TINY_VOCAB))]
    vocab_file.write_text("\n".join(TINY_VOCAB + unused) + "\n")
    classifier = BertClassifier.from_pretrained(
        str(run_dir), num_classes=2, vocab_file=str(vocab_file), seq_length=16
    )
    assert isinstance(classifier.encoder, ModernBertEncoder)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = classifier.fit(["quick fox", "lazy dog"], np.array([1, 0]), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()

    # A second phase from the export, generator/ included (learning rate 0
    # keeps every weight: both folders written again as they were).
    phase2 = electra_fields(
        data_dir,
        tmp_path / "phase2",
        init_checkpoint=str(export),
        modernbert_config=None,
        learning_rate=0.0,
        train_steps=5,
    )
    pretraining.pretrain(pretraining.load_config(**phase2))
    for folder in ("", GENERATOR_FOLDER):
        first, second = exported(run_dir, folder), exported(tmp_path / "phase2", folder)
        assert first.keys() == second.keys()
        for name in first:
            np.testing.assert_array_equal(second[name], first[name], err_msg=f"{folder}{name}")
    again = ModernBertElectraPretrainer.from_pretrained(str(export))
    assert len(again.loaded_head_weights) == 4 + 5  # the replaced-token head, the masked LM's
    with pytest.raises(ValueError, match="generator_num_layers is 2, but the generator"):
        ModernBertElectraPretrainer.from_pretrained(str(export), generator_num_layers=2)


# === Resume after SIGKILL ===


@pytest.mark.slow
def test_resume_after_sigkill_ends_with_the_uninterrupted_weights(data_dir, tmp_path):
    """Dropout on and the generator's samples drawn from seed generators saved
    in each checkpoint: a run killed and rerun ends as the whole run did."""
    dropout = dict(embedding_dropout=0.1, attention_dropout=0.1, mlp_dropout=0.1)
    fields = electra_fields(
        data_dir,
        tmp_path / "unused",
        modernbert_config={**TINY.to_dict(), **dropout},
        train_steps=60,
        warmup_steps=5,
        checkpoint_every=10,
        log_every=10,
        seed=7,
    )
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(fields))
    killed_at, _ = killed_and_resumed(recipe, tmp_path, 20)
    assert 20 <= killed_at < 60
    assert_electra_resumed_as_uninterrupted(tmp_path, exported, 60)


# === MirroredStrategy ===


@pytest.mark.slow
def test_mirrored_two_cpus_follow_the_one_device_run(data_dir, tmp_path):
    """2 replicas of 4 sequences (and 2 replicas accumulating 2 micro-batches
    of 2) = one device with the batch of 8: each sequence gets the samples it
    gets on one device, so losses and weights agree step by step."""
    fields = electra_fields(data_dir, tmp_path, train_steps=6, checkpoint_every=6, seed=3)
    del fields["model_dir"]
    run_mirrored_pretraining(fields, tmp_path)
    one = train_log(tmp_path / "one")
    for name in ("two", "accumulate"):
        steps = train_log(tmp_path / name)
        assert [r["step"] for r in steps] == [r["step"] for r in one] == list(range(1, 7))
        metrics = ("loss", "masked_lm_loss", "discriminator_loss", "replaced_fraction")
        assert_same_logs(steps, one, metrics, name)
        for folder in ("", GENERATOR_FOLDER):
            expected, actual = exported(tmp_path / "one", folder), exported(tmp_path / name, folder)
            for variable in expected:
                np.testing.assert_allclose(
                    actual[variable], expected[variable], atol=1e-6, err_msg=f"{name}: {variable}"
                )
