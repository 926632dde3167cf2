"""Pretraining driver and optimisers: LAMB against Model Garden, gradient
accumulation, recipes as config files, checkpoints, export, two phases, resume
after SIGKILL (a real subprocess)."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import cli
from keras_bert.config import BertConfig
from keras_bert.models.encoder import load_encoder_and_heads
from keras_bert.training import distribute, optimization, pretraining

from harness import (
    BERT_DROPOUT,
    SHORT_RUN,
    killed_and_resumed,
    pretrain_fields,
    run_command,
    tiny_config,
)
from synthetic_pretraining import write_records

TINY = tiny_config(vocab_size=32, hidden_size=16, intermediate_size=32, max_position_embeddings=32)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pretraining")
    write_records(directory / "train.tfrecord", 64, seq_length=16, seed=0)
    write_records(directory / "long.tfrecord", 32, seq_length=32, seed=1)
    TINY.to_json_file(str(directory / "bert_config.json"))
    return directory


def tiny_fields(data_dir, model_dir, **fields):
    """The tiny pretraining run's config fields: 10 steps on the records of
    `data_dir`, a checkpoint every 5."""
    values = pretrain_fields(
        model=str(data_dir / "bert_config.json"),
        train_files=str(data_dir / "train.tfrecord"),
        eval_files=str(data_dir / "train.tfrecord"),
        eval_steps=2,
        model_dir=str(model_dir),
        **SHORT_RUN,
    )
    return {**values, **fields}


def tiny_config(data_dir, model_dir, **fields):
    return pretraining.load_config(**tiny_fields(data_dir, model_dir, **fields))


# === Optimisers ===


def test_lamb_matches_model_garden():
    from official.modeling.optimization.lamb import LAMB as ReferenceLamb

    rng = np.random.default_rng(0)
    values = {"kernel": rng.normal(size=(4, 3)), "gamma": rng.normal(size=(3,))}
    grads = [{k: rng.normal(size=v.shape) for k, v in values.items()} for _ in range(3)]
    ours = [keras.Variable(v.astype("float32"), name=k) for k, v in values.items()]
    optimizer = optimization.Lamb(learning_rate=0.01, weight_decay_rate=0.1)
    reference_vars = [
        tf.Variable(v.astype("float32"), name=f"layer/{k}") for k, v in values.items()
    ]
    reference = ReferenceLamb(
        learning_rate=0.01,
        weight_decay_rate=0.1,
        exclude_from_weight_decay=["gamma", "beta", "bias"],
    )
    for g in grads:
        optimizer.apply_gradients(
            [(tf.constant(g[k], tf.float32), v) for k, v in zip(values, ours)]
        )
        reference.apply_gradients(
            [(tf.constant(g[k], tf.float32), v) for k, v in zip(values, reference_vars)]
        )
    for mine, theirs in zip(ours, reference_vars):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


def test_schedule_and_clipping():
    optimizer = optimization.create_optimizer(
        "adamw", 1e-3, total_steps=100, warmup_steps=10, clipnorm=1.0
    )
    schedule = optimizer._learning_rate
    assert float(schedule(5)) == pytest.approx(5e-4)
    assert float(schedule(55)) == pytest.approx(1e-3 * 45 / 90)
    assert float(schedule(100)) == 0.0
    assert (
        optimizer.global_clipnorm == 1.0 and optimizer.beta_2 == 0.999 and optimizer.epsilon == 1e-6
    )
    # Fine-tuning clips too, as google-research/bert's optimization.py (clip_norm=1.0).
    assert optimization.create_adamw(5e-5, 100, 10).global_clipnorm == 1.0
    clipped = optimizer._clip_gradients([tf.constant([3.0, 4.0]), tf.constant([12.0])])
    np.testing.assert_allclose([c.numpy() for c in clipped][0], [3 / 13, 4 / 13], rtol=1e-6)
    # Below the threshold the gradients come back as they went in, None kept in place.
    small = [tf.constant([0.3, 0.4]), None, tf.constant([1e-8])]
    unclipped = optimizer._clip_gradients(small)
    assert unclipped[1] is None
    np.testing.assert_array_equal(unclipped[0].numpy(), np.float32([0.3, 0.4]))
    np.testing.assert_array_equal(unclipped[2].numpy(), np.float32([1e-8]))
    with pytest.raises(ValueError, match="optimizer must be one of"):
        optimization.create_optimizer("sgd")
    # Keras' own accumulation (the optimizer's, not steps.Trainer's) calls the
    # schedule with batches: 4 per update, so batch 20 is update 5.
    keras_accumulation = optimization.create_adamw(1e-3, 100, 10, gradient_accumulation_steps=4)
    assert float(keras_accumulation._learning_rate(20)) == pytest.approx(5e-4)


def test_adamw_equals_a_numpy_adamw_and_sums_repeated_rows():
    # Written from the update rule (Loshchilov & Hutter's decoupled decay of
    # lr * wd * w first, none on LayerNorm / bias; then Adam's Algorithm 1,
    # epsilon added to sqrt(v_hat), as torch.optim.AdamW). The embedding gradient
    # comes as IndexedSlices with a repeated row: the moments see the summed row.
    rng = np.random.default_rng(0)
    start = {"embeddings": rng.normal(size=(3, 2)), "gamma": rng.normal(size=(2,))}
    lr, wd, b1, b2, eps = 0.05, 0.1, 0.9, 0.999, 1e-6
    variables = {k: keras.Variable(v.astype("float32"), name=k) for k, v in start.items()}
    optimizer = optimization.create_adamw(
        lr, total_steps=10**6, warmup_steps=0, weight_decay=wd, clipnorm=None
    )  # the rule alone, unclipped
    optimizer._learning_rate = lr  # a constant rate keeps the reference short
    expected = {k: v.copy() for k, v in start.items()}
    m = {k: np.zeros_like(v) for k, v in start.items()}
    v2 = {k: np.zeros_like(v) for k, v in start.items()}
    for t in range(1, 5):
        rows = rng.normal(size=(3, 2))
        ids = np.array([0, 0, 2])  # row 0 twice, row 1 never
        dense = {"embeddings": np.zeros((3, 2)), "gamma": rng.normal(size=(2,))}
        np.add.at(dense["embeddings"], ids, rows)
        grads = [
            tf.IndexedSlices(tf.constant(rows, tf.float32), tf.constant(ids), tf.constant([3, 2])),
            tf.constant(dense["gamma"], tf.float32),
        ]
        optimizer.apply_gradients(zip(grads, [variables["embeddings"], variables["gamma"]]))
        for k in expected:
            if k == "embeddings":
                expected[k] -= lr * wd * expected[k]
            m[k] = b1 * m[k] + (1 - b1) * dense[k]
            v2[k] = b2 * v2[k] + (1 - b2) * dense[k] ** 2
            m_hat, v_hat = m[k] / (1 - b1**t), v2[k] / (1 - b2**t)
            expected[k] -= lr * m_hat / (np.sqrt(v_hat) + eps)
    for k in expected:
        np.testing.assert_allclose(variables[k].numpy(), expected[k], rtol=1e-5, atol=1e-6)


def test_adamw_adds_epsilon_to_the_corrected_second_moment():
    # A gradient entry as small as epsilon: at step 1 m_hat = g and
    # sqrt(v_hat) = |g|, so Algorithm 1
    # moves the weight by lr * g / (g + eps) = lr / 2. Keras's form (epsilon on
    # sqrt(v), i.e. eps / sqrt(1 - 0.999) on sqrt(v_hat)) would move it by
    # lr * 1e-6 / (1e-6 + 3.16e-5) = lr * 0.0307.
    lr, eps = 0.01, 1e-6
    bias = keras.Variable(np.zeros((2,), np.float32), name="bias")  # no weight decay
    optimizer = optimization.create_adamw(lr, total_steps=10**6, warmup_steps=0, clipnorm=None)
    optimizer._learning_rate = lr
    optimizer.apply_gradients([(tf.constant([eps, -eps]), bias)])
    np.testing.assert_allclose(bias.numpy(), [-lr / 2, lr / 2], rtol=1e-4)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_clipping_norm_sums_repeated_embedding_rows(name):
    # An embedding's gradient: row 0 looked up twice (3, 0) + (-3, 4) = (0, 4),
    # row 1 once; the dense gradient [[0, 4], [0, 3]] and a bias gradient (12)
    # have norm 13 (not sqrt(9 + 16 + 9 + 9 + 144) from the slices one by one).
    optimizer = optimization.create_optimizer(
        name, 1e-3, total_steps=10, warmup_steps=1, clipnorm=1.0
    )
    slices = tf.IndexedSlices(
        tf.constant([[3.0, 0.0], [-3.0, 4.0], [0.0, 3.0]]),
        tf.constant([0, 0, 1]),
        dense_shape=tf.constant([2, 2]),
    )
    clipped_slices, clipped_bias = optimizer._clip_gradients([slices, tf.constant([12.0])])
    np.testing.assert_allclose(
        tf.convert_to_tensor(clipped_slices).numpy(), [[0.0, 4 / 13], [0.0, 3 / 13]], rtol=1e-6
    )
    np.testing.assert_allclose(clipped_bias.numpy(), [12 / 13], rtol=1e-6)


@pytest.mark.parametrize("compiled", ["eager", "graph", "xla"])
def test_clipping_scales_embedding_rows_before_densifying(compiled):
    # In a graph, an embedding's rows are summed per id (tf.unique) and the
    # norm and scaling read those rows, not the dense (V, H) table; under XLA
    # (static shapes) it is made dense first. Every way, the dense result is
    # the one from densifying first: tf.clip_by_global_norm of the dense rows.
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, 40).astype(np.int32)  # repeats
    rows = rng.normal(size=(40, 8)).astype(np.float32)
    bias = rng.normal(size=(8,)).astype(np.float32)
    optimizer = optimization.create_adamw(1e-3, total_steps=10, warmup_steps=1, clipnorm=1.0)

    def clip():
        slices = tf.IndexedSlices(tf.constant(rows), tf.constant(ids), tf.constant([50, 8]))
        return optimizer._clip_gradients([slices, tf.constant(bias)])

    if compiled != "eager":
        clip = tf.function(clip, jit_compile=compiled == "xla")
        graph = clip.get_concrete_function().graph
        uniques = [op for op in graph.get_operations() if op.type == "Unique"]
        assert bool(uniques) == (compiled == "graph")
    clipped_table, clipped_bias = clip()
    dense = tf.math.unsorted_segment_sum(rows, ids, 50)
    expected, norm = tf.clip_by_global_norm([dense, tf.constant(bias)], 1.0)
    assert norm.numpy() > 1.0  # scaled
    slices = tf.IndexedSlices(tf.constant(rows), tf.constant(ids), tf.constant([50, 8]))
    np.testing.assert_allclose(
        optimization.global_norm([slices, None, tf.constant(bias)]).numpy(), norm.numpy(), rtol=1e-6
    )
    np.testing.assert_allclose(clipped_table.numpy(), expected[0].numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(clipped_bias.numpy(), expected[1].numpy(), rtol=1e-6)


def test_lamb_takes_indexed_slices_unclipped():
    # An embedding's gradient reaches update_step as IndexedSlices without clipping.
    dense = np.array([[0.0, 4.0], [0.0, 3.0]], np.float32)
    slices = tf.IndexedSlices(
        tf.constant([[3.0, 0.0], [-3.0, 4.0], [0.0, 3.0]]),
        tf.constant([0, 0, 1]),
        dense_shape=tf.constant([2, 2]),
    )
    results = []
    for gradient in (slices, tf.constant(dense)):
        variable = keras.Variable(np.ones((2, 2), np.float32), name="embeddings")
        optimizer = optimization.create_optimizer(
            "lamb", 1e-2, total_steps=10, warmup_steps=0, clipnorm=None
        )
        optimizer.apply_gradients([(gradient, variable)])
        results.append(variable.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
    assert not np.allclose(results[0], 1.0)


@pytest.mark.precision
def test_pretrain_with_accumulation_trains_the_same_updates(data_dir, tmp_path):
    # batch_size 4 x 2 micro-batches = the run with batch_size 8: same steps,
    # same data (one dataset element per update), same weights.
    runs = {}
    for name, batch_size, accumulation in (("big", 8, 1), ("accumulated", 4, 2)):
        config = tiny_config(
            data_dir,
            tmp_path / name,
            batch_size=batch_size,
            eval_files=None,
            gradient_accumulation_steps=accumulation,
        )
        pretraining.pretrain(config)
        runs[name] = [json.loads(line) for line in open(tmp_path / name / "train_log.jsonl")]
    assert [r["step"] for r in runs["accumulated"]] == [r["step"] for r in runs["big"]] == [5, 10]
    for big, accumulated in zip(runs["big"], runs["accumulated"]):
        for metric in ("masked_lm_loss", "next_sentence_loss", "learning_rate"):
            assert accumulated[metric] == pytest.approx(big[metric], rel=1e-5), metric
    expected, actual = _export(tmp_path / "big"), _export(tmp_path / "accumulated")
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


# === Config files ===


def test_load_config_from_yaml_with_overrides(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(
        "model: tiny\ntrain_files: a.tfrecord\nmodel_dir: out\n"
        "train_steps: 100\ncheckpoint_every: 10\nwarmup_steps: 10\nlearning_rate: 1e-4\n"
    )
    config = pretraining.load_config(
        str(path), ["train_steps=20", "optimizer=lamb", "eval_files=null"]
    )
    assert (config.train_steps, config.optimizer, config.learning_rate) == (20, "lamb", 1e-4)
    path.write_text("model: tiny\ntrain_file: a\n")
    with pytest.raises(
        ValueError, match=r"recipe.yaml: unknown config field\(s\) \['train_file'\]"
    ):
        pretraining.load_config(str(path))
    with pytest.raises(ValueError, match="multiple of checkpoint_every"):
        pretraining.load_config(
            None,
            ["train_steps=15", "checkpoint_every=10", "warmup_steps=1"],
            train_files="a",
            model_dir="b",
        )
    with pytest.raises(ValueError, match="--set expects key=value"):
        pretraining.load_config(None, ["train_steps"])
    with pytest.raises(
        ValueError, match="jit_compile must be true, false or auto, got 'sometimes'"
    ):
        pretraining.load_config(None, ["jit_compile=sometimes"], train_files="a", model_dir="b")
    # The default, auto: XLA only where there is a GPU or TPU.
    assert config.jit_compile == "auto"
    accelerators = [d for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
    assert distribute.resolve_jit_compile("auto") is bool(accelerators)
    assert (distribute.resolve_jit_compile(True), distribute.resolve_jit_compile(False)) == (
        True,
        False,
    )


# === The driver ===


def test_cli_pretrain_checkpoints_logs_exports_and_is_idempotent(data_dir, tmp_path, capsys):
    recipe = tmp_path / "recipe.json"
    fields = tiny_fields(data_dir, tmp_path / "run", train_steps=100, checkpoint_every=50)
    del fields["verbose"]  # the command's progress lines, as a user sees them
    recipe.write_text(json.dumps(fields))
    assert (
        run_command(
            "pretrain --config {config} --set train_steps=10 --set "
            "checkpoint_every=5 --set verbose=0",
            config=recipe,
        )
        == 0
    )
    assert "masked_lm_accuracy" in capsys.readouterr().out
    index = tf.train.get_checkpoint_state(str(tmp_path / "run" / "checkpoints"))
    assert [os.path.basename(p) for p in index.all_model_checkpoint_paths] == ["ckpt-5", "ckpt-10"]
    records = [json.loads(line) for line in open(tmp_path / "run" / "train_log.jsonl")]
    assert [r["step"] for r in records] == [5, 10]
    schedule = optimization.WarmupLinearDecay(1e-3, 10, 2)
    # The optimizer's learning rate, logged after step s, is the one of update s + 1.
    assert records[0]["learning_rate"] == pytest.approx(float(schedule(5)), rel=1e-5)
    assert records[1]["sequences_per_second"] > 0
    assert os.listdir(tmp_path / "run" / "tensorboard" / "train")
    encoder, heads = load_encoder_and_heads(str(tmp_path / "run" / "export"))
    assert len(heads) == 7 and encoder.config == TINY
    results = json.load(open(tmp_path / "run" / "eval_results.json"))
    assert results["step"] == 10
    # Running the finished recipe again restores step 10 and trains no further.
    again = pretraining.pretrain(
        pretraining.load_config(str(recipe), ["train_steps=10", "checkpoint_every=5", "verbose=0"])
    )
    assert again["masked_lm_loss"] == pytest.approx(results["masked_lm_loss"], rel=1e-6)
    assert cli.main(["pretrain", "--config", str(tmp_path / "missing.yaml")]) == 2


@pytest.mark.slow
def test_two_phases_start_from_the_first_phase(data_dir, tmp_path):
    pretraining.pretrain(tiny_config(data_dir, tmp_path / "phase1"))
    # Phase 2: length 32, from phase 1's export; learning rate 0 keeps its weights.
    phase2 = tiny_config(
        data_dir,
        tmp_path / "phase2",
        init_checkpoint=str(tmp_path / "phase1" / "export"),
        model=None,
        seq_length=32,
        train_files=str(data_dir / "long.tfrecord"),
        eval_files=None,
        learning_rate=0.0,
        train_steps=5,
    )
    pretraining.pretrain(phase2)
    first = tf.train.load_checkpoint(str(tmp_path / "phase1" / "export" / "bert_model.ckpt"))
    second = tf.train.load_checkpoint(str(tmp_path / "phase2" / "export" / "bert_model.ckpt"))
    names = first.get_variable_to_shape_map()
    assert names == second.get_variable_to_shape_map() and len(names) > 30
    for name in names:
        np.testing.assert_array_equal(first.get_tensor(name), second.get_tensor(name), err_msg=name)


# === Resume after SIGKILL ===


def _export(model_dir):
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "export", "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.slow
def test_resume_after_sigkill_loses_and_repeats_no_step(data_dir, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"model: {data_dir / 'bert_config.json'}\ntrain_files: {data_dir / 'train.tfrecord'}\n"
        "seq_length: 16\nmax_predictions_per_seq: 4\nbatch_size: 8\nlearning_rate: 0.001\n"
        "train_steps: 300\nwarmup_steps: 30\ncheckpoint_every: 20\nlog_every: 20\n"
        "jit_compile: false\nverbose: 0\nseed: 7\n"
    )
    killed_at, _ = killed_and_resumed(recipe, tmp_path, 100)
    assert 100 <= killed_at < 300
    # Same final weights as the uninterrupted run: the right step, learning
    # rate and batches after the restart (one lost or repeated batch would differ).
    expected, actual = _export(tmp_path / "reference"), _export(tmp_path / "interrupted")
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
    steps = [
        json.loads(line)["step"] for line in open(tmp_path / "interrupted" / "train_log.jsonl")
    ]
    assert steps == list(range(20, 301, 20))


@pytest.mark.precision
def test_resume_draws_the_dropout_masks_of_an_uninterrupted_run(data_dir, tmp_path):
    # Before: with dropout, a resumed run's losses drifted from an uninterrupted
    # run's (the SIGKILL test above runs without dropout): the dropout seed
    # generators were not in the checkpoint, so a resumed run replayed step 0's masks.
    dropout = BertConfig(**{**TINY.to_dict(), **BERT_DROPOUT})
    dropout.to_json_file(str(tmp_path / "bert_config.json"))
    fields = dict(model=str(tmp_path / "bert_config.json"), eval_files=None)
    pretraining.pretrain(tiny_config(data_dir, tmp_path / "whole", **fields))
    # The same run "killed" after its first checkpoint: the index points at ckpt-5.
    import shutil

    shutil.copytree(tmp_path / "whole", tmp_path / "resumed")
    (tmp_path / "resumed" / "eval_results.json").unlink()
    (tmp_path / "resumed" / "checkpoints" / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-5"\nall_model_checkpoint_paths: "ckpt-5"\n'
    )
    pretraining.pretrain(tiny_config(data_dir, tmp_path / "resumed", **fields))
    expected, actual = _export(tmp_path / "whole"), _export(tmp_path / "resumed")
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
    steps = [json.loads(line)["step"] for line in open(tmp_path / "resumed" / "train_log.jsonl")]
    assert steps == [5, 10]
    losses = [
        json.loads(line)["masked_lm_loss"] for line in open(tmp_path / "whole" / "train_log.jsonl")
    ]
    assert losses == [
        json.loads(line)["masked_lm_loss"]
        for line in open(tmp_path / "resumed" / "train_log.jsonl")
    ]
