"""The one writer of benchmark results: benchmarks/results/<name>.md and <name>.json.

Every script hands `write` what it measured: a Markdown table (what a reader
compares), its figures (JSON, what a later reader computes from), the command
that produced them and its headline rows (one figure per side, which
`summary.py` may quote in the README). The machine (CPU model, the flags that
decide which kernels run, cores, the float32 matmul peak), the package versions
and the date are added here, so every file carries them alike and a figure is
never read without its machine. A script that does not time the (2048, 2048)
float32 matmul in its own windows gets it timed here, after its run.
"""

import datetime
import importlib.metadata
import json
import os
import platform
import sys

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# The CPU flags that decide which kernels run: oneDNN and MKL pick AVX-512, VNNI
# (int8) and AMX / AVX512-BF16 paths by them, and fall back to AVX2 + FMA.
KERNEL_FLAG_PREFIXES = ("avx512", "amx", "avx_vnni", "avx2", "fma")
# int8 dot-product instructions (oneDNN's and ONNX Runtime's int8 kernels use them;
# without them an int8 product sums u8 x s8 pairs in int16 with AVX2).
INT8_DOT_PRODUCT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
# This process's packages; each peer adds its own (they may run in another Python).
PACKAGES = ("keras3-bert", "tensorflow", "tensorflow-text", "keras", "numpy")


def add_arguments(parser, name):
    """The results options every script takes; `name`: the files' default name
    (the script's)."""
    parser.add_argument(
        "--results-dir",
        default=RESULTS_DIR,
        help="where <name>.md and <name>.json go (default: benchmarks/results)",
    )
    parser.add_argument(
        "--results-name",
        default=name,
        help=f"the results files' name (default: {name}); another one keeps "
        "a run of other settings apart from the default run's",
    )
    parser.add_argument(
        "--no-results", action="store_true", help="print only; write no results file"
    )


def cpu(cpuinfo_path="/proc/cpuinfo"):
    """{"model", "cores", "flags"}: the CPU's model name, its logical cores and
    its kernel-deciding flags (an empty list: none of them)."""
    model, flags = None, []
    if os.path.exists(cpuinfo_path):
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = kernel_flags(value.split())
                    break
    return {
        "model": model or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "flags": flags,
    }


def kernel_flags(words):
    """The flags in `words` (a cpuinfo flags line) that decide kernels, sorted."""
    return sorted({word for word in words if word.startswith(KERNEL_FLAG_PREFIXES)})


def measure_matmul_peak(size=2048, repeats=5, dtype="float32"):
    """The machine's float32 matmul rate now, GFLOP/s: the best of `repeats`
    (size, size) x (size, size) products in TensorFlow, after one untimed. What
    a model's rate is read against (its share of the peak): machines and hours
    differ, the share says how much of what the CPU could do a side used."""
    import time

    import tensorflow as tf

    a = tf.cast(tf.random.normal((size, size)), dtype)  # bfloat16: precision_speedup.py
    product = tf.function(lambda: tf.reduce_sum(tf.cast(tf.matmul(a, a), tf.float32)))
    product().numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product().numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def package_versions(names=PACKAGES):
    """{distribution: version}, "not installed" for a missing one."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def headline(key, what, unit, figures, decimals=1):
    """One headline row: `figures` maps a side ("keras_bert", a peer's name) to
    one number in `unit`; `decimals` is how the README prints them."""
    return {
        "key": key,
        "what": what,
        "unit": unit,
        "decimals": decimals,
        "figures": {side: float(value) for side, value in figures.items()},
    }


def _script(name):
    """The benchmark script this process runs, else `<name>.py` (one script
    may write several results, e.g. bbc_retrieval.py's zero-shot and fine-tuned)."""
    running = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if running.endswith(".py") and os.path.dirname(running) == os.path.dirname(RESULTS_DIR):
        return os.path.basename(running)
    return f"{name}.py"


def write(
    name,
    title,
    *,
    table,
    figures,
    argv=None,
    method="",
    headlines=(),
    matmul_peak_gflops=None,
    peer_versions=None,
    directory=RESULTS_DIR,
    machine=None,
    date=None,
    versions=None,
):
    """Writes <directory>/<name>.json and .md and returns their paths.

    `argv`: the script's arguments (default: this process's); `peer_versions`:
    {peer: versions} reported by peers in their own processes; `machine`,
    `date` and `versions` replace this process's only for figures measured
    before the script wrote results files (None fields: not recorded then).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if machine is None:  # this machine: its peak now unless the script measured it in its windows
        machine = cpu()
        when = "in the benchmark's windows" if matmul_peak_gflops else "after the benchmark"
        matmul_peak_gflops = matmul_peak_gflops or measure_matmul_peak()
        machine["matmul_peak_measured"] = when
    machine = dict(machine)
    if matmul_peak_gflops is not None:
        machine["matmul_peak_gflops"] = round(float(matmul_peak_gflops), 1)
    report = {
        "benchmark": name,
        "title": title,
        "date": date or datetime.date.today().isoformat(),
        "command": " ".join(["python", f"benchmarks/{_script(name)}", *argv]),
        "machine": machine,
        "versions": {**(versions or package_versions()), **(peer_versions or {})},
        "method": method,
        "headlines": list(headlines),
        "figures": figures,
    }
    os.makedirs(directory, exist_ok=True)
    json_path, markdown_path = (os.path.join(directory, f"{name}.{ext}") for ext in ("json", "md"))
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    with open(markdown_path, "w", encoding="utf-8") as f:
        f.write(markdown(report, table))
    return markdown_path, json_path


def markdown(report, table):
    """The .md file: what was measured, where, with what, how; then the table."""
    machine = report["machine"]
    peak = machine.get("matmul_peak_gflops")
    lines = [
        f"# {report['title']}",
        "",
        f"Measured {report['date']} on {machine['model']}, {machine['cores']} cores, "
        f"kernel flags: {flags_text(machine['flags'])}"
        + (f"; float32 matmul peak {peak} GFLOP/s" if peak is not None else "")
        + (f" ({machine['matmul_peak_measured']})" if "matmul_peak_measured" in machine else "")
        + ".",
        "",
        "Versions: "
        + ", ".join(f"{name} {version}" for name, version in report["versions"].items())
        + ".",
        "",
        f"Command: `{report['command']}`",
        "",
    ]
    if report["method"]:
        lines += [report["method"], ""]
    if report["headlines"]:
        lines += ["## Headline figures", "", "| figure | side | value |", "|---|---|---|"]
        for row in report["headlines"]:
            for side, value in row["figures"].items():
                lines.append(
                    f"| {row['what']}, {row['unit']} | {side} | "
                    f"{format_number(value, row['decimals'])} |"
                )
        lines.append("")
    lines += ["## Results", "", table.rstrip("\n"), ""]
    return "\n".join(lines)


def flags_text(flags):
    if flags is None:
        return "not recorded"
    return ", ".join(flags) or "none of " + "*, ".join(KERNEL_FLAG_PREFIXES) + "*"


def format_number(value, decimals):
    """How results files and the README print a figure: thousands separated."""
    return f"{value:,.{decimals}f}"


def read(name, directory=RESULTS_DIR):
    with open(os.path.join(directory, f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)
