"""The fine-tuning driver: every epoch is one pass, a tiny
model learns a separable task end to end, saved models evaluate the same, the
checkpoint formats load, the paper's search and the CLI run."""

import dataclasses
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder, checkpoints, dataset_options
from keras_bert.datasets import squad
from keras_bert.datasets.tagging import read_conll
from keras_bert.models.classifier import BertClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor
from keras_bert.training import finetuning, finetuning_run, optimization
from keras_bert.training.callbacks import ExactResume
from keras_bert.training.finetuning import FinetuneConfig

from harness import (
    FINISHED_RUN_FILES,
    finetune_fields,
    run_command,
    run_predict,
    small_config,
    write_sentiment,
)

CONFIG = small_config(vocab_size=30)


def _features(n=10, seq_length=24, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq_length + 1, size=n)
    mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
    return {
        "input_ids": (rng.integers(5, 30, size=(n, seq_length)) * mask).astype(np.int32),
        "input_mask": mask,
        "segment_ids": np.zeros((n, seq_length), np.int32),
    }


@pytest.mark.parametrize("bucket_by_length", [False, True])
def test_every_epoch_is_one_full_pass(bucket_by_length, monkeypatch, tiny_vocab_file, tmp_path):
    """The schedule counts the batches the data really gives, and every epoch
    trains on all of them (length buckets each end on a partial batch, so
    there are more than n / batch_size)."""
    data = {
        "features": _features(n=70, seq_length=48),
        "targets": np.random.default_rng(0).integers(0, 2, 70),
        "weights": None,
    }
    lengths = dataset_options.row_lengths(data["features"])
    width = 48 if bucket_by_length else None
    batches = list(
        dataset_options.ordered_batches(
            data["features"],
            data["targets"],
            batches=dataset_options.epoch_batches(lengths, 8, 0, 0, bucket_width=width),
        )
    )
    expected = len(batches)
    assert expected > 9 if bucket_by_length else expected == 9
    assert sum(len(b[1]) for b in batches) == 70  # every row once
    # Each bucketed batch's rows within one bucket: [0, 16), [16, 32), [32, 48].
    if bucket_by_length:
        for features, _ in batches:
            lengths = np.asarray(features["input_mask"]).sum(axis=1)
            assert len(set(np.searchsorted([16, 32], lengths, side="right"))) == 1
    # The command's run: texts read from a file, encoded by the model's preprocessor.
    train = write_sentiment(tmp_path / "train.tsv", 70, seed=0)
    config = FinetuneConfig(
        **finetune_fields(
            train=train,
            vocab_file=tiny_vocab_file,
            seq_length=48,
            epochs=3,
            bucket_by_length=bucket_by_length,
        )
    )
    texts = [line.split("\t")[1] for line in open(train).read().splitlines()[1:]]
    encoded = BertPreprocessor(tiny_vocab_file, seq_length=48).encode(texts)
    per_epoch = len(
        dataset_options.epoch_batches(
            dataset_options.row_lengths(encoded), 8, 0, 0, bucket_width=width
        )
    )
    monkeypatch.setattr(finetuning, "load_encoder", lambda *args: BertEncoder(CONFIG))
    assert finetuning.finetune(config)["steps"] == 3 * per_epoch


@pytest.mark.slow
def test_tiny_classifier_learns_and_evaluates_the_same_after_saving(
    tmp_path, tiny_vocab_file, capsys
):
    train = write_sentiment(tmp_path / "train.tsv", 192, seed=0)
    dev = write_sentiment(tmp_path / "dev.tsv", 32, seed=1)
    output = str(tmp_path / "run")
    config = FinetuneConfig(
        **finetune_fields(
            train=train,
            dev=dev,
            output_dir=output,
            vocab_file=tiny_vocab_file,
            preset="tiny",
            batch_size=16,
            learning_rate=1e-4,
            epochs=10,
            bucket_by_length=True,
        )
    )
    result = finetuning.finetune(config)
    assert result["dev"]["accuracy"] >= 0.9  # chance is 0.5
    assert sorted(os.listdir(output)) == sorted([*FINISHED_RUN_FILES, "logs"])
    saved = json.load(open(os.path.join(output, "finetune_config.json")))
    assert saved["label_names"] == ["neg", "pos"]
    model = keras.models.load_model(os.path.join(output, "model.keras"))
    assert model.label_names == ["neg", "pos"]
    assert result["dev_examples_scored"] == result["dev_examples_in_data"] == 32
    counts = {"examples_scored": 32, "examples_in_data": 32}
    assert finetuning.evaluate(output, dev) == {**result["dev"], **counts}

    # The saved model takes text; `keras-bert predict` answers through it.
    texts = [line.split("\t")[1] for line in open(dev).read().splitlines()[1:]]
    labels = model.predict_labels(texts)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(
        "\n".join(json.dumps({"text": t}) for t in texts[:5])
        + "\n\n"
        + "\n".join(json.dumps({"text": t}) for t in texts[5:])
        + "\n"
    )
    answers_file = str(tmp_path / "answers.jsonl")
    assert (
        run_command(
            "predict --model-dir {model_dir} --input {input} --output {output} --batch-size 7",
            model_dir=output,
            input=inputs,
            output=answers_file,
        )
        == 0
    )
    answers = [json.loads(line) for line in open(answers_file)]
    assert answers[5] == {"line": 6, "blank": True}  # the blank line, in its place
    answers = answers[:5] + answers[6:]
    assert [a["line"] for a in answers] == [*range(1, 6), *range(7, len(texts) + 2)]
    assert [a["label"] for a in answers] == labels
    np.testing.assert_allclose(
        [[a["probabilities"][n] for n in ("neg", "pos")] for a in answers],
        model.predict_proba(texts),
        atol=1e-6,
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"txt": "typo"}\n')
    assert run_predict(output, bad, tmp_path / "never.jsonl") == 2
    assert "bad.jsonl, line 2: field(s) ['text'] missing" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "never.jsonl")


def test_load_encoder_from_keras_files(tmp_path, minilm_path):
    encoder = BertEncoder(CONFIG)
    encoder.save(str(tmp_path / "encoder.keras"))
    BertClassifier(encoder, 2).save(str(tmp_path / "classifier.keras"))
    features = _features(2)
    expected = encoder(features)["pooled_output"].numpy()
    for name in ("encoder.keras", "classifier.keras"):
        loaded = finetuning.load_encoder(str(tmp_path / name))
        assert isinstance(loaded, BertEncoder)
        np.testing.assert_allclose(
            loaded(features)["pooled_output"].numpy(), expected, rtol=1e-5, atol=1e-6
        )
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)]).save(str(tmp_path / "x.keras"))
    with pytest.raises(ValueError, match="neither a BertEncoder"):
        finetuning.load_encoder(str(tmp_path / "x.keras"))
    # keras-bert pretrain's export (original TF1 names + bert_config.json), given as
    # the export folder or as the pretraining model_dir.
    from keras_bert.models.pretrainer import BertPretrainer
    from keras_bert.training.pretraining import export_tf1

    export_tf1(BertPretrainer(encoder), str(tmp_path / "pretrain" / "export"))
    for path in (tmp_path / "pretrain" / "export", tmp_path / "pretrain"):
        loaded = finetuning.load_encoder(str(path))
        np.testing.assert_allclose(
            loaded(features)["pooled_output"].numpy(), expected, rtol=1e-5, atol=1e-6
        )
    hf = finetuning.load_encoder(minilm_path)
    assert hf.config.hidden_size == 384
    assert checkpoints.resolve(minilm_path).vocab_file == os.path.join(minilm_path, "vocab.txt")


@pytest.mark.slow
def test_paper_search_writes_a_table_and_keeps_the_best(tmp_path, tiny_vocab_file, monkeypatch):
    monkeypatch.setattr(
        finetuning,
        "PAPER_GRID",
        {"batch_size": (16,), "learning_rate": (1e-4, 1e-7), "epochs": (3,)},
    )
    train = write_sentiment(tmp_path / "train.tsv", 64, seed=0)
    dev = write_sentiment(tmp_path / "dev.tsv", 32, seed=1)
    output = str(tmp_path / "search")
    result = finetuning.finetune(
        FinetuneConfig(
            task="classify",
            train=train,
            dev=dev,
            output_dir=output,
            vocab_file=tiny_vocab_file,
            seq_length=16,
            verbose=0,
            search="paper",
            restarts=2,
            tensorboard=False,
        )
    )
    assert len(result["runs"]) == 4
    best = max(result["runs"], key=lambda r: r["accuracy"])
    assert result["best_run"] == best and best["learning_rate"] == 1e-4
    table = open(os.path.join(output, "search_results.md")).read()
    assert table.count("\n") == 6 and "**best**" in table
    saved = json.load(open(os.path.join(output, "dev_results.json")))
    assert saved["run"] == best


@pytest.mark.slow
@pytest.mark.proof
def test_cli_finetune_and_evaluate_tagging_on_wnut16(
    tmp_path, datasets_dir, real_vocab_file, capsys
):
    output = str(tmp_path / "tag")
    wnut = os.path.join(datasets_dir, "wnut16")
    assert (
        run_command(
            "finetune --task tag --train {train} --dev {dev} --vocab-file "
            "{vocab_file} --max-train-examples 64 --max-dev-examples 32 "
            "--seq-length 32 --batch-size 16 --epochs 1 --output-dir "
            "{output_dir}",
            train=f"{wnut}/train.conll",
            dev=f"{wnut}/dev.conll",
            vocab_file=real_vocab_file,
            output_dir=output,
        )
        == 0
    )
    capsys.readouterr()
    trained = json.load(open(os.path.join(output, "dev_results.json")))
    assert set(trained["dev"]) == {"precision", "recall", "f1"}
    assert (
        run_command(
            "evaluate --model-dir {model_dir} --data {data} --max-examples 32",
            model_dir=output,
            data=f"{wnut}/dev.conll",
        )
        == 0
    )
    captured = capsys.readouterr()
    printed = captured.out
    scored = json.loads(printed[printed.rindex("{\n") :])
    in_data = len(read_conll(f"{wnut}/dev.conll").words)
    assert (scored.pop("examples_scored"), scored.pop("examples_in_data")) == (32, in_data)
    # The count goes to stderr: stdout is the results' JSON alone.
    assert f"scoring the first 32 of {in_data:,} examples" in captured.err
    assert scored == trained["dev"]
    # predict: one line per sentence, the words, tags and entities of `tag`.
    sentences = [" ".join(words) for words in read_conll(f"{wnut}/dev.conll").words[:6]]
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n")
    assert run_predict(output, tmp_path / "sentences.txt", tmp_path / "tags.jsonl") == 0
    model, _ = finetuning.load_finetuned(output)
    answers = [json.loads(line) for line in open(tmp_path / "tags.jsonl")]
    assert [a.pop("line") for a in answers] == list(range(1, len(sentences) + 1))
    assert answers == model.tag(sentences)


@pytest.mark.slow
@pytest.mark.proof
def test_squad_finetune_on_shipped_samples(tmp_path, datasets_dir, real_vocab_file):
    sample = os.path.join(datasets_dir, "squad_samples", "squad_v1_sample.json")
    output = str(tmp_path / "squad")
    config = FinetuneConfig(
        task="squad",
        train=sample,
        dev=sample,
        vocab_file=real_vocab_file,
        seq_length=128,
        doc_stride=64,
        batch_size=4,
        learning_rate=1e-4,
        epochs=2,
        verbose=0,
        output_dir=output,
    )
    result = finetuning.finetune(config)
    assert set(result["dev"]) == {"exact_match", "f1"}
    scored = finetuning.evaluate(output, sample)
    assert scored.pop("examples_scored") == scored.pop("examples_in_data")
    assert scored == result["dev"]
    # Every question gets a span of its own context, cut at character offsets.
    dataset = squad.load_squad_json(sample)
    examples = squad.read_squad_examples(dataset, is_training=False)
    model = keras.models.load_model(os.path.join(output, "model.keras"))
    predictions, _, nbest = model.squad_predictions(dataset)
    assert len(predictions) == 5
    for example in examples:
        best = nbest[example.qas_id][0]
        assert predictions[example.qas_id] == best["text"] != ""
        assert example.context[best["char_start"] : best["char_end"]] == best["text"]
    # predict on the SQuAD file: the model's in-graph answers, one line per question.
    assert run_predict(output, sample, tmp_path / "answers.jsonl") == 0
    answers = {a["id"]: a for a in map(json.loads, open(tmp_path / "answers.jsonl"))}
    assert set(answers) == set(predictions)
    for example in examples:
        answer = answers[example.qas_id]
        assert example.context[answer["start"] : answer["end"]] == answer["answer"]


def test_finetune_takes_in_memory_data(tmp_path, tiny_vocab_file):
    train = write_sentiment(tmp_path / "train.tsv", 64, seed=0)
    rows = [line.split("\t") for line in open(train).read().splitlines()[1:]]
    header = open(train).readline().rstrip("\n").split("\t")
    columns = {name: [row[i] for row in rows] for i, name in enumerate(header)}
    text_column = next(name for name in header if name != "label")
    config = FinetuneConfig(
        **finetune_fields(
            vocab_file=tiny_vocab_file,
            preset="tiny",
            batch_size=16,
            epochs=1,
            seed=3,
            text_columns=[text_column],
            output_dir=str(tmp_path / "memory"),
        )
    )
    from_memory = finetuning.finetune(config, train=columns, dev=columns)
    from_file = finetuning.finetune(
        dataclasses.replace(config, train=train, dev=train, output_dir=str(tmp_path / "file"))
    )
    assert from_memory["dev"] == from_file["dev"]  # the same examples, the same run
    # A tf.data.Dataset of (text, label) and a (texts, labels) tuple read the same.
    texts, labels = columns[text_column], columns["label"]
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
    tuple_config = dataclasses.replace(config, text_columns=None, output_dir=None)
    assert (
        finetuning.finetune(tuple_config, train=dataset, dev=(texts, labels))["dev"]
        == from_file["dev"]
    )
    with pytest.raises(ValueError, match=r"in-memory data: no column\(s\) \[.review.\]"):
        finetuning.finetune(
            dataclasses.replace(config, text_columns=["review"], output_dir=None), train=columns
        )


@pytest.mark.precision
def test_the_command_and_fit_take_the_same_steps(tmp_path, tiny_vocab_file):
    """`keras-bert finetune`'s run is the task model's own `fit`: the same
    model, optimizer and batches through `model.fit` in a user's script end
    with the same weights (the step is the model's, not a wrapper's)."""
    train = write_sentiment(tmp_path / "train.tsv", 40, seed=3)
    config = FinetuneConfig(
        **finetune_fields(
            train=train,
            vocab_file=tiny_vocab_file,
            epochs=2,
            dropout=0.1,
            seed=7,
        )
    )
    tokenizer = finetuning.resolve_tokenizer(config)[0]
    task = finetuning.make_task(config)
    data = task.read(train, training=True)

    def build_model(dtype=None):
        return task.build_model(
            BertEncoder(CONFIG, dtype=dtype), finetuning.preprocessor_of(config, tokenizer)
        )

    command = finetuning_run.train(
        config, task, data, None, None, build_model, tf.distribute.get_strategy()
    )

    keras.utils.set_random_seed(config.seed)  # as the command seeds its run
    model = build_model()
    x, y = data
    steps = 5  # 40 rows in batches of 8
    model.compile(
        optimizer=optimization.create_adamw(
            config.learning_rate, 2 * steps, int(0.1 * 2 * steps), weight_decay=0.01, clipnorm=1.0
        )
    )
    # The command's batches: a function of (seed, epoch), the callback's.
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[ExactResume(None, seed=7)])
    assert command.steps == 2 * steps == int(model.optimizer.iterations)
    for ours, theirs in zip(command.model.get_weights(), model.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_finetune_says_how_much_of_dev_it_scores(monkeypatch, tiny_vocab_file, tmp_path, capsys):
    """max_dev_examples scores a part of dev: the run says which, and records it."""
    train = write_sentiment(tmp_path / "train.tsv", 16, seed=0)
    dev = write_sentiment(tmp_path / "dev.tsv", 12, seed=1)
    config = FinetuneConfig(
        **finetune_fields(
            train=train,
            dev=dev,
            vocab_file=tiny_vocab_file,
            epochs=1,
            max_dev_examples=4,
        )
    )
    monkeypatch.setattr(finetuning, "load_encoder", lambda *args: BertEncoder(CONFIG))
    result = finetuning.finetune(config)
    assert (result["dev_examples_scored"], result["dev_examples_in_data"]) == (4, 12)
    assert f"scoring the first 4 of 12 examples of {dev} (max_dev_examples 4)" in (
        capsys.readouterr().out
    )
