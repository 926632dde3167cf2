"""Two training steps timed against each other on a shared, noisy machine,
and their results file.

Each window runs `steps` timed calls per side after `warmup` untimed ones
(tracing, first allocations) made once before the first window; the sides
alternate within a window (rotated order, so neither always runs on a warm
cache), and each side's figure is the best of its windows.
"""

import time

import results_file

WARMUP_STEPS = 2


def add_arguments(parser, name, *, hidden, heads, batch, steps, layers=4, length=128, windows=3):
    """The model's shape and the windows' options both sides share, then
    `results_file`'s (`name`: the results files' default name)."""
    parser.add_argument("--hidden", type=int, default=hidden)
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--heads", type=int, default=heads)
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--length", type=int, default=length)
    parser.add_argument("--windows", type=int, default=windows)
    parser.add_argument("--steps", type=int, default=steps)
    results_file.add_arguments(parser, name)


def time_alternating(sides, windows, steps, warmup=WARMUP_STEPS):
    """sides: {name: a call running one step to its end} -> {name: seconds
    per step of each window}."""
    for run in sides.values():
        for _ in range(warmup):
            run()
    names = list(sides)
    per_window = {name: [] for name in names}
    for window in range(windows):
        order = names[window % len(names) :] + names[: window % len(names)]
        for name in order:
            start = time.perf_counter()
            for _ in range(steps):
                sides[name]()
            per_window[name].append((time.perf_counter() - start) / steps)
    return per_window


def ratio_table(per_window, numerator, denominator, column, label):
    """The best step of each side, the ratio `numerator` / `denominator` of
    their best steps, and a Markdown table of both (`column`: the first
    column's heading; `label`: the ratio line's)."""
    best = {name: min(times) for name, times in per_window.items()}
    ratio = best[numerator] / best[denominator]
    window_ratios = [n / d for n, d in zip(per_window[numerator], per_window[denominator])]
    table = "\n".join(
        [
            f"| {column} | best step, ms | windows, ms |",
            "|---|---|---|",
            *(
                f"| {name} | {1000 * best[name]:.1f} | "
                + ", ".join(f"{1000 * t:.1f}" for t in per_window[name])
                + " |"
                for name in per_window
            ),
            "",
            f"{label}: {ratio:.3f} (per window: "
            + ", ".join(f"{r:.3f}" for r in window_ratios)
            + ")",
        ]
    )
    return best, ratio, table


def report(
    args, argv, per_window, numerator, denominator, *, column, label, title, details, sections=()
):
    """Prints `ratio_table` and, unless `--no-results`, writes it with its
    figures (`results_file`; `args` as `add_arguments` parsed them, `details`:
    the method's words beyond the windows and the shape). `sections`: more
    (heading, per_window) of the same two sides in other settings, each its
    own table and ratio after the first."""
    best, ratio, table = ratio_table(per_window, numerator, denominator, column, label)
    figures = {"seconds_per_step": per_window, "best": best, "ratio": ratio}
    for heading, more in sections:
        more_best, more_ratio, more_table = ratio_table(more, numerator, denominator, column, label)
        table += f"\n\n### {heading}\n\n{more_table}"
        figures.setdefault("sections", {})[heading] = {
            "seconds_per_step": more,
            "best": more_best,
            "ratio": more_ratio,
        }
    print(table)
    if not args.no_results:
        results_file.write(
            args.results_name,
            title,
            table=table,
            argv=argv,
            figures={**figures, "shape": vars(args) | {"results_dir": None}},
            method=f"{args.steps} timed steps per window, best of {args.windows} windows; "
            f"hidden {args.hidden}, {args.layers} layers, {args.heads} heads, batch "
            f"{args.batch} x {args.length}, {details}",
            directory=args.results_dir,
        )
