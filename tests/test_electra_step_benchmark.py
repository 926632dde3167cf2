"""benchmarks/electra_step.py: a one-step run of both sides (its options:
tests/test_benchmark_results.py)."""

import pytest

from repo_paths import benchmark_script


# Slow: a benchmark's own run, checked before its figures are quoted.
@pytest.mark.slow
def test_a_tiny_run_times_both_sides_and_prints_the_ratio(capsys):
    benchmark_script("electra_step").main(
        "--no-results --windows 1 --steps 1 --hidden 32 --heads 2 --layers 1 "
        "--batch 4 --length 24 --predictions 3".split()
    )
    printed = capsys.readouterr().out
    assert "| masked_lm |" in printed and "| electra |" in printed
    assert "ELECTRA / masked LM step time:" in printed
