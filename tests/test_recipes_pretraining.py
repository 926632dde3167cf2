"""Every pretraining recipe parses into a valid config, and runs one step
(shrunk to a tiny model and synthetic data; TPU and multi-worker recipes on one device)."""

import glob
import os

import pytest

from keras_bert.training import pretraining

from harness import pretrain_fields, small_config
from repo_paths import REPO_ROOT
from synthetic_pretraining import write_records

RECIPES = sorted(glob.glob(os.path.join(REPO_ROOT, "recipes", "pretraining", "*.yaml")))
NAMES = [os.path.basename(path) for path in RECIPES]


def test_recipes_are_the_papers(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    assert {
        "bert_base_tpu_phase1.yaml",
        "bert_base_tpu_phase2.yaml",
        "bert_large_tpu_phase1.yaml",
        "bert_large_tpu_phase2.yaml",
        "bert_base_multi_gpu.yaml",
        "bert_base_multi_worker.yaml",
        "austen_cpu.yaml",
    } <= set(NAMES)
    for size in ("base", "large"):
        one = pretraining.load_config(f"recipes/pretraining/bert_{size}_tpu_phase1.yaml")
        two = pretraining.load_config(f"recipes/pretraining/bert_{size}_tpu_phase2.yaml")
        # Paper: batch 256, lr 1e-4, 10k warmup, 1M steps: 90 % at 128, 10 % at 512.
        assert (one.batch_size, one.learning_rate, one.warmup_steps) == (256, 1e-4, 10000)
        assert (one.seq_length, two.seq_length) == (128, 512)
        assert (one.train_steps, two.train_steps) == (900000, 100000)
        assert two.init_checkpoint == one.model_dir + "/export"
        assert one.strategy == "tpu" and one.mixed_precision == "mixed_bfloat16"
    gpu = pretraining.load_config("recipes/pretraining/bert_base_multi_gpu.yaml")
    assert (gpu.strategy, gpu.mixed_precision) == ("mirrored", "mixed_float16")
    assert (
        pretraining.load_config("recipes/pretraining/bert_base_multi_worker.yaml").strategy
        == "multi_worker"
    )


@pytest.fixture(scope="module")
def smoke_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("smoke")
    write_records(directory / "data.tfrecord", 16, seq_length=16)
    small_config(vocab_size=32, num_hidden_layers=1, max_position_embeddings=16).to_json_file(
        str(directory / "bert_config.json")
    )
    return directory


def smoke_config(path, data, model_dir, **extra):
    recipe = pretraining.load_config(path)
    overrides = pretrain_fields(
        model=str(data / "bert_config.json"),
        train_files=str(data / "data.tfrecord"),
        eval_files=str(data / "data.tfrecord"),
        eval_steps=1,
        batch_size=4,
        train_steps=1,
        warmup_steps=0,
        checkpoint_every=1,
        log_every=1,
        steps_per_execution=1,
        model_dir=str(model_dir),
        # TPU and multi-worker clusters do not exist here: one device, no XLA compile
        # (test_distribute traces the TPU step under XLA instead).
        strategy="one_device" if recipe.strategy in ("tpu", "multi_worker") else recipe.strategy,
        **extra,
    )
    fields = {**{k: v for k, v in vars(recipe).items()}, **overrides}
    return pretraining.load_config(**fields)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if "phase2" not in n])
def test_one_step(name, smoke_data, tmp_path):
    config = smoke_config(
        os.path.join("recipes", "pretraining", name),
        smoke_data,
        tmp_path / "m",
        init_checkpoint=None,
    )
    results = pretraining.pretrain(config)
    assert results["masked_lm_loss"] > 0
    assert os.path.exists(tmp_path / "m" / "export" / "bert_model.ckpt.index")


@pytest.mark.slow
@pytest.mark.parametrize("size", ["base", "large"])
def test_one_step_phase2_from_phase1(size, smoke_data, tmp_path):
    phase1 = smoke_config(
        f"recipes/pretraining/bert_{size}_tpu_phase1.yaml", smoke_data, tmp_path / "phase1"
    )
    pretraining.pretrain(phase1)
    phase2 = smoke_config(
        f"recipes/pretraining/bert_{size}_tpu_phase2.yaml",
        smoke_data,
        tmp_path / "phase2",
        init_checkpoint=str(tmp_path / "phase1" / "export"),
    )
    assert pretraining.pretrain(phase2)["masked_lm_loss"] > 0
