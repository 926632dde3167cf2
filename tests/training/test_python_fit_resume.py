"""A Python script's `fit` with the public callbacks (`keras_bert.callbacks`)
survives SIGKILL: run again, it ends with the uninterrupted run's weights,
dropout on, best model and early-stopping state included. Keras' own
`BackupAndRestore` reruns the interrupted epoch instead (shown too)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from repo_paths import REPO_ROOT

# The user's script: tiny classifier, dropout on, AdamW over the run's steps,
# killed (a real SIGKILL, from inside, right after update KILL_AT) when asked.
SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    sys.path.insert(0, sys.argv[1])
    import keras, numpy as np
    import keras_bert
    from keras_bert.callbacks import BestOnDev, ExactResume, StopOnNonFiniteLoss, TrainLog
    from keras_bert.training.optimization import create_adamw

    vocab, run_dir, kill_at, keras_backup = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    rng = np.random.default_rng(0)
    words = ["the", "brown", "fox", "dog", "over", "a", "jumps"]
    def rows(n):
        labels = [("pos", "neg")[i % 2] for i in range(n)]
        texts = [("quick " if label == "pos" else "lazy ")
                 + " ".join(rng.choice(words, size=rng.integers(2, 9))) for label in labels]
        return texts, labels
    texts, labels = rows(40)
    dev_texts, dev_labels = rows(12)

    keras.utils.set_random_seed(3)
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))
    model = keras_bert.BertClassifier(
        encoder, 2, label_names=["neg", "pos"],
        preprocessor=keras_bert.BertPreprocessor(vocab, seq_length=16))
    model.compile(optimizer=create_adamw(1e-3, 15, 2))

    class KillAfter(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if int(self.model.optimizer.iterations.numpy()) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    if keras_backup == "keras":
        callbacks = [keras.callbacks.BackupAndRestore(run_dir, save_freq=2), KillAfter()]
    else:
        best = BestOnDev(lambda m: m.score(dev_texts, dev_labels), "accuracy",
                         directory=os.path.join(run_dir, "best"), patience=2)
        callbacks = [StopOnNonFiniteLoss(), ExactResume(os.path.join(run_dir, "checkpoints"),
                     seed=0, save_every=2), best, TrainLog(os.path.join(run_dir, "logs"), 8, 1),
                     KillAfter()]
    history = model.fit(texts, labels, batch_size=8, epochs=3, callbacks=callbacks, verbose=0)
    os.makedirs(run_dir, exist_ok=True)  # (BackupAndRestore removes its folder at the end)
    np.savez(os.path.join(run_dir, "weights.npz"), *model.get_weights())
    print(json.dumps({"steps": int(model.optimizer.iterations.numpy()),
                      "epochs_run": len(history.epoch)}))
    """
)


def _run(tmp_path, vocab, run_dir, kill_at=-1, loop="ours"):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), REPO_ROOT, vocab, str(run_dir), str(kill_at), loop],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _run_in_this_process(vocab, run_dir, capsys, monkeypatch):
    """The script's uninterrupted run in the test's own process (it sets its
    seeds itself): the reference the killed and rerun processes must reach,
    without paying for a third start of TensorFlow -> its summary line."""
    monkeypatch.setattr(sys, "argv", ["script.py", REPO_ROOT, vocab, str(run_dir), "-1", "ours"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    capsys.readouterr()
    exec(compile(SCRIPT, "script.py", "exec"), {"__name__": "__main__"})
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def _weights(run_dir):
    with np.load(os.path.join(run_dir, "weights.npz")) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def test_a_python_fit_killed_mid_epoch_resumes_to_the_uninterrupted_weights(
    tmp_path, tiny_vocab_file, capsys, monkeypatch
):
    whole_dir = tmp_path / "whole"
    whole = _run_in_this_process(tiny_vocab_file, whole_dir, capsys, monkeypatch)
    assert whole["steps"] == 15  # 3 epochs of 5 updates

    killed_dir = tmp_path / "killed"
    killed = _run(tmp_path, tiny_vocab_file, killed_dir, kill_at=7)  # epoch 2, batch 2 of 5
    assert killed.returncode == -9  # SIGKILL: no handler ran
    resumed = _run(tmp_path, tiny_vocab_file, killed_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "at step 7 (epoch 2, batch 2 of 5)" in resumed.stdout  # its checkpoint before the kill
    assert json.loads(resumed.stdout.splitlines()[-1])["steps"] == 15
    for ours, theirs in zip(_weights(killed_dir), _weights(whole_dir)):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    # The train log continues the same curve: each update once, each epoch's dev figures once.
    with open(killed_dir / "logs" / "train_log.jsonl") as f:
        records = [json.loads(line) for line in f]
    steps = [r["step"] for r in records if "loss" in r]
    assert steps == list(range(1, 16))
    assert [r["step"] for r in records if "dev_accuracy" in r] == [5, 10, 15]


@pytest.mark.slow
def test_keras_backup_and_restore_reruns_the_interrupted_epoch(tmp_path, tiny_vocab_file):
    """Why ExactResume exists: Keras' callback, killed in the same place,
    restarts epoch 2 from its first batch (more updates, other weights)."""
    whole_dir, killed_dir = tmp_path / "whole", tmp_path / "killed"
    assert _run(tmp_path, tiny_vocab_file, whole_dir, loop="keras").returncode == 0
    assert _run(tmp_path, tiny_vocab_file, killed_dir, kill_at=7, loop="keras").returncode == -9
    resumed = _run(tmp_path, tiny_vocab_file, killed_dir, loop="keras")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout.splitlines()[-1])["steps"] > 15
