"""Fine-tuning runs as pretraining's: a SIGKILLed run resumed by the same
command ends with the uninterrupted run's weights; early stopping and the best
model survive a resume; MirroredStrategy on 2 logical CPUs and 2 workers on
loopback follow the one-device run; accumulation, mixed precision and the
recipe files."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder
from keras_bert.training import finetuning, finetuning_run
from keras_bert.training.callbacks import ExactResume
from keras_bert.training.finetuning import FinetuneConfig

from harness import FINISHED_RUN_FILES, finetune_fields, small_config
from loopback_cluster import printed_json, run_workers
from repo_paths import REPO_ROOT

# No dropout anywhere: runs on different devices draw different masks.
ENCODER = small_config(vocab_size=30, dropout=0.0)
FILLER = ["the", "brown", "fox", "dog", "over", "a", "jumps"]
EMBEDDING_ROWS = os.path.join(REPO_ROOT, "tests", "fixtures", "embeddings")


def _sentiment(path, n, seed=0):
    """A sentence starting with `quick` is positive, with `lazy` negative."""
    rng = np.random.default_rng(seed)
    lines = ["label\tsentence"]
    for i in range(n):
        label = ("pos", "neg")[i % 2]
        words = ["quick" if label == "pos" else "lazy"] + list(
            rng.choice(FILLER, size=rng.integers(2, 9))
        )
        lines.append(f"{label}\t{' '.join(words)}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _encoder_file(tmp_path, config=ENCODER):
    keras.utils.set_random_seed(1)
    path = str(tmp_path / "encoder.keras")
    BertEncoder(config).save(path)
    return path


def _weights(output_dir):
    model = keras.models.load_model(os.path.join(output_dir, "model.keras"), compile=False)
    return {weight.path: weight.numpy() for weight in model.weights}


# The span head's bias shifts every position's start (end) logit alike, and a
# softmax over positions ignores that: its gradient is 0 but for float noise,
# which Adam's normalised update m / (sqrt(v) + epsilon) turns into steps of
# the learning rate's size that differ with the summation order. Not compared.
ZERO_GRADIENT_WEIGHTS = {"span_head/dense/bias"}


def _assert_same_weights(actual, expected, atol):
    assert actual.keys() == expected.keys()
    for path in actual.keys() - ZERO_GRADIENT_WEIGHTS:
        np.testing.assert_allclose(actual[path], expected[path], rtol=0, atol=atol, err_msg=path)


class _Killed(Exception):
    pass


def _crash_after(monkeypatch, step):
    """Makes the run die right after the update `step` (and its checkpoint)."""
    original = ExactResume.on_train_batch_end

    def on_train_batch_end(self, batch, logs=None):
        original(self, batch, logs)
        if int(self.model.optimizer.iterations.numpy()) == step:
            raise _Killed()

    monkeypatch.setattr(ExactResume, "on_train_batch_end", on_train_batch_end)


# Slow (two runs and a kill); the fast suite resumes a killed run exactly
# (test_resume_finetuning.py, test_python_fit_resume.py).
@pytest.mark.slow
def test_resume_keeps_the_best_model_and_the_early_stopping_state(
    tmp_path, tiny_vocab_file, monkeypatch
):
    """A run whose dev score never improves after epoch 1 (updates far below
    the weights' float32 resolution) stops after `patience` more epochs: also
    when it was killed in between, with the best model of epoch 1 on disk
    all along (a resume that forgot the state would call epoch 2 the best)."""
    train = _sentiment(tmp_path / "train.tsv", 48)
    dev = _sentiment(tmp_path / "dev.tsv", 16, seed=1)
    fields = finetune_fields(
        train=train,
        dev=dev,
        vocab_file=tiny_vocab_file,
        init_checkpoint=_encoder_file(tmp_path),
        learning_rate=1e-12,
        epochs=6,
        early_stopping_patience=2,
        checkpoint_every=2,
        dropout=0.0,
        tensorboard=False,
    )
    whole = finetuning.finetune(FinetuneConfig(**fields, output_dir=str(tmp_path / "whole")))
    assert whole["best_epoch"] == 1 and whole["steps"] == 3 * 6  # stopped after epoch 3

    output = str(tmp_path / "killed")
    _crash_after(monkeypatch, 8)  # in epoch 2, after its checkpoint at step 8
    with pytest.raises(_Killed):
        finetuning.finetune(FinetuneConfig(**fields, output_dir=output))
    assert sorted(os.listdir(output)) == ["best", "checkpoints"]
    assert json.load(open(os.path.join(output, "best", "best.json")))["best_epoch"] == 1
    assert tf.train.latest_checkpoint(os.path.join(output, "checkpoints")).endswith("ckpt-8")
    monkeypatch.undo()
    resumed = finetuning.finetune(FinetuneConfig(**fields, output_dir=output))
    assert (resumed["best_epoch"], resumed["steps"], resumed["dev"]) == (
        1,
        whole["steps"],
        whole["dev"],
    )
    _assert_same_weights(_weights(output), _weights(str(tmp_path / "whole")), atol=1e-7)
    # Finished: the training state is gone, the model is what remains.
    assert sorted(os.listdir(output)) == FINISHED_RUN_FILES


# Slow (four runs, 30 s on 2 cores): the fast suite keeps resuming itself
# (test_python_fit_resume, test_resume_finetuning).
@pytest.mark.precision
@pytest.mark.slow
def test_a_checkpoint_resumes_only_its_own_run(tmp_path, tiny_vocab_file, monkeypatch):
    train = _sentiment(tmp_path / "train.tsv", 32)
    fields = finetune_fields(
        train=train,
        vocab_file=tiny_vocab_file,
        preset="tiny",
        epochs=2,
        checkpoint_every=1,
        tensorboard=False,
        output_dir=str(tmp_path / "run"),
    )
    _crash_after(monkeypatch, 3)
    with pytest.raises(_Killed):
        finetuning.finetune(FinetuneConfig(**fields))
    monkeypatch.undo()
    with pytest.raises(
        ValueError,
        match=r"holds checkpoints of another run \(learning_rate: "
        r"5e-05 -> 0.001\).*--overwrite",
    ):
        finetuning.finetune(FinetuneConfig(**fields, learning_rate=1e-3))
    # Changing how it runs is fine; --overwrite starts afresh.
    assert finetuning.finetune(FinetuneConfig(**fields, eval_batch_size=7))["steps"] == 8
    assert (
        finetuning.finetune(FinetuneConfig(**{**fields, "learning_rate": 1e-3}, overwrite=True))[
            "steps"
        ]
        == 8
    )


@pytest.mark.precision
def test_accumulation_and_two_micro_batches_equal_one_batch(tmp_path, tiny_vocab_file):
    """batch 4 x 2 micro-batches per update = batch 8, update for update
    (the same rows in the same order; no dropout)."""
    train = _sentiment(tmp_path / "train.tsv", 32)
    fields = dict(
        task="classify",
        train=train,
        vocab_file=tiny_vocab_file,
        init_checkpoint=_encoder_file(tmp_path),
        seq_length=16,
        epochs=2,
        learning_rate=1e-3,
        dropout=0.0,
        verbose=0,
        tensorboard=False,
    )
    one = finetuning.finetune(
        FinetuneConfig(**fields, batch_size=8, output_dir=str(tmp_path / "one"))
    )
    two = finetuning.finetune(
        FinetuneConfig(
            **fields, batch_size=4, gradient_accumulation_steps=2, output_dir=str(tmp_path / "two")
        )
    )
    assert one["steps"] == two["steps"] == 8
    _assert_same_weights(
        _weights(str(tmp_path / "two")), _weights(str(tmp_path / "one")), atol=1e-6
    )


@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_mixed_precision_fine_tuning(tmp_path, tiny_vocab_file, precision):
    train = _sentiment(tmp_path / "train.tsv", 16)
    config = FinetuneConfig(
        **finetune_fields(
            train=train,
            vocab_file=tiny_vocab_file,
            preset="tiny",
            epochs=1,
            mixed_precision=precision,
        )
    )
    tokenizer = finetuning.resolve_tokenizer(config)[0]
    task = finetuning.make_task(config)
    data = task.read(train, training=True)
    strategy = tf.distribute.get_strategy()
    build = finetuning._model_builder(config, task, tokenizer)
    run = finetuning_run.compiled_run(config, task, data, None, build, strategy)
    dtypes = {layer.compute_dtype for layer in run.model.encoder._flatten_layers()}
    assert precision in dtypes
    # float16 gradients underflow without loss scaling; bfloat16 has float32's range.
    scaled = isinstance(run.model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (precision == "float16")
    result = finetuning_run.train(config, task, data, None, None, build, strategy)
    assert result.steps == 2
    assert all(np.isfinite(w).all() for w in result.model.get_weights())


def test_recipes_load_and_name_bad_fields(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "task: classify\ntrain: a.tsv\nlearning_rate: 2e-5\nepochs: 3\nmixed_precision: bfloat16\n"
    )
    config = finetuning.load_finetune_config(str(recipe), ["batch_size=16"], seed=4)
    assert (config.learning_rate, config.batch_size, config.seed) == (2e-5, 16, 4)
    recipe.write_text("task: classify\nlearning_rte: 2e-5\n")
    with pytest.raises(
        ValueError,
        match=r"recipe.yaml: unknown config field\(s\) "
        r"\['learning_rte'\]",
    ):
        finetuning.load_finetune_config(str(recipe))
    recipe.write_text("task: classify\nmixed_precision: float8\n")
    with pytest.raises(
        ValueError, match="recipe.yaml: config field mixed_precision must be one of"
    ):
        finetuning.load_finetune_config(str(recipe))


# === Real processes: SIGKILL, 2 logical CPUs, 2 workers ===


def _finetune_command(arguments):
    return [
        sys.executable,
        "-c",
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from keras_bert.cli import main; sys.exit(main(sys.argv[2:]))",
        REPO_ROOT,
        "finetune",
    ] + arguments


@pytest.mark.slow
def test_resume_after_sigkill_ends_with_the_uninterrupted_weights(tmp_path, tiny_vocab_file):
    """A real process killed mid-epoch between checkpoints; the same command
    again resumes at the checkpoint's step, batch position and dropout masks
    (dropout on), and ends with the uninterrupted run's weights."""
    train = _sentiment(tmp_path / "train.tsv", 640)
    dev = _sentiment(tmp_path / "dev.tsv", 32, seed=1)
    dropout = small_config(vocab_size=30)
    arguments = [
        "--task",
        "classify",
        "--train",
        train,
        "--dev",
        dev,
        "--vocab-file",
        tiny_vocab_file,
        "--init-checkpoint",
        _encoder_file(tmp_path, dropout),
        "--seq-length",
        "16",
        "--batch-size",
        "8",
        "--epochs",
        "4",
        "--learning-rate",
        "1e-3",
        "--checkpoint-every",
        "10",
        "--no-tensorboard",
        "--seed",
        "3",
    ]
    reference = subprocess.Popen(
        _finetune_command(arguments + ["--output-dir", str(tmp_path / "reference")]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    interrupted_dir = tmp_path / "interrupted"
    command = _finetune_command(arguments + ["--output-dir", str(interrupted_dir)])
    interrupted = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    checkpoints = interrupted_dir / "checkpoints"
    deadline = time.time() + 300
    killed_at = None
    while time.time() < deadline and interrupted.poll() is None:
        latest = tf.train.latest_checkpoint(str(checkpoints)) if checkpoints.exists() else None
        # Mid-epoch 2 (80 updates per epoch), not on an epoch's end.
        if latest and 90 <= int(latest.rsplit("-", 1)[1]) < 160:
            interrupted.send_signal(signal.SIGKILL)
            killed_at = int(latest.rsplit("-", 1)[1])
            break
        time.sleep(0.02)
    interrupted.wait()
    assert killed_at is not None, "the run finished (or never checkpointed) before the kill"
    latest = int(tf.train.latest_checkpoint(str(checkpoints)).rsplit("-", 1)[1])
    assert latest % 80 and not os.path.exists(interrupted_dir / "model.keras")
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"at step {latest} (epoch 2, batch {latest - 80} of 80)" in resumed.stdout
    output, _ = reference.communicate(timeout=600)
    assert reference.returncode == 0, output
    _assert_same_weights(
        _weights(str(interrupted_dir)), _weights(str(tmp_path / "reference")), atol=1e-6
    )
    results = [
        json.load(open(tmp_path / name / "dev_results.json"))
        for name in ("reference", "interrupted")
    ]
    assert results[0]["dev"] == results[1]["dev"]
    assert results[0]["best_epoch"] == results[1]["best_epoch"]


MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from keras_bert.training import finetuning
    fields = json.loads(sys.argv[2])
    for name, strategy in (("one", "one_device"), ("two", "mirrored")):
        config = finetuning.FinetuneConfig(**fields, strategy=strategy,
                                           output_dir=sys.argv[3] + "/" + name)
        if strategy == "mirrored":
            config.devices = ["/cpu:0", "/cpu:1"]
        result = finetuning.finetune(config)
        print("RESULT", name, json.dumps(result["steps"]))
""")


def _task_fields(task, tmp_path, datasets_dir, vocab_file, encoder_file):
    common = dict(
        vocab_file=vocab_file,
        init_checkpoint=encoder_file,
        dropout=0.0,
        learning_rate=1e-3,
        verbose=0,
        tensorboard=False,
        epochs=3,
    )
    if task == "classify":
        return dict(
            common,
            task="classify",
            train=_sentiment(tmp_path / "train.tsv", 32),
            seq_length=16,
            batch_size=8,
        )
    if task == "tag":
        return dict(
            common,
            task="tag",
            train=os.path.join(datasets_dir, "wnut16", "train.conll"),
            max_train_examples=32,
            seq_length=32,
            batch_size=8,
        )
    if task == "embed":  # 48 real headline / opening pairs: in-batch negatives
        return dict(
            common,
            task="embed",
            train=os.path.join(EMBEDDING_ROWS, "pairs_train.tsv"),
            seq_length=32,
            batch_size=8,
        )
    # 5 real SQuAD questions make 12 windows of 96 at stride 48: batch 4, 3 per epoch.
    return dict(
        common,
        task="squad",
        train=os.path.join(datasets_dir, "squad_samples", "squad_v1_sample.json"),
        seq_length=96,
        doc_stride=48,
        max_query_length=16,
        batch_size=4,
    )


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "tag", "squad", "embed"])
def test_mirrored_two_cpus_equals_one_device(
    task, tmp_path, datasets_dir, tiny_vocab_file, real_vocab_file
):
    """2 replicas, each half of every batch, = one device with the whole
    batch: the tagger's loss is normalised by the labelled pieces of the
    global batch, and the embedding model's anchors rank against every
    positive of the global batch, so the halves' gradients add up to the
    one-device gradient."""
    if task == "classify":
        vocab, encoder = tiny_vocab_file, _encoder_file(tmp_path)
    else:  # real text: the real vocabulary
        vocab, encoder = (
            real_vocab_file,
            _encoder_file(
                tmp_path,
                small_config(vocab_size=30522, max_position_embeddings=128, dropout=0.0),
            ),
        )
    fields = _task_fields(task, tmp_path, datasets_dir, vocab, encoder)
    run = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT, REPO_ROOT, json.dumps(fields), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    steps = [line.split()[2] for line in run.stdout.splitlines() if line.startswith("RESULT")]
    assert len(steps) == 2 and steps[0] == steps[1] and int(steps[0]) >= 6
    # What remains is float32 summation order (two half-batch gradients summed).
    _assert_same_weights(
        _weights(str(tmp_path / "two")), _weights(str(tmp_path / "one")), atol=1e-5
    )


WORKER_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from keras_bert.training import finetuning
    result = finetuning.finetune(finetuning.FinetuneConfig(**json.loads(sys.argv[2])))
    print("RESULT " + json.dumps(result["dev"]))
""")


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "embed"])
def test_two_workers_on_loopback_equal_one_device(task, tmp_path, tiny_vocab_file, real_vocab_file):
    """MultiWorkerMirroredStrategy (the custom loop: Keras' fit does not run it)
    with 2 processes = one device, checkpoints and dev scores included."""
    if task == "classify":
        fields = _task_fields(task, tmp_path, None, tiny_vocab_file, _encoder_file(tmp_path))
        fields.update(dev=_sentiment(tmp_path / "dev.tsv", 16, seed=1), checkpoint_every=2)
    else:
        encoder = _encoder_file(tmp_path, small_config(vocab_size=30522, dropout=0.0))
        fields = _task_fields(task, tmp_path, None, real_vocab_file, encoder)
        fields.update(
            dev=os.path.join(EMBEDDING_ROWS, "pairs_dev.tsv"), checkpoint_every=2, epochs=1
        )
    one = finetuning.finetune(FinetuneConfig(**fields, output_dir=str(tmp_path / "one")))
    outputs = run_workers(
        WORKER_SCRIPT,
        [
            REPO_ROOT,
            json.dumps(dict(fields, strategy="multi_worker", output_dir=str(tmp_path / "cluster"))),
        ],
    )
    results = printed_json(outputs, "RESULT ")
    assert len(results) == 2 and results[0] == results[1] == one["dev"]
    assert sorted(os.listdir(tmp_path / "cluster")) == FINISHED_RUN_FILES
    _assert_same_weights(
        _weights(str(tmp_path / "cluster")), _weights(str(tmp_path / "one")), atol=1e-5
    )
