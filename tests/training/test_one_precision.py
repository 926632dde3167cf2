"""One precision rule (keras_bert.kernels.precision): `keras-bert finetune`
and a Python `fit` of the same model train at the same precision, float32 by
default on every CPU; `auto` picks the machine's native precision and the run
records what it picked. Each case runs as an AVX2-only and as an AVX512_BF16
machine (KERAS_BERT_CPU_FLAGS stands in for /proc/cpuinfo)."""

import json
import os

import keras
import pytest

from keras_bert import BertEncoder, cli
from keras_bert.kernels import precision
from keras_bert.models.classifier import BertClassifier

from harness import small_config

CPUS = {
    "avx2_only": ("avx avx2 fma", "float32"),
    "avx512_bf16": ("avx avx2 fma avx512f avx512_bf16 avx512_vnni", "mixed_bfloat16"),
}
CONFIG = small_config(vocab_size=30, num_hidden_layers=1, max_position_embeddings=32)


@pytest.fixture(params=sorted(CPUS))
def cpu(request, monkeypatch):
    """(flags, what `auto` picks on them), with the process seeing those flags."""
    flags, native = CPUS[request.param]
    monkeypatch.setenv(precision.CPU_FLAGS_ENV, flags)
    return flags, native


def _finetune(tmp_path, tiny_vocab_file, *extra):
    (tmp_path / "train.tsv").write_text(
        "label\tsentence\n" + "pos\tthe quick fox\nneg\tthe lazy dog\n" * 8
    )
    base = str(tmp_path / "base.keras")
    BertEncoder(CONFIG).save(base)
    output = str(tmp_path / "run")
    argv = ["finetune", "--task", "classify", "--train", str(tmp_path / "train.tsv")]
    argv += ["--init-checkpoint", base, "--vocab-file", tiny_vocab_file, "--seq-length", "16"]
    argv += ["--batch-size", "8", "--epochs", "1", "--no-tensorboard", "--output-dir", output]
    assert cli.main(argv + list(extra)) == 0
    with open(os.path.join(output, "finetune_config.json")) as f:
        recorded = json.load(f)["mixed_precision"]
    saved = keras.models.load_model(os.path.join(output, "model.keras"))
    return base, recorded, saved.encoder.token_embedding.dtype_policy.name


@pytest.mark.precision
def test_the_command_and_from_pretrained_train_at_the_same_precision(
    cpu, tmp_path, tiny_vocab_file
):
    base, recorded, trained = _finetune(tmp_path, tiny_vocab_file)
    in_python = BertClassifier.from_pretrained(base, num_classes=2, vocab_file=tiny_vocab_file)
    assert recorded == trained == "float32"
    assert in_python.encoder.token_embedding.dtype_policy.name == "float32"


@pytest.mark.precision
def test_auto_is_the_machine_s_native_precision_and_the_run_records_it(
    cpu, tmp_path, tiny_vocab_file, capsys
):
    _, native = cpu
    precision._say_once.cache_clear()
    _, recorded, trained = _finetune(tmp_path, tiny_vocab_file, "--mixed-precision", "auto")
    assert recorded == trained == native
    assert f"precision auto -> {native}" in capsys.readouterr().err
    in_python = BertClassifier.from_pretrained(
        str(tmp_path / "base.keras"), num_classes=2, vocab_file=tiny_vocab_file, dtype="auto"
    )
    assert in_python.encoder.token_embedding.dtype_policy.name == native


def test_the_cpu_flags_override_is_read_as_cpuinfo_names(monkeypatch):
    monkeypatch.setenv(precision.CPU_FLAGS_ENV, "AVX2, avx512_bf16")
    assert precision.cpu_flags() == {"avx2", "avx512_bf16"}
    monkeypatch.setenv(precision.CPU_FLAGS_ENV, "")  # set but empty: a CPU with no flags
    assert precision.cpu_flags() == frozenset()
    monkeypatch.delenv(precision.CPU_FLAGS_ENV)
    assert precision.cpu_flags() == precision.read_cpu_flags()


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, "float32"),
        ("float32", "float32"),
        ("bfloat16", "mixed_bfloat16"),
        ("mixed_bfloat16", "mixed_bfloat16"),
        ("float16", "mixed_float16"),
        ("mixed_float16", "mixed_float16"),
    ],
)
def test_every_entry_point_resolves_the_same_names(value, expected):
    assert precision.resolve(value) == expected


def test_an_unknown_precision_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="config field mixed_precision must be one of auto"):
        precision.resolve("half", "config field mixed_precision")
