"""benchmarks/int8_kernels.py: a small run names the ops of a Keras int8 Dense
and times the three products (its options: tests/test_benchmark_results.py)."""

import pytest

from repo_paths import benchmark_script


# Slow: a benchmark's own run, checked before its figures are quoted.
@pytest.mark.slow
def test_a_small_run_names_the_int8_ops_and_times_each_product(capsys):
    script = benchmark_script("int8_kernels")
    ops = script.quantized_dense_ops()
    # The product Keras' int8 Dense runs on TensorFlow: int8 x int8 -> int32.
    assert any(inputs == ["int8", "int8"] and outputs == ["int32"] for _, inputs, outputs in ops)
    script.main("--no-results --tokens 16 --windows 1 --repeats 1".split())
    printed = capsys.readouterr().out
    assert all(f"| {side} |" in printed for side in ("float32", "bfloat16", "keras int8"))
    assert "keras int8 / float32:" in printed
