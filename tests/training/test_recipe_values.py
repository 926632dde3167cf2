"""Recipe and `--set` values are checked against the config's field types
(keras_bert.training.recipe_files): a wrong value fails naming the field and
where it came from, before any work starts."""

import glob
import os
import re
import subprocess
import sys

import pytest

from keras_bert.training.finetuning import load_finetune_config
from keras_bert.training.pretraining import load_config

from repo_paths import REPO_ROOT


@pytest.mark.parametrize(
    "item, message",
    [
        ("lowercase=maybe", "config field lowercase must be true or false, got 'maybe'"),
        # YAML 1.1's other booleans are words here: refused in a boolean field.
        ("lowercase=yes", "config field lowercase must be true or false, got 'yes'"),
        ("tensorboard=off", "config field tensorboard must be true or false, got 'off'"),
        ("seq_length=1.5", "config field seq_length must be an integer, got 1.5"),
        ("seq_length=true", "config field seq_length must be an integer, got True"),
        ("batch_size=many", "config field batch_size must be an integer, got 'many'"),
        ("learning_rate=fast", "config field learning_rate must be a number, got 'fast'"),
        ("text_columns=sentence", "config field text_columns must be a list"),
        (
            "strategy=gpu",
            "config field strategy must be auto, one_device, mirrored, multi_worker "
            "or tpu, got 'gpu'",
        ),
        ("jit_compile=sometimes", "config field jit_compile must be true, false or auto"),
        ("jit_compile=1", "config field jit_compile must be true, false or auto, got 1"),
        ("glue_task=[mrpc]", r"config field glue_task must be text, got \['mrpc'\]"),
        ("lora_rank=two", "config field lora_rank must be an integer, got 'two'"),
        ("verbose=yes", "config field verbose must be auto, 0, 1 or 2, got 'yes'"),
        (
            "seq_lenght=64",
            r"unknown config field\(s\) \['seq_lenght'\] \(seq_lenght: did you "
            r"mean seq_length\?\)",
        ),
    ],
)
def test_a_wrong_set_value_names_the_field_and_the_flag(item, message):
    with pytest.raises(ValueError, match=rf"^--set {re.escape(item)}: {message}"):
        load_finetune_config(None, [item], task="classify")


def test_set_values_of_the_right_type_are_taken():
    config = load_finetune_config(
        None,
        [
            "lowercase=false",
            "text_columns=[sentence1, sentence2]",
            "learning_rate=2e-5",
            "epochs=2",
            "verbose=2",
            "jit_compile=auto",
            "lora_rank=null",
            "glue_task=no",
        ],
        task="classify",
    )
    assert config.lowercase is False and config.text_columns == ["sentence1", "sentence2"]
    assert config.learning_rate == 2e-5 and isinstance(config.epochs, float)
    assert config.verbose == 2 and config.jit_compile == "auto" and config.lora_rank is None
    assert config.glue_task == "no"  # a word, not YAML 1.1's false
    pretrain = load_config(
        None, ["verbose=1", "clipnorm=null", "optimizer=lamb"], train_files="a", model_dir="b"
    )
    assert (pretrain.verbose, pretrain.clipnorm, pretrain.optimizer) == (1, None, "lamb")


@pytest.mark.parametrize(
    "recipe, message",
    [
        (
            "task: classify\nlowercase: yes\n",
            "config field lowercase must be true or false, got 'yes'",
        ),
        ("task: classify\nbatch_size: 32.5\n", "config field batch_size must be an integer"),
        ("task: classify\nbatch_size: 32\nbatch_size: 16\n", "the key 'batch_size' is given twice"),
        (
            '{"task": "classify", "bucket_by_length": "true"}',
            "config field bucket_by_length must be true or false, got 'true'",
        ),
    ],
)
def test_a_wrong_recipe_value_names_the_field_and_the_file(tmp_path, recipe, message):
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe)
    with pytest.raises(ValueError, match=rf"{path}: .*{message}"):
        load_finetune_config(str(path))


def test_every_shipped_recipe_still_reads():
    folder = os.path.join(REPO_ROOT, "recipes")
    for name in sorted(glob.glob(os.path.join(folder, "pretraining", "*.yaml"))):
        load_config(name)
    for name in sorted(glob.glob(os.path.join(folder, "finetuning", "*.yaml"))):
        load_finetune_config(name)


def test_the_command_refuses_lowercase_maybe_before_any_work(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_bert.cli",
            "finetune",
            "--task",
            "classify",
            "--train",
            str(tmp_path / "train.tsv"),
            "--output-dir",
            str(tmp_path / "out"),
            "--set",
            "lowercase=maybe",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "keras-bert finetune: error: --set lowercase=maybe: config field lowercase must be "
        "true or false, got 'maybe'"
    )
    assert not (tmp_path / "out").exists()


def test_a_field_given_by_set_and_by_its_flag_is_refused():
    # `--epochs 1 --set epochs=abc`: the flag used to win and the bad value
    # was never looked at.
    with pytest.raises(
        ValueError,
        match=r"--set epochs=abc: also given by its flag \(epochs\); "
        "give each field once",
    ):
        load_finetune_config(None, ["epochs=abc"], task="classify", epochs=1)
    # A recipe's value and a flag: the flag overrides it, as documented.
    assert load_finetune_config(None, ["seq_length=64"], task="classify", epochs=1).epochs == 1
