"""dtype="auto": the native precision per device kind, and its one line."""

import pytest

from keras_bert.kernels import precision
from keras_bert.training import distribute

# A real AMD EPYC 9004 / Intel Sapphire Rapids flag subset, and this kind of
# machine's AVX2-only one.
ZEN4_FLAGS = "fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni".split()
AVX2_FLAGS = "fpu sse2 avx avx2 fma".split()


@pytest.mark.parametrize(
    "devices, capabilities, flags, expected",
    [
        (["CPU", "TPU"], [], AVX2_FLAGS, "mixed_bfloat16"),
        (["CPU", "GPU"], [(9, 0)], AVX2_FLAGS, "mixed_bfloat16"),  # H100
        (["CPU", "GPU"], [(7, 0)], ZEN4_FLAGS, "mixed_float16"),  # V100
        (["CPU", "GPU", "GPU"], [(8, 0), (7, 5)], [], "mixed_float16"),  # the oldest decides
        (["CPU", "GPU"], [(6, 1)], ZEN4_FLAGS, "float32"),  # no tensor cores
        (["CPU"], [], ZEN4_FLAGS, "mixed_bfloat16"),
        (["CPU"], [], ["amx_bf16", "avx2"], "mixed_bfloat16"),
        (["CPU"], [], AVX2_FLAGS, "float32"),
        (["CPU"], [], [], "float32"),  # no cpuinfo (macOS)
    ],
)
def test_choose_precision(devices, capabilities, flags, expected):
    policy, reason = precision.choose_precision(devices, capabilities, flags)
    assert policy == expected and reason


def test_read_cpu_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx512_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert precision.read_cpu_flags(str(cpuinfo)) == {"fpu", "avx512_bf16"}
    assert precision.read_cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_auto_resolves_once_with_one_line(monkeypatch, capsys):
    monkeypatch.setattr(precision, "native_precision", lambda: ("mixed_bfloat16", "test CPU"))
    precision._say_once.cache_clear()
    assert precision.resolve_auto("auto") == "mixed_bfloat16"
    assert distribute.model_dtype("auto") == "mixed_bfloat16"
    assert capsys.readouterr().err == "keras_bert: precision auto -> mixed_bfloat16 (test CPU)\n"
    monkeypatch.setattr(precision, "native_precision", lambda: ("float32", "plain CPU"))
    assert precision.resolve_auto("auto") is None  # Keras' default policy
    assert precision.resolve_auto("float32") == "float32"  # anything else passes through
    assert precision.resolve_auto(None) is None
    precision._say_once.cache_clear()


def test_encoder_and_from_pretrained_take_auto(monkeypatch, capsys):
    from keras_bert import BertEncoder

    from harness import tiny_config

    monkeypatch.setattr(precision, "native_precision", lambda: ("mixed_bfloat16", "test CPU"))
    precision._say_once.cache_clear()
    encoder = BertEncoder(tiny_config(), dtype="auto")
    assert encoder.token_embedding.dtype_policy.name == "mixed_bfloat16"
    # The resolved policy is what the config keeps: a saved model reloads as it ran.
    reloaded = BertEncoder.from_config(encoder.get_config())
    assert reloaded.token_embedding.dtype_policy.name == "mixed_bfloat16"
    assert "precision auto -> mixed_bfloat16" in capsys.readouterr().err
    precision._say_once.cache_clear()


def test_this_machine_gets_a_named_choice():
    policy, reason = precision.native_precision()
    assert policy in ("float32", "mixed_bfloat16", "mixed_float16") and reason
