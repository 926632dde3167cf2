"""benchmarks/modern_block_speed.py: its options and a one-step run of both sides."""

import pytest

from repo_paths import benchmark_script


def test_it_takes_the_results_options(capsys):
    with pytest.raises(SystemExit) as exit_code:
        benchmark_script("modern_block_speed").main(["--help"])
    assert exit_code.value.code == 0
    usage = capsys.readouterr().out
    assert "--results-dir" in usage and "--no-results" in usage


def test_a_tiny_run_times_both_sides_and_prints_the_ratio(capsys):
    benchmark_script("modern_block_speed").main(
        "--no-results --windows 1 --steps 1 --hidden 48 --heads 2 --layers 2 "
        "--batch 4 --length 24 --local-attention 8".split()
    )
    printed = capsys.readouterr().out
    assert "| bert |" in printed and "| modernbert |" in printed
    assert "ModernBERT / BERT step time:" in printed
