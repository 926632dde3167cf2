"""`resume_finetuning`: a command-line run killed mid-way continues in Python,
`model.fit` taking the next updates with the run's optimizer, schedule and
moments, and ends where the uninterrupted run ends; a finished run says why it
cannot continue and what to do instead."""

import os

import keras
import numpy as np
import pytest
from test_finetuning_runs import _crash_after, _encoder_file, _Killed, _sentiment, _weights

from keras_bert.dataset_options import epoch_order
from keras_bert.datasets.text_classification import read_text_examples
from keras_bert.errors import UserError
from keras_bert.training import finetuning
from keras_bert.training.finetuning import FinetuneConfig, resume_finetuning
from keras_bert.training.optimization import WarmupLinearDecay

from harness import finetune_fields, tolerance

ROWS, BATCH, EPOCHS, SEED = 32, 16, 3, 7  # 2 updates an epoch, 6 in all


def test_a_killed_run_continues_in_python_to_the_uninterrupted_weights(
    tmp_path, tiny_vocab_file, monkeypatch
):
    train = _sentiment(tmp_path / "train.tsv", ROWS)
    fields = finetune_fields(
        train=train,
        vocab_file=tiny_vocab_file,
        init_checkpoint=_encoder_file(tmp_path),
        batch_size=BATCH,
        learning_rate=1e-3,
        warmup_proportion=0.5,
        weight_decay=0.01,
        epochs=EPOCHS,
        seed=SEED,
        checkpoint_every=1,
        dropout=0.0,
        tensorboard=False,
    )
    finetuning.finetune(FinetuneConfig(**fields, output_dir=str(tmp_path / "whole")))

    output = str(tmp_path / "killed")
    _crash_after(monkeypatch, 3)  # mid-epoch 2, in the schedule's warmup-to-decay turn
    with pytest.raises(_Killed):
        finetuning.finetune(FinetuneConfig(**fields, output_dir=output))
    monkeypatch.undo()

    model = resume_finetuning(output)
    optimizer = model.optimizer
    assert int(optimizer.iterations.numpy()) == 3
    assert float(optimizer.learning_rate.numpy()) == pytest.approx(
        float(WarmupLinearDecay(1e-3, 6, 3)(3).numpy()), rel=1e-6
    )
    # Restored moments, not fresh ones.
    assert any(np.any(v.numpy() != 0) for v in optimizer.variables if "momentum" in v.path)

    # The rest of the run, in the order the command reads it (each epoch's
    # rows by the run's seed; epoch 2 from its second batch on).
    examples = read_text_examples(train)
    texts, labels = np.array(examples.texts_a, dtype=object), np.array(examples.labels)
    for epoch, skip in ((1, 1), (2, 0)):
        rows = epoch_order(ROWS, SEED, epoch)[skip * BATCH :]
        model.fit(texts[rows], labels[rows], batch_size=BATCH, shuffle=False, verbose=0)
    assert int(optimizer.iterations.numpy()) == 6
    assert float(optimizer.learning_rate.numpy()) == 0.0  # the run's decay, ended

    expected = _weights(str(tmp_path / "whole"))
    got = {weight.path: weight.numpy() for weight in model.weights}
    assert got.keys() == expected.keys()
    for path, value in expected.items():
        # Adam's steps are about the learning rate in size; the two agree to a
        # few roundings of each of the 3 updates.
        np.testing.assert_allclose(got[path], value, rtol=0, atol=tolerance(48), err_msg=path)

    with pytest.raises(UserError, match="finished run.*--init-checkpoint"):
        resume_finetuning(str(tmp_path / "whole"))
    with pytest.raises(FileNotFoundError, match="not the output folder"):
        resume_finetuning(str(tmp_path))


def test_a_run_on_data_in_memory_needs_it_again(tmp_path, tiny_vocab_file, monkeypatch):
    examples = read_text_examples(_sentiment(tmp_path / "train.tsv", 16))
    config = FinetuneConfig(
        **finetune_fields(
            vocab_file=tiny_vocab_file,
            init_checkpoint=_encoder_file(tmp_path),
            epochs=2,
            checkpoint_every=1,
            tensorboard=False,
            output_dir=str(tmp_path / "run"),
        )
    )
    train = (examples.texts_a, examples.labels)
    _crash_after(monkeypatch, 1)
    with pytest.raises(_Killed):
        finetuning.finetune(config, train=train)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="pass it as `train`"):
        resume_finetuning(config.output_dir)
    model = resume_finetuning(config.output_dir, train=train)
    assert int(model.optimizer.iterations.numpy()) == 1
    assert isinstance(model, keras.Model) and model.compiled
    assert os.path.exists(os.path.join(config.output_dir, "checkpoints", "ckpt-1.index"))
