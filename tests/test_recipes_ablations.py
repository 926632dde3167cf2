"""Each ablation table of recipes/ablations/ runs end to end at its smoke size
(one pretraining step, a few examples): rows cached, table and plot written."""

import importlib.util
import os
import sys

import pytest

from repo_paths import REPO_ROOT


def ablations():
    path = os.path.join(REPO_ROOT, "recipes", "ablations", "ablations.py")
    spec = importlib.util.spec_from_file_location("recipe_ablations", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ablations"))


def smoke_table(table, output_dir, *rows):
    """The ablation `table` at its smoke size, one seed, only `rows`: its markdown."""
    row_flags = [flag for row in rows for flag in ("--row", row)]
    ablations().main([table, "--smoke", "--seeds", "0", "--output-dir", output_dir, *row_flags])
    return open(os.path.join(output_dir, f"{table}.md")).read()


@pytest.mark.slow
def test_objectives_table(output_dir, capsys):
    table = smoke_table("objectives", output_dir, "ltr", "ltr_bilstm")
    assert (
        "| LTR & No NSP | " in table
        and "| BERT (MLM + NSP) | not run | not run | not run |" in table
    )
    # The SQuAD smoke column runs the span path, the BiLSTM span head included.
    assert "SQuAD samples F1 (smoke" in table and table.count("(n=1)") == 5
    assert os.path.exists(os.path.join(output_dir, "objectives.png"))
    assert "(n=1)" in capsys.readouterr().out
    # Cased: capitalisation is the strongest cue for entities in tweets.
    with open(os.path.join(output_dir, "vocab.txt"), encoding="utf-8") as f:
        assert any(token[:1].isupper() for token in f.read().split()[5:])


@pytest.mark.slow
def test_masking_table(output_dir):
    table = smoke_table("masking", output_dir, "mask0_same0_rnd100")
    assert table.count("(n=1)") == 3 and "| 80 / 10 / 10 | not run" in table


@pytest.mark.slow
def test_feature_based_table(output_dir):
    table = smoke_table("feature_based", output_dir, "concat_last_four")
    assert "| Concat last four hidden | " in table and "(n=1)" in table


def test_unknown_row_is_named(output_dir):
    with pytest.raises(SystemExit, match="unknown --row"):
        ablations().main(["masking", "--smoke", "--row", "mask50", "--output-dir", output_dir])


def successors(name="successors"):
    sys.path.insert(0, os.path.join(REPO_ROOT, "recipes", "ablations"))
    path = os.path.join(REPO_ROOT, "recipes", "ablations", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_successor_gets_the_pretraining_flops_of_bert_mlm15():
    recipe = successors()
    size, vocab = recipe.ablations.DEFAULT, 4000
    base = recipe.ROWS[0]
    budget = size.pretrain_steps * recipe.training_flops(base, size.model, size.seq_length, vocab)
    for row in recipe.ROWS:
        per_step = recipe.training_flops(row, size.model, size.seq_length, vocab)
        steps = recipe.equal_compute_steps(row, size, vocab)
        assert abs(steps * per_step - budget) <= per_step / 2, row.name
    # The rows cost what their parts say: more predictions, a generator, a gated block.
    costs = {row.name: recipe.training_flops(row, size.model, 64, vocab) for row in recipe.ROWS}
    assert costs["bert_mlm15"] < costs["electra"] < costs["bert_mlm40"]
    assert costs["modernbert_mlm30"] > costs["bert_mlm40"]


@pytest.mark.slow
def test_successors_table(tmp_path):
    output_dir = str(tmp_path)  # its own corpus: the quickstart's, held-out chapters apart
    recipe = successors()
    rows = ["--row", "bert_mlm15", "--row", "electra", "--row", "modernbert_mlm30"]
    recipe.main(["--smoke", "--seeds", "0", "--output-dir", output_dir, *rows])
    table = open(os.path.join(output_dir, "successors.md")).read()
    assert table.count("(n=1)") == 6 and "discriminator_accuracy" in table
    assert "| BERT, MLM 40 % | not run |" in table
    assert os.path.exists(os.path.join(output_dir, "successors.png"))

    # The ELECTRA row's diagnosis reads those exports: AUCs, block cosines, no pretraining.
    successors("electra_diagnosis").main(
        ["--smoke", "--control-steps", "2", "--output-dir", output_dir]
    )
    diagnosis = open(os.path.join(output_dir, "electra_diagnosis.md")).read()
    assert "| uniform random ids (control) | 2 |" in diagnosis
    assert diagnosis.count(" / ") >= 4 * 3  # 4 encoders, 4 blocks each
