"""`keras-bert finetune --task embed` / `evaluate` / `predict`: a BertSentenceEncoder
trained contrastively on TSV rows (pairs, triplets, scored pairs), resumed after
a kill with the uninterrupted run's weights, the best epoch kept by MRR@10 or
Spearman, scored again from its folder, and embeddings out per input line."""

import dataclasses
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import (
    BertConfig,
    BertEncoder,
    BertPreprocessor,
    BertSentenceEncoder,
    cli,
    dataset_options,
)
from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets import retrieval
from keras_bert.datasets.text_rows import read_text_rows
from keras_bert.models.batch_trimming import trim_features_batch
from keras_bert.training import finetuning, finetuning_run
from keras_bert.training.callbacks import ExactResume, StopOnNonFiniteLoss
from keras_bert.training.finetuning import FinetuneConfig

from harness import FINISHED_RUN_FILES, run_command, run_predict, small_config
from repo_paths import REPO_ROOT

ROWS = os.path.join(REPO_ROOT, "tests", "fixtures", "embeddings")
PAIRS, DEV = os.path.join(ROWS, "pairs_train.tsv"), os.path.join(ROWS, "pairs_dev.tsv")
TRIPLETS = os.path.join(ROWS, "triplets.tsv")
SCORED, SCORED_DEV = os.path.join(ROWS, "scored_train.tsv"), os.path.join(ROWS, "scored_dev.tsv")


def tiny_encoder_file(tmp_path, dropout=0.0):
    """A tiny random encoder on the shipped uncased vocabulary (the BBC text
    needs real word pieces, not the 19-token test vocabulary)."""
    keras.utils.set_random_seed(1)
    config = small_config(vocab_size=30522, dropout=dropout)
    path = str(tmp_path / f"encoder_{dropout}.keras")
    BertEncoder(config).save(path)
    return path


def fields(tmp_path, **overrides):
    return {
        **dict(
            task="embed",
            train=PAIRS,
            dev=DEV,
            vocab_file=VOCAB_FILE,
            init_checkpoint=tiny_encoder_file(tmp_path),
            seq_length=32,
            batch_size=8,
            epochs=2,
            learning_rate=1e-3,
            verbose=0,
            tensorboard=False,
        ),
        **overrides,
    }


def saved_weights(output_dir):
    model = keras.models.load_model(os.path.join(output_dir, "model.keras"), compile=False)
    return {weight.path: weight.numpy() for weight in model.weights}


def test_the_fixture_rows_are_what_make_rows_writes(tmp_path):
    """Their origin: the shipped BBC News dev articles, rearranged by make_rows.py."""
    script = os.path.join(ROWS, "make_rows.py")
    copy = tmp_path / "make_rows.py"
    copy.write_text(
        open(script)
        .read()
        .replace("HERE = os.path.dirname(os.path.abspath(__file__))", f"HERE = {str(tmp_path)!r}")
        .replace(
            'os.path.join(HERE, "..", "..", "..", "data"', f'os.path.join({REPO_ROOT!r}, "data"'
        )
    )
    subprocess.run([sys.executable, str(copy)], check=True)
    for name in sorted(os.listdir(ROWS)):
        if name.endswith(".tsv"):
            assert open(tmp_path / name).read() == open(os.path.join(ROWS, name)).read(), name


def test_pairs_train_keep_the_best_mrr_and_evaluate_the_same_from_the_folder(tmp_path):
    output = str(tmp_path / "run")
    result = finetuning.finetune(FinetuneConfig(**fields(tmp_path), output_dir=output))
    assert result["primary_metric"] == "mrr@10" and result["steps"] == 2 * 48 // 8
    assert set(result["dev"]) == {
        "recall@1",
        "recall@5",
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "queries",
        "documents",
    }
    # BBC dev holds one article twice ("What high-definition will do to DVDs"):
    # its text is one document, relevant to both copies of its headline.
    assert (result["dev"]["queries"], result["dev"]["documents"]) == (24, 23)
    assert sorted(os.listdir(output)) == FINISHED_RUN_FILES
    # The saved model scores dev as the run did, and as the retrieval
    # functions score its embeddings of the rows.
    model = keras.models.load_model(os.path.join(output, "model.keras"))
    assert isinstance(model, BertSentenceEncoder)
    counts = {"examples_scored": 24, "examples_in_data": 24}
    assert finetuning.evaluate(output, DEV) == {**result["dev"], **counts}
    queries, corpus, relevant = read_text_rows(DEV).retrieval()
    sets = retrieval.relevance_sets(relevant, range(24), range(23))
    expected = retrieval.retrieval_metrics(
        model.predict(queries, verbose=0), model.predict(corpus, verbose=0), sets
    )
    for name, value in expected.items():
        assert result["dev"][name] == pytest.approx(value, abs=1e-9), name


def test_training_lowers_the_loss_and_moves_dev_mrr(tmp_path):
    """The contrastive run learns: the in-batch loss falls, and dev retrieval
    is not that of the random encoder."""
    config = FinetuneConfig(**fields(tmp_path, epochs=4, dev=PAIRS))
    task = finetuning.make_task(config)
    train = task.read(PAIRS, training=True)
    tokenizer = finetuning.resolve_tokenizer(config)[0]

    def build_model(dtype):
        return task.build_model(
            finetuning.load_encoder(config.init_checkpoint, dtype=dtype),
            finetuning.preprocessor_of(config, tokenizer),
        )

    strategy = tf.distribute.get_strategy()
    before_training = finetuning_run.compiled_run(config, task, train, None, build_model, strategy)
    before = task.score(before_training.model, train)["mrr@10"]
    losses = []
    original = StopOnNonFiniteLoss.on_train_batch_end
    StopOnNonFiniteLoss.on_train_batch_end = lambda self, batch, logs=None: losses.append(
        float(logs["loss"])
    )
    try:
        result = finetuning_run.train(config, task, train, train, None, build_model, strategy)
    finally:
        StopOnNonFiniteLoss.on_train_batch_end = original
    assert losses[-1] < losses[0]
    assert result.dev["mrr@10"] > before


def test_triplets_and_scored_pairs_choose_their_loss_and_dev_metric(tmp_path):
    """Triplets train with hard negatives (a whole run: the command line's
    test), scored pairs with CoSENT, dev scored by Spearman."""
    task = finetuning.make_task(FinetuneConfig(**fields(tmp_path)))
    task.read(TRIPLETS, training=True)
    loss = task.compile_options()["loss"]
    assert type(loss).__name__ == "MultipleNegativesRankingLoss" and not loss.symmetric
    scored = finetuning.finetune(
        FinetuneConfig(**fields(tmp_path, train=SCORED, dev=SCORED_DEV, epochs=1))
    )
    assert scored["primary_metric"] == "spearman_cosine"
    assert set(scored["dev"]) == {"spearman_cosine", "pairs"} and scored["dev"]["pairs"] == 24
    task = finetuning.make_task(
        FinetuneConfig(
            **fields(tmp_path, embedding_loss="auto", loss_scale=10.0, mini_batch_size=4)
        )
    )
    task.read(SCORED, training=True)
    loss = task.compile_options()["loss"]
    assert (type(loss).__name__, loss.scale, loss.mini_batch_size) == ("CoSENTLoss", 10.0, 4)
    task = finetuning.make_task(
        FinetuneConfig(**fields(tmp_path, embedding_loss="multiple_negatives_symmetric_ranking"))
    )
    task.read(PAIRS, training=True)
    assert task.compile_options()["loss"].symmetric


def test_a_loss_that_does_not_fit_the_rows_is_named(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"pairs_train.tsv: embedding_loss cosent trains on "
        r"scored pairs.*set embedding_loss to "
        r"multiple_negatives_ranking or auto",
    ):
        finetuning.finetune(FinetuneConfig(**fields(tmp_path, embedding_loss="cosent")))
    with pytest.raises(
        ValueError,
        match=r"scored_train.tsv: embedding_loss "
        r"multiple_negatives_ranking trains on rows of texts",
    ):
        finetuning.finetune(
            FinetuneConfig(
                **fields(tmp_path, train=SCORED, embedding_loss="multiple_negatives_ranking")
            )
        )
    with pytest.raises(ValueError, match="set mini_batch_size instead"):
        FinetuneConfig(**fields(tmp_path, gradient_accumulation_steps=2))
    with pytest.raises(
        ValueError, match="config field embedding_loss must be auto, multiple_negatives_ranking, "
    ):
        finetuning.load_finetune_config(None, ["embedding_loss=triplet"], task="embed")


class _Killed(Exception):
    pass


# Slow: resuming is one callback for every task family (ExactResume), proven in
# the fast suite on a classifier (test_python_fit_resume, test_resume_finetuning);
# this run adds the embedding family's best-on-dev state (80 s on 2 cores).
@pytest.mark.slow
def test_killed_after_epoch_1_the_rerun_ends_as_the_uninterrupted_run(tmp_path, monkeypatch):
    """Dropout on, a checkpoint mid-epoch too: the rerun restores the weights,
    the optimizer, the dropout RNG and the best-on-dev state and ends with
    the uninterrupted run's weights and dev figures."""
    settings = fields(
        tmp_path,
        init_checkpoint=tiny_encoder_file(tmp_path, dropout=0.1),
        epochs=2,
        checkpoint_every=4,
        seed=5,
    )
    whole = finetuning.finetune(FinetuneConfig(**settings, output_dir=str(tmp_path / "whole")))

    output = str(tmp_path / "killed")
    original = ExactResume.on_epoch_begin

    def on_epoch_begin(self, epoch, logs=None):  # dies after epoch 1's dev score and checkpoint
        original(self, epoch, logs)
        if epoch == 1:
            raise _Killed()

    monkeypatch.setattr(ExactResume, "on_epoch_begin", on_epoch_begin)
    with pytest.raises(_Killed):
        finetuning.finetune(FinetuneConfig(**settings, output_dir=output))
    assert tf.train.latest_checkpoint(os.path.join(output, "checkpoints")).endswith("ckpt-6")
    assert {"best", "checkpoints"} <= set(os.listdir(output))
    assert not os.path.exists(os.path.join(output, "model.keras"))
    monkeypatch.undo()
    resumed = finetuning.finetune(FinetuneConfig(**settings, output_dir=output))
    assert (resumed["steps"], resumed["best_epoch"], resumed["dev"]) == (
        whole["steps"],
        whole["best_epoch"],
        whole["dev"],
    )
    ours, theirs = saved_weights(output), saved_weights(str(tmp_path / "whole"))
    assert ours.keys() == theirs.keys()
    for path in ours:
        np.testing.assert_allclose(ours[path], theirs[path], rtol=0, atol=1e-6, err_msg=path)


@pytest.mark.slow
def test_in_memory_columns_train_as_the_file_does(tmp_path):
    rows = read_text_rows(PAIRS)
    columns = dict(zip(rows.names, rows.columns))
    config = FinetuneConfig(**fields(tmp_path, epochs=1, train=None, dev=None))
    from_memory = finetuning.finetune(config, train=columns, dev=read_text_rows(DEV))
    from_file = finetuning.finetune(dataclasses.replace(config, train=PAIRS, dev=DEV))
    assert from_memory["dev"] == from_file["dev"]


def test_epoch_batches_of_text_columns_are_cut_each_to_its_longest(tmp_path):
    """One element per update, every row once per epoch in the seed's order,
    no targets for rows of texts; the step cuts each column's padding to its
    own longest row."""
    model = BertSentenceEncoder(
        BertEncoder(BertConfig.preset("tiny")),
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=64),
    )
    features, targets, weights = model.encode_text(read_text_rows(PAIRS).fit_inputs()[0])
    assert targets is None and weights is None
    lengths = dataset_options.row_lengths(features)
    plan = dataset_options.epoch_batches(lengths, 16, 0, 0)
    batches = list(dataset_options.ordered_batches(features, batches=plan))
    assert len(batches) == 3 and all(set(batch) == {"anchor", "positive"} for batch in batches)
    order = dataset_options.epoch_order(48, 0, 0)
    for i, batch in enumerate(batches):
        rows = order[16 * i : 16 * (i + 1)]
        trimmed = trim_features_batch(batch)[0]
        for name in ("anchor", "positive"):
            mask = features[name]["input_mask"][rows]
            longest = int(mask.sum(axis=1).max())
            width = trimmed[name]["input_mask"].shape[1]
            assert longest <= width < longest + 8 or width == 64, (name, width, longest)
            np.testing.assert_array_equal(
                trimmed[name]["input_ids"], features[name]["input_ids"][rows][:, :width]
            )


# === The command line ===


@pytest.mark.slow
def test_cli_finetune_evaluate_predict(tmp_path, capsys):
    output = str(tmp_path / "embed")
    assert (
        run_command(
            "finetune --task embed --train {train} --dev {dev} "
            "--vocab-file {vocab_file} --init-checkpoint "
            "{init_checkpoint} --seq-length 32 --batch-size 8 --epochs 1 "
            "--set embedding_loss=multiple_negatives_symmetric_ranking "
            "--output-dir {output_dir} --no-tensorboard",
            train=TRIPLETS,
            dev=DEV,
            vocab_file=VOCAB_FILE,
            init_checkpoint=tiny_encoder_file(tmp_path),
            output_dir=output,
        )
        == 0
    )
    capsys.readouterr()
    trained = json.load(open(os.path.join(output, "dev_results.json")))
    saved = json.load(open(os.path.join(output, "finetune_config.json")))
    assert saved["embedding_loss"] == "multiple_negatives_symmetric_ranking"
    assert cli.main(["evaluate", "--model-dir", output, "--data", DEV]) == 0
    printed = capsys.readouterr().out
    scored = json.loads(printed[printed.rindex("{\n") :])
    assert scored.pop("examples_scored") == scored.pop("examples_in_data") == 24
    assert scored == trained["dev"]
    assert (
        cli.main(["evaluate", "--model-dir", output, "--data", SCORED_DEV, "--task", "embed"]) == 0
    )
    printed = capsys.readouterr().out
    assert set(json.loads(printed[printed.rindex("{\n") :])) == {
        "spearman_cosine",
        "pairs",
        "examples_scored",
        "examples_in_data",
    }
    assert cli.main(["evaluate", "--model-dir", output, "--data", DEV, "--task", "tag"]) == 2
    assert "fine-tuned with --task embed, not tag" in capsys.readouterr().err
    # predict: one embedding per input line, blank lines answered in place.
    texts = ["Economy 'strong' in election year", "", "Electrolux to export Europe jobs"]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    assert run_predict(output, tmp_path / "texts.txt", tmp_path / "embeddings.jsonl") == 0
    answers = [json.loads(line) for line in open(tmp_path / "embeddings.jsonl")]
    assert [a["line"] for a in answers] == [1, 2, 3] and answers[1] == {"line": 2, "blank": True}
    model, _ = finetuning.load_finetuned(output)
    expected = model.predict([texts[0], texts[2]], verbose=0)
    np.testing.assert_allclose(
        [answers[0]["embedding"], answers[2]["embedding"]], expected, rtol=1e-5, atol=1e-6
    )


def test_cli_evaluate_a_pretrained_sentence_encoder_zero_shot(tmp_path, minilm_path, capsys):
    """`evaluate --task embed` on the real MiniLM folder (not a finetune
    output) scores it as it is, at its own length, as BertSentenceEncoder's
    embeddings score through the retrieval functions."""
    assert (
        run_command(
            "evaluate --task embed --model-dir {model_dir} --data {data} --max-examples 12",
            model_dir=minilm_path,
            data=DEV,
        )
        == 0
    )
    printed = capsys.readouterr().out
    figures = json.loads(printed[printed.rindex("{\n") :])
    model = BertSentenceEncoder.from_pretrained(minilm_path)
    assert model.preprocessor.seq_length == 256
    queries, corpus, relevant = read_text_rows(DEV, limit=12).retrieval()
    sets = retrieval.relevance_sets(relevant, range(12), range(12))
    expected = retrieval.retrieval_metrics(
        model.predict(queries, verbose=0), model.predict(corpus, verbose=0), sets
    )
    for name, value in expected.items():
        assert figures[name] == pytest.approx(value, abs=1e-6), name
    assert figures["recall@10"] == 1.0  # 12 documents: every headline finds its opening
    assert cli.main(["evaluate", "--model-dir", minilm_path, "--data", DEV]) == 2
    assert "--task embed scores a pretrained sentence encoder" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.proof
def test_cli_finetunes_the_real_minilm_folder_with_its_modules(tmp_path, minilm_path, capsys):
    """From a sentence-transformers folder the run keeps its modules (mean
    pooling, Normalize, do_lower_case) and its vocabulary; dev retrieval
    after a short run on real pairs stays at least the zero-shot figure's
    order, and the export of the output serves what the model embeds."""
    output = str(tmp_path / "minilm")
    assert (
        run_command(
            "finetune --task embed --train {train} --dev {dev} "
            "--init-checkpoint {init_checkpoint} --seq-length 64 "
            "--batch-size 16 --epochs 1 --learning-rate 2e-5 --output-dir "
            "{output_dir} --no-tensorboard",
            train=PAIRS,
            dev=DEV,
            init_checkpoint=minilm_path,
            output_dir=output,
        )
        == 0
    )
    capsys.readouterr()
    model, saved = finetuning.load_finetuned(output)
    reference = BertSentenceEncoder.from_pretrained(minilm_path, seq_length=64)
    assert (model.pooling, model.normalize, model.lowercase_text) == (
        reference.pooling,
        reference.normalize,
        reference.lowercase_text,
    )
    assert model.preprocessor.vocabulary == reference.preprocessor.vocabulary
    trained = json.load(open(os.path.join(output, "dev_results.json")))["dev"]
    assert (
        run_command(
            "evaluate --task embed --model-dir {model_dir} --data {data} --seq-length 64",
            model_dir=minilm_path,
            data=DEV,
        )
        == 0
    )
    printed = capsys.readouterr().out
    zero_shot = json.loads(printed[printed.rindex("{\n") :])
    assert trained["mrr@10"] >= zero_shot["mrr@10"] - 0.05
    assert cli.main(["export", "--model-dir", output, "--output", str(tmp_path / "serving/1")]) == 0
    served = tf.saved_model.load(str(tmp_path / "serving/1"))
    texts = ["Economy 'strong' in election year", "Electrolux to export Europe jobs"]
    outputs = served.signatures["serving_default"](tf.constant(texts))
    embedding = next(iter(outputs.values())).numpy()
    np.testing.assert_allclose(embedding, model.predict(texts, verbose=0), atol=1e-5)
