"""The benchmarks' results files (benchmarks/results_file.py), the README table
generated from them (benchmarks/summary.py), and each script's options and
results writer. The peers themselves are not run here: their environments are
not the test environment's (benchmarks/README.md)."""

import argparse
import importlib
import json
import os
import sys

import pytest

from repo_paths import REPO_ROOT, benchmark_script

SCRIPTS = (
    "batch1_profile",
    "bbc_retrieval",
    "command_vs_fit",
    "cpu_serving",
    "electra_step",
    "first_step",
    "finetuning",
    "gpu",
    "finetuning_parity",
    "inference",
    "int8_accuracy",
    "int8_kernels",
    "precision_speedup",
    "pretraining_data",
    "pretraining_throughput",
    "serving_latency",
    "tokenizer",
)
PEER_SCRIPTS = ("bbc_retrieval", "cpu_serving", "finetuning", "finetuning_parity", "inference")

# An Intel server's flags line, cut: the kernel-deciding flags among others.
CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx fma avx2 avx512f avx512bw avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8 avx_vnni
"""


def results_file():
    """The writer module the scripts import (`import results_file`)."""
    benchmark_script("results_file")  # puts benchmarks/ on sys.path
    return importlib.import_module("results_file")


@pytest.fixture(autouse=True)
def a_known_matmul_peak(monkeypatch):
    """Writers time a (2048, 2048) matmul when their script did not: seconds each,
    so here the peak is a known number (`measure_matmul_peak` has its own test)."""
    monkeypatch.setattr(results_file(), "measure_matmul_peak", lambda: 100.0)


def test_the_machine_names_the_cpu_and_its_kernel_flags(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    machine = results_file().cpu(str(path))
    assert machine["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert machine["flags"] == [
        "amx_bf16",
        "amx_int8",
        "amx_tile",
        "avx2",
        "avx512_bf16",
        "avx512_vnni",
        "avx512bw",
        "avx512f",
        "avx_vnni",
        "fma",
    ]
    assert machine["cores"] == os.cpu_count()


def test_a_results_file_holds_figures_machine_versions_date_and_command(tmp_path):
    writer = results_file()
    machine = {"model": "Test CPU", "cores": 2, "flags": ["avx2", "fma"]}
    markdown_path, json_path = writer.write(
        "example",
        "An example",
        table="| a | b |\n|---|---|\n| 1 | 2 |",
        figures={"rates": [1.5, 2.5]},
        argv=["--windows", "3"],
        method="Best of 3 windows.",
        headlines=[
            writer.headline("rate", "example rate", "seq/s", {"keras_bert": 1234.5, "peer": 617.25})
        ],
        matmul_peak_gflops=123.456,
        peer_versions={"peers": "torch 9"},
        directory=str(tmp_path),
        machine=machine,
        date="2026-01-02",
    )
    report = json.loads(open(json_path, encoding="utf-8").read())
    assert report["benchmark"] == "example" and report["date"] == "2026-01-02"
    assert report["command"] == "python benchmarks/example.py --windows 3"
    assert report["machine"] == {**machine, "matmul_peak_gflops": 123.5}
    assert report["versions"]["tensorflow"] != "not installed"
    assert report["versions"]["peers"] == "torch 9"
    assert report["figures"] == {"rates": [1.5, 2.5]}
    assert report["headlines"][0]["figures"] == {"keras_bert": 1234.5, "peer": 617.25}
    text = open(markdown_path, encoding="utf-8").read()
    assert text.startswith("# An example\n")
    assert "Test CPU, 2 cores, kernel flags: avx2, fma; float32 matmul peak 123.5 GFLOP/s" in text
    assert "| example rate, seq/s | keras_bert | 1,234.5 |" in text
    assert "| example rate, seq/s | peer | 617.2 |" in text  # round half to even
    assert text.rstrip().endswith("| 1 | 2 |")
    assert writer.read("example", str(tmp_path)) == report


def test_the_writer_times_the_matmul_when_the_script_did_not(tmp_path):
    writer = results_file()
    writer.write("timed", "t", table="", figures={}, argv=[], directory=str(tmp_path))
    machine = writer.read("timed", str(tmp_path))["machine"]
    assert machine["matmul_peak_gflops"] == 100.0
    assert machine["matmul_peak_measured"] == "after the benchmark"
    writer.write(
        "timed",
        "t",
        table="",
        figures={},
        argv=[],
        directory=str(tmp_path),
        matmul_peak_gflops=250.0,
    )
    machine = writer.read("timed", str(tmp_path))["machine"]
    assert (machine["matmul_peak_gflops"], machine["matmul_peak_measured"]) == (
        250.0,
        "in the benchmark's windows",
    )
    assert (
        "peak 250.0 GFLOP/s (in the benchmark's windows)."
        in open(tmp_path / "timed.md", encoding="utf-8").read()
    )


def test_the_matmul_peak_is_a_rate():
    # A fresh copy of the module: this file's fixture replaced the shared one's.
    assert benchmark_script("results_file").measure_matmul_peak(size=128, repeats=2) > 0


def test_unrecorded_flags_are_said_so():
    writer = results_file()
    assert writer.flags_text(None) == "not recorded"
    assert writer.flags_text([]).startswith("none of avx512*")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_takes_the_results_options(script, capsys):
    module = benchmark_script(script)
    with pytest.raises(SystemExit) as exit_code:
        module.main(["--help"])
    assert exit_code.value.code == 0
    usage = capsys.readouterr().out
    assert "--results-dir" in usage and "--no-results" in usage
    assert ("--peer-python" in usage) == (script in PEER_SCRIPTS)


def test_a_missing_peer_python_says_what_to_do(monkeypatch):
    peers = benchmark_script("peer_process")
    with pytest.raises(SystemExit, match="--peer-python or set KERAS_BERT_PEER_PYTHON"):
        peers.peer_python(None)
    with pytest.raises(SystemExit, match="not an executable Python"):
        peers.peer_python(os.path.join(REPO_ROOT, "README.md"))
    assert peers.peer_python(os.path.realpath(sys.executable))


def test_peer_scripts_read_the_environment_variable(monkeypatch):
    monkeypatch.setenv("KERAS_BERT_PEER_PYTHON", "/some/python")
    parser = argparse.ArgumentParser()
    benchmark_script("peer_process").add_peer_python_argument(parser)
    assert parser.parse_args([]).peer_python == "/some/python"
    assert parser.parse_args(["--peer-python", "/other"]).peer_python == "/other"


def test_an_unbuilt_mkl_shim_stops_on_amd_only(tmp_path, monkeypatch):
    shim = benchmark_script("mkl_shim")
    missing = str(tmp_path / "libmklshim.so")
    monkeypatch.setattr(shim, "amd_cpu", lambda: False)
    assert shim.mkl_shim_env(missing) == {}
    monkeypatch.setattr(shim, "amd_cpu", lambda: True)
    with pytest.raises(SystemExit, match="python benchmarks/mkl_shim.py"):
        shim.mkl_shim_env(missing)


def namespace(tmp_path, name, **options):
    return argparse.Namespace(results_dir=str(tmp_path), results_name=name, **options)


def test_pretraining_throughput_results_name_each_side(tmp_path):
    script = benchmark_script("pretraining_throughput")
    best = {
        "ours": {"seq_per_second": 30.0, "mfu": 0.7, "precision": "float32", "xla": False},
        "keras-hub": {"seq_per_second": 20.0, "mfu": 0.5, "precision": "float32", "xla": True},
        "model-garden": {"seq_per_second": 15.0, "mfu": 0.4, "precision": "float32", "xla": False},
    }
    measured = {
        "mini": {
            "peak_gflops": 140.0,
            "load": "1.0",
            "best": best,
            "window_ratios": [1.4, 1.5, 1.6],
            "window_ratios_by_peer": {"keras-hub": [1.4, 1.5, 1.6], "model-garden": [1.9, 2.0]},
        }
    }
    args = namespace(
        tmp_path,
        "pretraining_throughput",
        seq_length=128,
        batch_size=32,
        max_predictions=20,
        windows=3,
        repeats=3,
    )
    script.write_results(args, [], measured)
    report = results_file().read("pretraining_throughput", str(tmp_path))
    assert report["headlines"][0]["key"] == "mini_seq_per_second"
    assert report["headlines"][0]["figures"] == {
        "keras_bert": 30.0,
        "keras-hub": 20.0,
        "Model Garden": 15.0,
    }
    assert report["machine"]["matmul_peak_gflops"] == 140.0
    text = open(tmp_path / "pretraining_throughput.md", encoding="utf-8").read()
    assert (
        "| mini | keras_bert | 30.00 | 70.0% | float32, XLA off | 1.50x (1.40-1.60x) |  |" in text
    )
    assert (
        "| mini | Model Garden | 15.00 | 40.0% | float32, XLA off |  | 1.95x (1.90-2.00x) |" in text
    )


def test_inference_headline_is_each_sides_fastest_and_strings_in(tmp_path):
    script = benchmark_script("inference")

    def row(rate):
        return {
            "b1_p50_ms": 5.0,
            "b1_p99_ms": 6.0,
            "seq_per_second": rate,
            "gflops": 10.0,
            "peak_share": 0.5,
        }

    measured = {
        "natural": {
            "mean_pieces": 27.4,
            "peers": {
                "kb strings": row(300.0),
                "kb ids": row(999.0),
                "kb strings [padding=longest]": row(500.0),
                "hf model": row(150.0),
                "hf compiled": row(330.0),
                "keras-hub": row(100.0),
                "products alone: kb": row(2000.0),
            },
        }
    }
    args = namespace(tmp_path, "inference", batch=32, windows=1, calls=1, groups=1, preset=None)
    script.write_results(args, [], measured, 200.0, {"peers": "torch 9"})
    (headline,) = results_file().read("inference", str(tmp_path))["headlines"]
    assert headline["key"] == "natural_b32_seq_per_second"
    assert headline["figures"] == {"keras_bert": 500.0, "HuggingFace": 330.0, "keras-hub": 100.0}


def test_finetuning_results_hold_speed_and_quality(tmp_path):
    script = benchmark_script("finetuning")
    measured = {
        "rotten_tomatoes": {
            "train": 10,
            "dev": 5,
            "seq_length": 64,
            "batch_size": 32,
            "timing": {
                "examples_per_second": {
                    "keras_bert fit (fast)": [10.0, 12.0],
                    "hf Trainer (pad longest, 2 thr)": [6.0, 8.0],
                }
            },
            "quality": {
                "metric": "accuracy",
                "seeds": [0, 1],
                "epochs": 1,
                "sides": {
                    "keras_bert fit (fast)": {"dev": [80.0, 82.0], "mean": 81.0, "sd": 1.41},
                    "hf Trainer (pad longest, eager)": {
                        "dev": [83.0, 81.0],
                        "mean": 82.0,
                        "sd": 1.41,
                    },
                },
            },
        }
    }
    args = namespace(tmp_path, "finetuning", windows=2, steps=5)
    script.write_results(args, [], measured, {"peers": "torch 9"})
    headlines = {
        row["key"]: row["figures"]
        for row in results_file().read("finetuning", str(tmp_path))["headlines"]
    }
    assert headlines == {
        "rotten_tomatoes_examples_per_second": {"keras_bert": 12.0, "HuggingFace": 8.0},
        "rotten_tomatoes_dev_accuracy": {"keras_bert": 81.0, "HuggingFace": 82.0},
    }
    text = open(tmp_path / "finetuning.md", encoding="utf-8").read()
    assert "| rotten_tomatoes | keras_bert fit (fast) | 12.0 | 81.00 ± 1.41 (2) |" in text
    assert "| rotten_tomatoes | hf Trainer (pad longest, 2 thr) | 8.0 |  |" in text
    assert "| rotten_tomatoes | hf Trainer (pad longest, eager) |  | 82.00 ± 1.41 (2) |" in text


def test_pretraining_data_results_compare_whole_commands(tmp_path):
    script = benchmark_script("pretraining_data")

    def run(instances, seconds):
        return {
            "instances": instances,
            "seconds": seconds,
            "instances_per_second": instances / seconds,
            "cpu_seconds": seconds,
            "peak_rss_mib": 600.0,
            "load_average_at_start": 1.0,
        }

    measured = {
        "ours": run(1000, 2.0),
        "ours_runs": [run(1000, 2.0)],
        "not_next_percent": 50.0,
        "original": run(1000, 10.0),
        "original_3_documents": run(10, 1.0),
        "ours_3_documents": run(10, 0.5),
        "ours_x8": run(8000, 4.0),
        "ours_once_started_instances_per_second": 3500.0,
        "original_once_started_instances_per_second": 110.0,
    }
    script.write_results(namespace(tmp_path, "pretraining_data", repeats=1), [], measured)
    (headline,) = results_file().read("pretraining_data", str(tmp_path))["headlines"]
    assert headline["figures"] == {"keras_bert": 500.0, "Model Garden": 100.0}
    text = open(tmp_path / "pretraining_data.md", encoding="utf-8").read()
    assert "| original (Model Garden), 1x | 1000 | 10.0 | 100 | 10.0 | 600 |" in text


def test_serving_latency_and_parity_and_retrieval_write_their_tables(tmp_path):
    serving = benchmark_script("serving_latency")
    serving.write_results(
        namespace(
            tmp_path,
            "serving_latency",
            init_checkpoint=None,
            preset="tiny",
            seq_length=128,
            windows=1,
        ),
        [],
        1000,
        {
            1: {
                "strings_ms": 2.0,
                "hf_tokenizers_and_ids_ms": 3.0,
                "ids_only_ms": 1.5,
                "tokenize_ours_ms": 0.5,
                "tokenize_hf_ms": 1.5,
                "same_ids": True,
            }
        },
    )
    assert (
        "| 1 | 2.0 | 3.0 | 1.5 | 0.50 | 1.50 |"
        in open(tmp_path / "serving_latency.md", encoding="utf-8").read()
    )

    parity = benchmark_script("finetuning_parity")
    side = {"loss": [3.0], "learning_rate": [0.0], "grad_norm": [2.0], "dropout": []}
    parity.write_results(
        namespace(tmp_path, "finetuning_parity"),
        [],
        {
            "wnut16": {
                "keras_bert": side,
                "huggingface": side,
                "updates_relative_difference": {1: 1e-5},
            }
        },
        {"peers": "torch 9"},
    )
    text = open(tmp_path / "finetuning_parity.md", encoding="utf-8").read()
    assert "| wnut16 | 1 | 0 / 0 | 3 / 3 | 2 / 2 |" in text and "| wnut16 | 1 | 1.00e-05 |" in text

    retrieval = benchmark_script("bbc_retrieval")
    figures = {
        "recall@1": 0.5,
        "recall@5": 0.75,
        "recall@10": 1.0,
        "mrr@10": 0.6,
        "ndcg@10": 0.7,
        "articles_per_second": 8.0,
    }
    results = {
        "dev_queries": 8,
        "seq_length": 32,
        "batch_size": 4,
        "zero_shot": figures,
        "sentence_transformers": {
            "settings": {
                "sentence-transformers torch": {**figures, "max_abs_difference": 0.0},
                "sentence-transformers onnx int8": {
                    **figures,
                    "articles_per_second": 12.0,
                    "max_abs_difference": 0.03,
                },
                "keras_bert float32": {
                    **figures,
                    "articles_per_second": 9.0,
                    "max_abs_difference": 2e-7,
                },
                "keras_bert LiteRT int8": {
                    **figures,
                    "recall@1": 0.625,
                    "articles_per_second": 16.0,
                    "max_abs_difference": 0.01,
                },
            },
            "not_timed": {"sentence-transformers onnx": "ImportError: no optimum"},
            "versions": "torch 9",
            "threads": 1,
            "windows": 3,
        },
    }
    retrieval.write_results(namespace(tmp_path, "bbc_retrieval_zero_shot"), [], results)
    report = results_file().read("bbc_retrieval_zero_shot", str(tmp_path))
    assert report["headlines"][0]["figures"] == {
        "sentence-transformers torch": 8.0,
        "sentence-transformers onnx int8": 12.0,
        "keras_bert float32": 9.0,
        "keras_bert LiteRT int8": 16.0,
    }
    # the goals: 16 / 8 = 2x the default backend, 16 / 12 = 1.33x the fastest
    assert report["figures"]["goals"] == {
        "default backend": {
            "ours": "keras_bert LiteRT int8",
            "peer": "sentence-transformers torch",
            "speedup": 2.0,
        },
        "fastest backend": {
            "ours": "keras_bert LiteRT int8",
            "peer": "sentence-transformers onnx int8",
            "speedup": pytest.approx(16.0 / 12.0),
        },
    }
    text = open(tmp_path / "bbc_retrieval_zero_shot.md", encoding="utf-8").read()
    assert "| keras_bert LiteRT int8 | 0.6250 | 1.0000 | 0.6000 | 16.0 | 1.0e-02 |" in text
    assert "| fastest backend | keras_bert LiteRT int8 | sentence-transformers onnx int8 | " in text
    assert "not timed: sentence-transformers onnx" in text


@pytest.mark.slow
def test_tokenizer_script_writes_its_results_on_a_tiny_corpus(tmp_path):
    """keras_bert's side of the script end to end, on three lines (the peers too
    where installed: Model Garden's tokenizer is in the test extra)."""
    from keras_bert import assets

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(
        "Emma Woodhouse, handsome, clever, and rich.\n"
        "It is a truth universally acknowledged.\nCaf\u00e9 au lait.\n"
    )
    script = benchmark_script("tokenizer")
    script.main(
        [
            "--corpus",
            str(corpus),
            "--vocab-file",
            assets.VOCAB_FILE,
            "--batch-size",
            "2",
            "--windows",
            "1",
            "--python-lines",
            "3",
            "--results-dir",
            str(tmp_path),
        ]
    )
    report = results_file().read("tokenizer", str(tmp_path))
    assert report["figures"]["lines"] == 3 and report["figures"]["corpus"] == "corpus"
    (headline,) = report["headlines"]
    assert headline["figures"]["keras_bert"] > 0
    assert (
        headline["figures"]["keras_bert"]
        == report["figures"]["lines_per_second"]["keras_bert BertTokenizer.tokenize"]
    )


@pytest.mark.slow
def test_pretraining_throughput_script_times_keras_bert_on_a_tiny_config(tmp_path):
    """keras_bert's side of the script end to end, on the tiny preset, one step."""
    script = benchmark_script("pretraining_throughput")
    script.main(
        [
            "--presets",
            "tiny",
            "--models",
            "ours",
            "--xla",
            "off",
            "--windows",
            "1",
            "--repeats",
            "1",
            "--batch-size",
            "4",
            "--seq-length",
            "16",
            "--max-predictions",
            "2",
            "--results-dir",
            str(tmp_path),
        ]
    )
    report = results_file().read("pretraining_throughput", str(tmp_path))
    best = report["figures"]["presets"]["tiny"]["best"]["ours"]
    assert best["seq_per_second"] > 0 and best["xla"] is False
    assert report["headlines"][0]["figures"] == {"keras_bert": best["seq_per_second"]}
    assert report["machine"]["matmul_peak_gflops"] > 0


@pytest.mark.slow
def test_batch1_profile_takes_a_call_apart_on_a_tiny_config(tmp_path):
    """The script end to end on the tiny preset: every part timed, the floors
    below the whole call."""
    script = benchmark_script("batch1_profile")
    script.main(
        ["--preset", "tiny", "--requests", "2", "--windows", "1", "--results-dir", str(tmp_path)]
    )
    report = results_file().read("batch1_profile", str(tmp_path))
    parts = report["figures"]["ms_per_request"]
    assert set(parts) == {
        "strings",
        "tokenize_and_pack",
        "ids_only",
        "arithmetic_floor",
        "dispatch_floor",
    }
    assert all(value > 0 for value in parts.values())
    assert parts["arithmetic_floor"] < parts["ids_only"] < parts["strings"]
    assert report["figures"]["graph_ops"] > 100


# === The README's table ===


def test_the_table_quotes_each_rows_headline(tmp_path):
    writer, summary = results_file(), benchmark_script("summary")
    machine = {"model": "Test CPU", "cores": 2, "flags": []}
    for _, name, key in summary.ROWS:
        writer.write(
            name,
            name,
            table="",
            figures={},
            argv=[],
            machine=machine,
            directory=str(tmp_path),
            headlines=[
                writer.headline(key, name, "x", {"keras_bert": 12345.678, "HuggingFace": 0.5}, 1)
            ],
        )
    table = summary.table(str(tmp_path), link_prefix="R/")
    rows = table.splitlines()
    assert rows[0] == "| measured | keras_bert | Model Garden | keras-hub | HuggingFace |"
    assert len(rows) == 2 + len(summary.ROWS)
    label, name, _ = summary.ROWS[0]
    assert rows[2] == (f"| {label} | [12,345.7](R/{name}.md) | — | — | [0.5](R/{name}.md) |")


def test_a_missing_headline_names_the_file_and_the_script(tmp_path):
    writer, summary = results_file(), benchmark_script("summary")
    writer.write(
        "tokenizer",
        "t",
        table="",
        figures={},
        argv=[],
        directory=str(tmp_path),
        machine={"model": "m", "cores": 1, "flags": []},
    )
    with pytest.raises(
        KeyError, match="tokenizer.json has no headline 'lines_per_second'.*benchmarks/tokenizer.py"
    ):
        summary.headline("tokenizer", "lines_per_second", str(tmp_path))


def test_the_readme_block_is_replaced_between_its_markers_only():
    summary = benchmark_script("summary")
    text = f"before\n{summary.START}\nold | table\n{summary.END}\nafter\n"
    assert (
        summary.with_table(text, "new") == f"before\n{summary.START}\nnew\n{summary.END}\nafter\n"
    )
    assert summary.readme_block(text) == "old | table"
    with pytest.raises(ValueError, match="lacks the markers"):
        summary.readme_block("no table here")


def test_cpu_serving_compares_our_fastest_form_with_the_fastest_peer():
    serving = benchmark_script("cpu_serving")
    # seconds per call, two windows each: the best window counts
    seconds = {
        1: {
            "keras_bert float32": [0.010, 0.008],
            "keras_bert int8": [0.009, 0.012],
            "onnxruntime float32": [0.007, 0.009],
            "onnxruntime int8": [0.006, 0.010],
        },
        32: {
            "keras_bert float32": [0.100, 0.120],
            "keras_bert int8": [0.060, 0.070],
            "onnxruntime float32": [0.140, 0.130],
            "onnxruntime int8": [0.090, 0.095],
        },
    }
    accuracy = {
        "keras_bert float32": 0.80,
        "keras_bert int8": 0.797,
        "onnxruntime float32": 0.80,
        "onnxruntime int8": 0.78,
    }
    rows, figures = serving.goal_rows(seconds, [1, 32], accuracy)
    # batch 1: 6 ms (onnxruntime int8) / 8 ms (keras_bert float32) = 0.75x, goal 1.0x
    assert figures["1"] == {
        "ours": "keras_bert float32",
        "peer": "onnxruntime int8",
        "speedup": pytest.approx(0.75),
        "goal": 1.0,
    }
    assert "NOT met" in rows[0]
    # batch 32: 90 ms / 60 ms = 1.5x, goal 1.5x
    assert figures["32"]["speedup"] == pytest.approx(1.5)
    assert rows[1].endswith("1.5x: met |")
    # A form more than 0.5 points below float32 does not count for a goal (the
    # peers count as they are): int8 at -0.6 points leaves float32 to face them.
    accuracy["keras_bert int8"] = 0.794
    rows, figures = serving.goal_rows(seconds, [1, 32], accuracy)
    assert figures["32"]["ours"] == "keras_bert float32"
    assert figures["32"]["speedup"] == pytest.approx(0.9)
    assert serving.goal_rows({1: {"keras_bert int8": [0.01]}}, [1], accuracy) == ([], {})


def test_cpu_serving_says_when_the_cpu_lacks_what_a_form_measures():
    serving = benchmark_script("cpu_serving")
    avx2 = serving.cpu_features_line(["avx2", "fma"])
    assert "bfloat16 form runs emulated" in avx2 and "no VNNI / AMX" in avx2
    native = serving.cpu_features_line(["avx2", "avx512_bf16", "avx512_vnni"])
    assert native == "bfloat16 arithmetic: AVX512_BF16; int8 dot products: AVX512_VNNI"


def test_gpu_benchmark_without_a_gpu_says_so_and_exits_0(capsys, monkeypatch):
    gpu = benchmark_script("gpu")
    # This machine as one without a GPU, whatever it has.
    monkeypatch.setattr(gpu.tf.config, "list_physical_devices", lambda kind=None: [])
    assert gpu.main([]) == 0
    assert capsys.readouterr().out.strip() == gpu.NO_GPU


def test_gpu_benchmark_counts_flops_as_the_paper_shapes_ask():
    from keras_bert.config import BertConfig

    gpu = benchmark_script("gpu")
    config = BertConfig.preset("base")
    # BERT-base: 12 layers x (4 x 768^2 + 2 x 768 x 3072) = 84,934,656 weights per token
    assert gpu.encoder_weights_per_token(config) == 84_934_656
    # serving one 128-token row: 2 x 84,934,656 x 128 + 2 x 768^2 (pooler)
    # + 4 x 12 x 128^2 x 768 (QK^T, PV)
    assert gpu.serving_flops(config, 1, 128) == (
        2 * 84_934_656 * 128 + 2 * 768 * 768 + 4 * 12 * 128 * 128 * 768
    )
