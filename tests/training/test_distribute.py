"""Strategies: building them, MirroredStrategy over 2 logical CPUs against one
device, MultiWorkerMirroredStrategy with 2 processes on loopback, and the TPU
path up to the strategy (static int32 inputs, the train step lowered by XLA)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.config import BertConfig
from keras_bert.pretraining_data import inputs
from keras_bert.training import distribute, pretraining

from harness import assert_same_logs, pretrain_fields, small_config
from loopback_cluster import printed_json, run_workers
from repo_paths import REPO_ROOT
from synthetic_pretraining import write_records


def test_build_strategy(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert distribute.build_strategy("one_device") is tf.distribute.get_strategy()
    assert distribute.build_strategy("auto") is tf.distribute.get_strategy()
    with pytest.raises(ValueError, match="needs TF_CONFIG"):
        distribute.build_strategy("multi_worker")
    with pytest.raises(ValueError, match="strategy must be one of"):
        distribute.build_strategy("horovod")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        distribute.tf_config_task_count()
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {
                "cluster": {"worker": ["a:1", "b:2"], "chief": ["c:3"]},
                "task": {"type": "worker", "index": 0},
            }
        ),
    )
    assert distribute.tf_config_task_count() == 3


def test_every_iterator_of_a_seeded_training_stream_replays_it(tmp_path):
    # Keras's fit under a strategy opens one iterator (to build the model)
    # before the one it trains on: both must read the batches one device reads.
    files = [write_records(tmp_path / f"{n}.tfrecord", 4, seed=n) for n in range(3)]
    first_ids = {
        int(r["input_ids"][0, 1]): n
        for n in range(3)
        for r in inputs.pretraining_dataset(files[n], 16, 4, 1, is_training=False).take(1)
    }
    assert len(first_ids) == 3  # the first record tells the file apart
    dataset = inputs.pretraining_dataset(
        ",".join(files), 16, 4, 4, seed=7, shuffle_buffer=1, cycle_length=1
    )  # one file at a time, in order
    reads = [[int(b["input_ids"][0, 1]) for b in dataset.take(12)] for _ in range(2)]
    assert reads[0] == reads[1]
    epochs = [[first_ids[i] for i in reads[0][e * 3 : e * 3 + 3]] for e in range(4)]
    assert all(sorted(files_read) == [0, 1, 2] for files_read in epochs)  # every file once
    assert len({tuple(order) for order in epochs}) > 1  # in a new order each epoch
    shuffled = inputs.pretraining_dataset(",".join(files), 16, 4, 4, seed=7, shuffle_buffer=8)
    assert all(
        np.array_equal(a["input_ids"], b["input_ids"])
        for a, b in zip(shuffled.take(6), shuffled.take(6))
    )


def _tpu_recipe_dataset(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    recipe = pretraining.load_config("recipes/pretraining/bert_base_tpu_phase1.yaml")
    path = write_records(
        tmp_path / "seq128.tfrecord",
        8,
        vocab_size=30522,
        seq_length=128,
        max_predictions_per_seq=20,
    )
    # 8 TPU cores: each reads batch_size / 8 per step.
    per_replica = recipe.batch_size // 8
    dataset = inputs.pretraining_dataset(
        path, recipe.seq_length, recipe.max_predictions_per_seq, per_replica, seed=recipe.seed
    )
    for name, spec in dataset.element_spec.items():
        assert spec.shape.is_fully_defined(), name
        assert spec.dtype == (tf.float32 if name == "masked_lm_weights" else tf.int32), name
    assert dataset.element_spec["input_ids"].shape == (32, 128)
    return recipe, dataset


def test_tpu_recipe_inputs_are_static_and_int32(tmp_path, monkeypatch):
    _tpu_recipe_dataset(tmp_path, monkeypatch)


@pytest.mark.slow
def test_tpu_recipe_train_step_lowers_to_xla_in_bfloat16(tmp_path, monkeypatch):
    recipe, dataset = _tpu_recipe_dataset(tmp_path, monkeypatch)
    # The bfloat16 train step of a (small) pretrainer traces and lowers under XLA.
    from keras_bert.models.encoder import BertEncoder
    from keras_bert.models.pretrainer import BertPretrainer
    from keras_bert.training.optimization import create_optimizer

    small = BertConfig.preset("tiny", vocab_size=30522)
    pretrainer = BertPretrainer(BertEncoder(small, dtype=recipe.mixed_precision))
    optimizer = create_optimizer(
        recipe.optimizer,
        recipe.learning_rate,
        recipe.train_steps,
        recipe.warmup_steps,
        clipnorm=recipe.clipnorm,
    )
    optimizer.build(pretrainer.trainable_variables)

    @tf.function(jit_compile=True)
    def train_step(batch):
        with tf.GradientTape() as tape:
            loss = pretrainer.compute_loss(x=batch, y_pred=pretrainer(batch, training=True))
        grads = tape.gradient(loss, pretrainer.trainable_variables)
        optimizer.apply_gradients(zip(grads, pretrainer.trainable_variables))
        return loss

    batch = next(iter(dataset.take(1)))
    hlo = train_step.experimental_get_compiler_ir(batch)(stage="hlo")
    assert "bf16" in hlo and "s32[32,128]" in hlo


MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path.insert(0, sys.argv[2])
    from keras_bert.training import pretraining
    fields = json.loads(sys.argv[1])
    # The global batch of 8 as 2 micro-batches of 4 (2 x 2 per replica).
    accumulate = {"batch_size": 4, "gradient_accumulation_steps": 2}
    runs = {"one": ("one_device", "fit", {}), "two": ("mirrored", "fit", {}),
            "custom": ("mirrored", "custom", {}), "accumulate": ("mirrored", "fit", accumulate),
            "accumulate_custom": ("mirrored", "custom", accumulate)}
    for name in sys.argv[4].split(","):
        strategy, loop, extra = runs[name]
        pretraining.pretrain(pretraining.load_config(
            **{**fields, **extra}, strategy=strategy, train_loop=loop,
            model_dir=sys.argv[3] + "/" + name,
            devices=["/cpu:0", "/cpu:1"] if strategy == "mirrored" else None))
""")


def _cluster_fields(tmp_path):
    write_records(tmp_path / "a.tfrecord", 64, seq_length=16, seed=0)
    write_records(tmp_path / "b.tfrecord", 64, seq_length=16, seed=1)
    small_config(vocab_size=32, max_position_embeddings=16, dropout=0.0).to_json_file(
        str(tmp_path / "bert_config.json")
    )
    return pretrain_fields(
        model=str(tmp_path / "bert_config.json"),
        batch_size=8,
        learning_rate=1e-3,
        train_steps=12,
        warmup_steps=2,
        checkpoint_every=6,
        log_every=1,
        seed=3,
    )


def _log(model_dir):
    return [json.loads(line) for line in open(os.path.join(model_dir, "train_log.jsonl"))]


@pytest.mark.slow
def test_mirrored_two_cpus_follows_the_one_device_trajectory(tmp_path):
    """2 replicas of 4 sequences = 1 device with the batch of 8, step by step,
    with `fit` and with the custom loop of multi-worker runs (same loss scaling);
    and so do 2 replicas accumulating 2 micro-batches of 2 each."""
    fields = _cluster_fields(tmp_path)
    fields.update(train_files=str(tmp_path / "a.tfrecord"))
    package_root = REPO_ROOT
    # A second MirroredStrategy in the same process aborted (TF 2.20) with a
    # collective "shape mismatch" between the two strategies' all-reduces.
    for runs in ("one,two", "custom", "accumulate", "accumulate_custom"):
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                MIRRORED_SCRIPT,
                json.dumps(fields),
                package_root,
                str(tmp_path),
                runs,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stdout + run.stderr
    one = _log(tmp_path / "one")
    expected = tf.train.load_checkpoint(str(tmp_path / "one" / "export" / "bert_model.ckpt"))
    for name in ("two", "custom", "accumulate", "accumulate_custom"):
        logged = _log(tmp_path / name)
        assert [r["step"] for r in logged] == [r["step"] for r in one] == list(range(1, 13))
        # Same data, same loss scaling, same clipping: what remains is float32
        # summation order (two half-batch gradients summed by the all-reduce),
        # measured at <= 6e-9 on the weights and <= 7.2e-7 (1.5 ulp) on the
        # logged losses after 12 steps. With the clipping norm of Keras, the
        # weights differed by 1.2e-4 (losses 7.5e-5); with a second data order
        # too, by 9e-3 (losses 2.4e-2).
        actual = tf.train.load_checkpoint(str(tmp_path / name / "export" / "bert_model.ckpt"))
        for variable in expected.get_variable_to_shape_map():
            np.testing.assert_allclose(
                actual.get_tensor(variable),
                expected.get_tensor(variable),
                rtol=1e-6,
                atol=1e-6,
                err_msg=f"{name}: {variable}",
            )
        # The logged metrics are the global batch's, not replica 0's (the custom
        # loop has no Keras "loss" tracker).
        metrics = [
            "masked_lm_loss",
            "next_sentence_loss",
            "masked_lm_accuracy",
            "next_sentence_accuracy",
        ] + (["loss"] if "custom" not in name else [])
        assert_same_logs(logged, one, metrics, name)


WORKER_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[2])
    from keras_bert.training import pretraining
    results = pretraining.pretrain(pretraining.load_config(**json.loads(sys.argv[1])))
    print("RESULTS " + json.dumps(results))
""")


@pytest.mark.slow
def test_multi_worker_two_processes_write_one_consistent_checkpoint(tmp_path):
    fields = _cluster_fields(tmp_path)
    fields.update(
        train_files=f"{tmp_path / 'a.tfrecord'},{tmp_path / 'b.tfrecord'}",
        eval_files=f"{tmp_path / 'a.tfrecord'},{tmp_path / 'b.tfrecord'}",
        eval_steps=2,
        strategy="multi_worker",
        model_dir=str(tmp_path / "cluster"),
    )
    outputs = run_workers(WORKER_SCRIPT, [json.dumps(fields), REPO_ROOT])
    results = printed_json(outputs, "RESULTS ")
    assert len(results) == 2 and results[0] == results[1]  # one model on both workers
    state = tf.train.get_checkpoint_state(str(tmp_path / "cluster" / "checkpoints"))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-6", "ckpt-12"]
    assert sorted(os.listdir(tmp_path / "cluster")) == [
        "checkpoints",
        "eval_results.json",
        "export",
        "pretrain_config.json",
        "tensorboard",
        "train_log.jsonl",
    ]  # worker 1's temporary checkpoint folder is gone
    reader = tf.train.load_checkpoint(state.model_checkpoint_path)
    step = [n for n in reader.get_variable_to_shape_map() if n.startswith("optimizer/_iterations")]
    assert step and reader.get_tensor(step[0]) == 12
