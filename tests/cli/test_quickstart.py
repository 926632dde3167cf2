"""The README's main job, `keras-bert quickstart`, end to end in its fast mode."""

import json
import os

import pytest

from keras_bert import cli
from keras_bert.cli.quickstart import DEFAULT_CORPUS, FULL, build_novel_task, majority_baseline


def test_novel_task_keeps_held_out_chapters_apart(tmp_path):
    import glob

    books = sorted(glob.glob(DEFAULT_CORPUS))[:2]
    corpus_file, counts, chapters = build_novel_task(books, str(tmp_path), FULL)
    with open(tmp_path / "dev.tsv", encoding="utf-8") as f:
        dev_passages = [line.split("\t", 1)[1] for line in f.read().splitlines()[1:]]
    with open(corpus_file, encoding="utf-8") as f:
        corpus = f.read()
    # No held-out passage's text appears in the pretraining corpus (long
    # fragments only: short sentences such as "Yes." recur across chapters).
    fragments = [max(p.split(". "), key=len) for p in dev_passages]
    fragments = [f for f in fragments if len(f) > 60]
    assert len(fragments) > 20
    assert not [f for f in fragments if f in corpus]
    assert counts["train"] >= counts["dev"] > 0
    labels = {line.split("\t")[0] for line in (tmp_path / "train.tsv").read_text().splitlines()[1:]}
    assert labels == {os.path.splitext(os.path.basename(b))[0] for b in books}
    majority, baseline = majority_baseline(tmp_path / "train.tsv", tmp_path / "dev.tsv")
    assert majority in labels and 0.3 < baseline < 0.8


@pytest.mark.slow
def test_quickstart_fast_mode_end_to_end(tmp_path, capsys):
    output = str(tmp_path / "qs")
    assert cli.main(["quickstart", "--fast", "--output", output]) == 0
    printed = capsys.readouterr().out
    for step in range(1, 9):
        assert f"[{step}/8]" in printed
    with open(os.path.join(output, "quickstart_results.json")) as f:
        results = json.load(f)
    assert 0.0 <= results["dev_accuracy"] <= 1.0
    assert os.path.exists(os.path.join(results["export"], "saved_model.pb"))
    assert "keras-bert create-pretraining-data" in printed
    # The fresh process printed one predicted novel per sampled passage.
    assert (
        sum(
            line.strip().split(" ")[0]
            in {
                "emma",
                "mansfieldpark",
                "northangerabbey",
                "persuasion",
                "prideprejudice",
                "sensesensibility",
            }
            for line in printed.splitlines()
        )
        >= 4
    )
