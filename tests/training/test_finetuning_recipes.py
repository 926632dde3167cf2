"""Every fine-tuning recipe in recipes/finetuning/ runs one step on CPU with a
tiny model: its settings as written (precision, XLA, lengths, SQuAD v2.0's
tuned threshold), only the hardware, the checkpoint and the data swapped for
what this machine has."""

import glob
import json
import os

import pytest
import yaml

from keras_bert import cli

from harness import FINISHED_RUN_FILES
from repo_paths import DATASETS_DIR, REPO_ROOT

RECIPES = sorted(glob.glob(os.path.join(REPO_ROOT, "recipes", "finetuning", "*.yaml")))


def test_every_job_has_a_recipe_for_a_tpu_and_for_gpus():
    names = {os.path.basename(path) for path in RECIPES}
    for job in ("glue_base", "glue_large", "squad_v1_base", "squad_v1_large", "squad_v2_large"):
        assert {f"{job}_tpu.yaml", f"{job}_multi_gpu.yaml"} <= names, job


def _mrpc_file(path):
    """An MRPC-format TSV of real review sentences (its label says whether the
    two sides are the same sentence)."""
    lines = open(os.path.join(DATASETS_DIR, "rotten_tomatoes", "dev.tsv")).read().splitlines()[1:9]
    sentences = [line.split("\t")[1] for line in lines]
    rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for i, sentence in enumerate(sentences):
        other = sentence if i % 2 else sentences[(i + 1) % len(sentences)]
        rows.append(f"{i % 2}\t{i}\t{i + 100}\t{sentence}\t{other}")
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _v2_file(path):
    """The shipped SQuAD v1.1 sample with one question made unanswerable."""
    with open(os.path.join(DATASETS_DIR, "squad_samples", "squad_v1_sample.json")) as f:
        squad = json.load(f)
    qa = squad["data"][0]["paragraphs"][0]["qas"][0]
    qa.update(is_impossible=True, answers=[])
    path.write_text(json.dumps(squad))
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES, ids=os.path.basename)
def test_recipe_runs_one_step_on_cpu(recipe, tmp_path, real_vocab_file):
    name = os.path.basename(recipe)
    if name.startswith("glue"):
        data = _mrpc_file(tmp_path / "mrpc.tsv")
    elif "v2" in name:
        data = _v2_file(tmp_path / "squad_v2.json")
    else:
        data = os.path.join(DATASETS_DIR, "squad_samples", "squad_v1_sample.json")
    output = tmp_path / "run"
    overrides = [
        "strategy=one_device",
        "tpu=null",
        "init_checkpoint=null",
        "preset=tiny",
        f"train={data}",
        f"dev={data}",
        f"output_dir={output}",
        "search=null",
        "epochs=1",
        "steps_per_epoch=1",
        "batch_size=4",
        "max_dev_examples=4",
        f"vocab_file={real_vocab_file}",
        "checkpoint_every=1",
    ]
    arguments = ["finetune", "--config", recipe] + [
        part for item in overrides for part in ("--set", item)
    ]
    assert cli.main(arguments) == 0
    saved = json.load(open(output / "finetune_config.json"))
    results = json.load(open(output / "dev_results.json"))
    assert results["steps"] == 1 and results["dev"]
    with open(recipe) as f:
        written = yaml.safe_load(f)
    for field in ("mixed_precision", "jit_compile", "seq_length", "learning_rate", "doc_stride"):
        if field in written:
            assert saved[field] == written[field], field
    if "v2" in name:  # the dev set's best threshold is the model's own
        assert saved["null_score_diff_threshold"] == results["dev"]["best_f1_thresh"]
    assert sorted(os.listdir(output)) == sorted([*FINISHED_RUN_FILES, "logs"])
