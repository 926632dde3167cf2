"""What `pretrain` writes, written safely (keras_bert.safe_output): the TF1
export folder appears whole or not at all, pretrain_config.json is replaced
whole, and one run per model_dir at a time (a second is refused with one
line; the lock of a run that is gone is taken over)."""

import errno
import json
import os
import socket
import subprocess
import sys
import typing

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import cli
from keras_bert.checkpoints import encoder_variables
from keras_bert.config import BertConfig
from keras_bert.errors import OutputError, OutputInUseError
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.training import pretraining

from harness import output_locked_by_another_process, tiny_config
from repo_paths import REPO_ROOT

ENV = {**os.environ, "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def pretrainer():
    return BertPretrainer(BertEncoder(tiny_config()))


def _files(folder):
    return sorted(os.listdir(folder))


def test_the_export_folder_appears_whole(pretrainer, tmp_path):
    export = tmp_path / "export"
    pretraining.export_tf1(pretrainer, str(export))
    assert _files(export) == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "checkpoint",
    ]
    assert _files(tmp_path) == ["export"]
    reader = tf.train.load_checkpoint(str(export / "bert_model.ckpt"))
    embedding = dict(encoder_variables(pretrainer.encoder))["bert/embeddings/word_embeddings"]
    np.testing.assert_array_equal(
        reader.get_tensor("bert/embeddings/word_embeddings"), np.asarray(embedding)
    )


def test_a_failure_mid_export_leaves_the_previous_export(pretrainer, tmp_path, monkeypatch):
    """The disk fills while bert_config.json is written (after the weights):
    one OutputError naming the folder; the earlier export is untouched and no
    partial folder is left beside it."""
    export = tmp_path / "export"
    pretraining.export_tf1(pretrainer, str(export))
    before = {name: (export / name).read_bytes() for name in _files(export)}

    def disk_full(self, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(BertConfig, "to_json_file", disk_full)
    with pytest.raises(OutputError, match=rf"cannot write {export}: the disk is full"):
        pretraining.export_tf1(pretrainer, str(export))
    assert _files(tmp_path) == ["export"]
    assert {name: (export / name).read_bytes() for name in _files(export)} == before


def test_a_failed_first_export_leaves_no_folder(pretrainer, tmp_path, monkeypatch):
    def disk_full(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", disk_full)
    with pytest.raises(OutputError, match="the disk is full"):
        pretraining.export_tf1(pretrainer, str(tmp_path / "export"))
    assert _files(tmp_path) == []


def _finished_run(model_dir):
    """A model_dir whose run finished at step 2 (its checkpoint index and
    eval_results.json): `pretrain` returns at once."""
    os.makedirs(model_dir / "checkpoints")
    (model_dir / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    (model_dir / "eval_results.json").write_text(json.dumps({"step": 2, "masked_lm_loss": 3.5}))


# Two steps, one checkpoint.
TWO_STEPS = dict(train_steps=2, warmup_steps=0, checkpoint_every=2)


def _config(tmp_path, model_dir):
    return pretraining.load_config(
        None,
        model="tiny",
        train_files=str(tmp_path / "train.tfrecord"),
        model_dir=str(model_dir),
        verbose=0,
        **TWO_STEPS,
    )


def test_a_second_pretrain_into_a_locked_model_dir_is_one_line(tmp_path, capsys):
    model_dir = tmp_path / "run"
    recipe = tmp_path / "recipe.json"
    recipe.write_text(
        json.dumps(
            dict(
                model="tiny",
                train_files=str(tmp_path / "t.tfrecord"),
                model_dir=str(model_dir),
                **TWO_STEPS,
            )
        )
    )
    with output_locked_by_another_process(model_dir) as holder_pid:
        assert cli.main(["pretrain", "--config", str(recipe)]) == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and error[0].startswith(
            f"keras-bert pretrain: error: {model_dir} is in use by process {holder_pid} on "
            f"{socket.gethostname()}"
        )
        with pytest.raises(OutputInUseError):  # the Python API, without the command's lock
            pretraining.pretrain(_config(tmp_path, model_dir))
    assert _files(tmp_path) == ["recipe.json"]


def test_the_lock_of_a_run_that_is_gone_is_taken_over(tmp_path, capsys):
    model_dir = tmp_path / "run"
    _finished_run(model_dir)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "run.lock").write_text(
        json.dumps({"pid": gone.pid, "host": socket.gethostname(), "started": "earlier"})
    )
    results = pretraining.pretrain(_config(tmp_path, model_dir))
    assert results == {"masked_lm_loss": 3.5}
    assert f"taking over the lock of {model_dir}: its process {gone.pid}" in capsys.readouterr().err
    assert _files(tmp_path) == ["run"]  # the lock released


def test_model_dir_may_not_be_the_records():
    with pytest.raises(ValueError, match="config field model_dir .* is the input"):
        pretraining.pretrain(
            pretraining.load_config(
                None,
                model="tiny",
                train_files=__file__,
                model_dir=__file__,
                **TWO_STEPS,
            )
        )


def test_verbose_is_typed_as_the_text_auto_or_a_number():
    assert typing.get_type_hints(pretraining.PretrainConfig)["verbose"] == str | int
    for value, expected in (("2", 2), ("0", 0), ("auto", "auto")):
        config = pretraining.load_config(None, [f"verbose={value}"], train_files="a", model_dir="b")
        assert config.verbose == expected
    with pytest.raises(
        ValueError,
        match=r"--set verbose=true: config field verbose must be "
        r"auto, 0, 1 or 2, got True",
    ):
        pretraining.load_config(None, ["verbose=true"], train_files="a", model_dir="b")
