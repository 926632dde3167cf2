"""`keras-bert pretrain` with `architecture: modernbert`: the config fields'
checks, a command run whose export fine-tunes (and starts a
second phase), exact resume after SIGKILL, MirroredStrategy on 2 CPUs
against one device."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import yaml
from safetensors.numpy import load_file

from keras_bert import (
    BertClassifier,
    BertEncoder,
    ModernBertConfig,
    ModernBertEncoder,
    ModernBertPretrainer,
)
from keras_bert.checkpoints.modernbert import read_config
from keras_bert.pretraining_data import inputs
from keras_bert.training import modernbert_pretraining, pretraining

from conftest import TINY_VOCAB
from harness import (
    SENTIMENT_FILLER,
    SHORT_RUN,
    assert_same_logs,
    pretrain_fields,
    run_command,
    run_mirrored_pretraining,
    train_log,
)
from repo_paths import REPO_ROOT, TESTS_DIR
from synthetic_pretraining import write_records

# A HuggingFace config.json: 3 layers (global, local, global), a window of 4
# each side, a vocabulary of 256, biases everywhere.
FIXTURE = os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_mlm_biases")
CONFIG_JSON = os.path.join(FIXTURE, "config.json")
TINY = read_config(FIXTURE)[0]
DROPOUT = dict(embedding_dropout=0.1, attention_dropout=0.1, mlp_dropout=0.1)


def tiny_records(folder, seed):
    """folder/train.tfrecord: 64 masked sequences of TINY's vocabulary."""
    write_records(folder / "train.tfrecord", 64, vocab_size=TINY.vocab_size, seed=seed)
    return folder


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tiny_records(tmp_path_factory.mktemp("modernbert_pretraining"), seed=0)


def modern_fields(data_dir, model_dir, **fields):
    """A tiny ModernBERT run: 10 steps of 8 sequences, a checkpoint every 5,
    every step logged."""
    values = pretrain_fields(
        **SHORT_RUN,
        architecture="modernbert",
        objective="none",
        modernbert_config=CONFIG_JSON,
        train_files=str(data_dir / "train.tfrecord"),
        model_dir=str(model_dir),
    )
    return {**values, "log_every": 1, **fields}


def exported(model_dir):
    return load_file(os.path.join(model_dir, "export", "model.safetensors"))


# === Config fields ===


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(architecture="electra"), "architecture must be one of"),
        (dict(objective="nsp"), "objective is 'nsp'; architecture modernbert .* objective: none"),
        (dict(attention="left_to_right"), "attention applies to architecture bert only"),
        (dict(model="tiny"), "model \\('tiny'\\) names a BERT config"),
        (dict(init_checkpoint="export"), "init_checkpoint and modernbert_config are both given"),
        (dict(architecture="bert", objective="nsp"), "modernbert_config applies to .* only"),
    ],
)
def test_config_fields_are_checked_naming_the_field(data_dir, tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        pretraining.load_config(**modern_fields(data_dir, tmp_path, **fields))


def test_modernbert_config_is_a_preset_a_json_file_or_the_fields(data_dir, tmp_path):
    def config_of(value):
        fields = modern_fields(data_dir, tmp_path, modernbert_config=value)
        return modernbert_pretraining.modernbert_config_of(pretraining.load_config(**fields))

    assert config_of(None) == ModernBertConfig.preset("base")
    assert config_of("large") == ModernBertConfig.preset("large")
    assert config_of(TINY.to_dict()) == TINY
    assert config_of(CONFIG_JSON) == TINY  # HuggingFace's layer_types / rope_parameters read
    with pytest.raises(ValueError, match="config field modernbert_config: Unknown ModernBERT"):
        config_of("tiny")
    with pytest.raises(FileNotFoundError, match="config field modernbert_config: no such file"):
        config_of(str(tmp_path / "missing.json"))
    # A recipe's nested mapping, as YAML gives it; a wrong field is named.
    recipe = tmp_path / "recipe.yaml"
    nested = {**modern_fields(data_dir, tmp_path / "run"), "modernbert_config": TINY.to_dict()}
    recipe.write_text(yaml.safe_dump(nested))
    assert pretraining.load_config(str(recipe)).modernbert_config == TINY.to_dict()
    with pytest.raises(ValueError, match="modernbert_config: .*hidden_size"):
        config_of({**TINY.to_dict(), "hidden_size": 15})
    with pytest.raises(ValueError, match="modernbert_config must be text"):
        pretraining.load_config(str(recipe), ["modernbert_config=[1, 2]"])


# === A run, its export, fine-tuning ===


def test_the_command_exports_what_fine_tuning_reads(data_dir, tmp_path, capsys):
    """The command in this process: it runs in a new one as for BERT (the
    architecture is a config field of the same command; tests/cli)."""
    recipe = tmp_path / "recipe.yaml"
    fields = modern_fields(data_dir, tmp_path / "run", eval_files=str(data_dir / "train.tfrecord"))
    del fields["architecture"], fields["objective"]  # given on the command line
    recipe.write_text(yaml.safe_dump({**fields, "eval_steps": 2}))
    code = run_command(
        "pretrain --config {recipe} --set architecture=modernbert --set objective=none",
        recipe=recipe,
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "masked_lm_accuracy" in out and "next_sentence" not in out
    run_dir = tmp_path / "run"
    assert [r["step"] for r in train_log(run_dir)] == list(range(1, 11))
    assert "next_sentence_loss" not in train_log(run_dir)[-1]
    assert sorted(os.listdir(run_dir / "export")) == ["config.json", "model.safetensors"]
    results = json.load(open(run_dir / "eval_results.json"))
    assert results["step"] == 10

    # The export is a HuggingFace ModernBertForMaskedLM folder: the pretrainer
    # it rebuilds evaluates to the run's own results.
    export = str(run_dir / "export")
    pretrainer = ModernBertPretrainer.from_pretrained(export)
    assert "decoder.bias" in pretrainer.loaded_head_weights
    assert pretrainer.encoder.config == TINY
    pretrainer.compile()
    evaluation = inputs.pretraining_dataset(
        str(data_dir / "train.tfrecord"), 16, 4, 8, is_training=False, with_next_sentence=False
    )
    again = pretrainer.evaluate(evaluation, steps=2, return_dict=True, verbose=0)
    assert again["masked_lm_loss"] == pytest.approx(results["masked_lm_loss"], rel=1e-5)

    # Fine-tuning on text, as from a BERT run: the task model from the run's
    # folder, with the records' vocabulary (a sentence starting with quick is pos).
    vocab_file = tmp_path / "vocab.txt"
    unused = [f"[unused{i}]" for i in range(TINY.vocab_size - len(TINY_VOCAB))]
    vocab_file.write_text("\n".join(TINY_VOCAB + unused) + "\n")
    keras.utils.set_random_seed(0)
    classifier = BertClassifier.from_pretrained(
        str(run_dir),
        num_classes=2,
        label_names=["neg", "pos"],
        vocab_file=str(vocab_file),
        seq_length=16,
        dropout=0.0,
    )
    assert isinstance(classifier.encoder, ModernBertEncoder)
    classifier.compile(optimizer=keras.optimizers.Adam(3e-3))
    rng = np.random.default_rng(0)
    labels = ["pos", "neg"] * 8
    texts = [
        " ".join(["quick" if label == "pos" else "lazy", *rng.choice(SENTIMENT_FILLER, 4)])
        for label in labels
    ]
    before = classifier.evaluate(texts, labels, verbose=0, return_dict=True)["loss"]
    classifier.fit(texts, labels, epochs=10, batch_size=8, verbose=0)
    assert classifier.evaluate(texts, labels, verbose=0, return_dict=True)["loss"] < 0.8 * before
    # The BERT encoder's loaders name the one that reads it.
    with pytest.raises(ValueError, match="ModernBERT checkpoint; .*ModernBertEncoder"):
        BertEncoder.from_pretrained(str(run_dir))

    # A second phase starts from the export (learning rate 0 keeps its weights).
    phase2 = modern_fields(
        data_dir,
        tmp_path / "phase2",
        init_checkpoint=export,
        modernbert_config=None,
        learning_rate=0.0,
        train_steps=5,
    )
    pretraining.pretrain(pretraining.load_config(**phase2))
    first, second = exported(run_dir), exported(tmp_path / "phase2")
    assert first.keys() == second.keys() and "decoder.bias" in first
    for name in first:
        np.testing.assert_array_equal(second[name], first[name], err_msg=name)


# === Resume after SIGKILL ===

# The command, killed by SIGKILL right after update KILL_AT (between checkpoints).
KILLED_RUN = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    from keras_bert import cli
    from keras_bert.training import pretraining

    kill_at = int(sys.argv[2])

    class KilledAfter(pretraining.TrainLog):
        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            if int(self.model.optimizer.iterations.numpy()) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    pretraining.TrainLog = KilledAfter
    sys.exit(cli.main(sys.argv[3:]))
""")


# Slow: the resume mechanism is the driver's, for every architecture (the MLM
# and ELECTRA kills in tests/training); this one kills a ModernBERT run.
@pytest.mark.slow
def test_resume_after_sigkill_ends_with_the_uninterrupted_weights(data_dir, tmp_path, capsys):
    # Dropout on: the resumed run must also draw the masks the uninterrupted one draws.
    fields = modern_fields(
        data_dir, tmp_path / "whole", modernbert_config={**TINY.to_dict(), **DROPOUT}
    )
    pretraining.pretrain(pretraining.load_config(**fields))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({**fields, "model_dir": str(tmp_path / "killed")}))
    command = ["pretrain", "--config", str(recipe)]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, REPO_ROOT, "7", *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stdout + killed.stderr
    index = (tmp_path / "killed" / "checkpoints" / "checkpoint").read_text()
    assert 'model_checkpoint_path: "ckpt-5"' in index  # steps 6 and 7 are lost
    # The same recipe again (here, in this process): on from ckpt-5.
    pretraining.pretrain(pretraining.load_config(str(recipe)))
    assert "at step 5" in capsys.readouterr().out
    expected, actual = exported(tmp_path / "whole"), exported(tmp_path / "killed")
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=0, atol=1e-6, err_msg=name)
    # Steps 6-7 trained twice, logged once: the log goes on from the checkpoint.
    assert [r["step"] for r in train_log(tmp_path / "killed")] == list(range(1, 11))
    assert [r["masked_lm_loss"] for r in train_log(tmp_path / "killed")] == pytest.approx(
        [r["masked_lm_loss"] for r in train_log(tmp_path / "whole")], rel=1e-6
    )


# === MirroredStrategy ===


@pytest.mark.slow
def test_mirrored_two_cpus_follow_the_one_device_run(data_dir, tmp_path):
    fields = modern_fields(data_dir, tmp_path, seed=3)
    del fields["model_dir"]
    run_mirrored_pretraining(fields, tmp_path)

    one, expected = train_log(tmp_path / "one"), exported(tmp_path / "one")
    for name in ("two", "accumulate"):
        steps = train_log(tmp_path / name)
        assert [r["step"] for r in steps] == [r["step"] for r in one] == list(range(1, 11))
        # The logged metrics are the global batch's, not replica 0's.
        assert_same_logs(steps, one, ("loss", "masked_lm_loss", "masked_lm_accuracy"), name)
        actual = exported(tmp_path / name)
        for variable in expected:
            # float32 sums in another order (the all-reduce of two half-batch gradients).
            np.testing.assert_allclose(
                actual[variable], expected[variable], rtol=1e-6, atol=1e-6, err_msg=variable
            )
