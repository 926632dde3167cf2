"""The benchmarks' keras_bert sides (benchmarks/finetuning.py and its HuggingFace
peer, finetuning_parity.py, command_vs_fit.py, bbc_retrieval.py): the label
alignment, the tasks' data and metric, keras_bert's side for one short run and
for the step-by-step parity. The HuggingFace side needs torch and transformers,
which live in the peers' environment (benchmarks/requirements-peers.txt), not
the test environment."""

import math

import numpy as np
import pytest

from repo_paths import benchmark_script


def benchmark(name):
    return benchmark_script(name)


def test_first_piece_labels_follow_huggingface_token_classification():
    peer = benchmark("trainer_peer")
    # [CLS] w0 w0## w1 [SEP] [PAD]: HuggingFace's word_ids for two words, the first in two pieces
    word_ids = [None, 0, 0, 1, None, None]
    assert peer.first_piece_labels(word_ids, [3, 5]) == [-100, 3, -100, 5, -100, -100]
    assert peer.first_piece_predictions(word_ids, [9, 7, 8, 6, 9, 9]) == {0: 7, 1: 6}


def test_tasks_read_the_shipped_splits_and_score_in_points():
    finetuning = benchmark("finetuning")
    reviews = finetuning.load_task("rotten_tomatoes")
    tweets = finetuning.load_task("wnut16")
    # data/README.md: train 8,965 / dev 1,280 reviews; train 1,675 / dev 239 tweets
    assert (len(reviews["train_x"]), len(reviews["dev_x"])) == (8965, 1280)
    assert (len(tweets["train_x"]), len(tweets["dev_x"])) == (1675, 239)
    assert reviews["label_names"] == ["fresh", "rotten"]
    assert tweets["label_names"][tweets["outside"]] == "O" and tweets["num_labels"] == 21
    assert finetuning.total_steps(tweets) == 105 * 5  # ceil(1675 / 16) batches, 5 epochs
    assert finetuning.dev_metric(reviews, reviews["dev_y"]) == 100.0
    assert finetuning.dev_metric(tweets, tweets["dev_y"]) == 100.0
    outside = [[tweets["outside"]] * len(row) for row in tweets["dev_y"]]
    assert finetuning.dev_metric(tweets, outside) == 0.0


@pytest.mark.slow
def test_keras_bert_side_trains_and_predicts(minilm_path):
    finetuning = benchmark("finetuning")
    side = finetuning.KerasBertSide(minilm_path, "fast")
    task = {**finetuning.load_task("wnut16", limit=48), "epochs": 1}
    task["dev_x"], task["dev_y"] = task["dev_x"][:8], task["dev_y"][:8]
    result = side.train(task, seed=0)
    assert [len(row) for row in result["predictions"]] == [len(row) for row in task["dev_x"]]
    assert result["examples"] == 48 - 2 * 16 and result["seconds"] > 0
    assert side.time("wnut16", task, 1, seed=0) > 0


@pytest.mark.slow
def test_parity_keras_side_records_each_step_with_dropout_off(minilm_path):
    parity = benchmark("finetuning_parity")
    task = parity.benchmark.load_task("wnut16", limit=32)
    records, kept, head = parity.keras_side(task, minilm_path, steps=2, keep_at=[1, 2], seed=0)
    assert [len(records[key]) for key in ("loss", "learning_rate", "grad_norm")] == [2, 2, 2]
    # A new head of small weights: about the uniform guess's cross-entropy over 21 tags.
    assert records["loss"][0] == pytest.approx(math.log(21), abs=0.2)
    # Warmup starts at rate 0 (as HuggingFace's linear schedule): step 1 moves nothing.
    assert records["learning_rate"][0] == 0.0 < records["learning_rate"][1]
    assert all(np.array_equal(kept[1][name], kept[0][name]) for name in kept[0])
    assert not np.array_equal(kept[2]["head/kernel"], kept[0]["head/kernel"])
    # Embeddings, 2 per block (MiniLM: 6), the head's: all at the checkpoint's 0.1.
    assert len(records["dropout"]) == 1 + 2 * 6 + 1
    assert all(line.endswith(" 0.1") for line in records["dropout"])
    assert head["kernel"].shape == (384, task["num_labels"])


@pytest.mark.slow
def test_command_against_fit_runs_both_sides(minilm_path, capsys, tmp_path):
    command_vs_fit = benchmark("command_vs_fit")
    command_vs_fit.main(
        [
            "--tasks",
            "wnut16",
            "--windows",
            "1",
            "--steps",
            "2",
            "--checkpoint",
            minilm_path,
            "--results-dir",
            str(tmp_path),
        ]
    )
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("| wnut16 |"))
    command, fit = (float(cell) for cell in row.split("|")[2:4])
    assert command > 0 and fit > 0
    (headline,) = benchmark("results_file").read("command_vs_fit", str(tmp_path))["headlines"]
    assert headline["figures"] == pytest.approx(
        {"keras-bert finetune": command, "fit": fit}, abs=0.05
    )


@pytest.mark.slow
def test_bbc_retrieval_scores_zero_shot_and_after_a_step(tmp_path, minilm_path):
    """The retrieval recipe end to end on 8 dev rows at length 32; one
    fine-tuning step on 4 pairs."""
    recipe = benchmark("bbc_retrieval")
    results = recipe.main(
        [
            "--checkpoint",
            minilm_path,
            "--limit",
            "8",
            "--seq-length",
            "32",
            "--batch-size",
            "4",
            "--train",
            recipe.DEV,
            "--train-limit",
            "4",
            "--train-batch-size",
            "4",
            "--results-dir",
            str(tmp_path),
        ]
    )
    written = benchmark("results_file").read("bbc_retrieval_fine_tuned", str(tmp_path))
    assert written["figures"] == results
    assert results["dev_queries"] == 8 and results["seq_length"] == 32
    for stage in ("zero_shot", "fine_tuned"):
        figures = results[stage]
        assert 0 <= figures["recall@1"] <= figures["recall@5"] <= 1
        assert 0 < figures["mrr@10"] <= 1 and figures["articles_per_second"] > 0
    # 8 headlines against their own 8 articles: MiniLM finds most of them.
    assert results["zero_shot"]["recall@1"] >= 0.5
    assert results["fine_tuned"]["train_rows"] == 4
