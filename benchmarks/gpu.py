"""keras_bert on one GPU: BERT-base pretraining and SQuAD fine-tuning steps/s
and served latency, each with its model-FLOPs utilisation, in one run.

- pretraining: `BertPretrainer.train_step` (MLM + NSP, AdamW) at length 128
  (batch 64, 20 predictions) and 512 (batch 16, 76 predictions), the paper's
  two phases, in mixed_bfloat16 under XLA;
- SQuAD fine-tuning: `BertSpanExtractor.train_step` at length 384, batch 32,
  mixed_bfloat16, XLA;
- serving: `export_saved_model(..., precision="mixed_bfloat16",
  jit_compile=True)` loaded back, `serve_ids` at batch 1 (latency) and 32
  (sequences/s), length 128.

MFU = the model's FLOPs per second / the GPU's bfloat16 matmul rate measured
here (an (8192, 8192) product: what the products could reach on this card).
Training FLOPs: 6 x weights used per token x tokens + attention (12 x layers x
batch x length^2 x hidden); serving: a third of that. Synthetic ids (speed
does not depend on the values); each figure is the best of `--windows`
windows after two untimed steps (tracing, XLA compilation). The default run is
sized to give every figure within 8 minutes (3 windows of 10 steps per figure);
it has not yet run on a GPU, so that time is a target, not a measurement.

Without a GPU it says so and exits 0 (`--allow-cpu`: the same measurements on
the CPU, for a smoke test at a small `--preset`).

    python benchmarks/gpu.py [--preset base] [--windows 3] [--steps 10]

Writes benchmarks/results/gpu.{md,json} (`results_file`).
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pretraining_throughput  # noqa: E402

from keras_bert.config import BertConfig  # noqa: E402

import results_file  # noqa: E402

NO_GPU = "gpu.py: no GPU visible to TensorFlow; nothing measured (run it on a machine with one)"
PRECISION = "mixed_bfloat16"
# (length, batch, masked predictions): the paper's two pretraining phases.
PRETRAINING = ((128, 64, 20), (512, 16, 76))
SQUAD_LENGTH, SQUAD_BATCH = 384, 32
SERVING_LENGTH, SERVING_BATCHES = 128, (1, 32)


def encoder_weights_per_token(config):
    """Multiply-adds per token in the encoder's dense products."""
    hidden, inter = config.hidden_size, config.intermediate_size
    return config.num_hidden_layers * (4 * hidden * hidden + 2 * hidden * inter)


def attention_flops(config, batch, length):
    """Forward FLOPs of QK^T and PV over every layer."""
    return 4 * config.num_hidden_layers * batch * length * length * config.hidden_size


def squad_training_flops(config, batch, length):
    """A span extractor's step: forward and backward (3x), head included."""
    dense = 2 * (encoder_weights_per_token(config) + 2 * config.hidden_size) * batch * length
    return 3 * (dense + attention_flops(config, batch, length))


def serving_flops(config, batch, length):
    """A classifier's forward pass at this shape (the pooler included; the 2-class head is negligible)."""
    hidden = config.hidden_size
    dense = 2 * encoder_weights_per_token(config) * batch * length + 2 * (hidden * hidden) * batch
    return dense + attention_flops(config, batch, length)


def best_seconds(run, windows, steps):
    """Seconds per call: the best window's mean over `steps` calls, after 2 untimed."""
    for _ in range(2):
        run()
    best = float("inf")
    for _ in range(windows):
        start = time.perf_counter()
        for _ in range(steps):
            run()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def squad_step(config, batch, length):
    """One `BertSpanExtractor.train_step` on synthetic windows, under XLA."""
    import keras

    from keras_bert.models.encoder import BertEncoder
    from keras_bert.models.span_extractor import BertSpanExtractor
    from keras_bert.training.optimization import create_adamw

    keras.utils.set_random_seed(0)
    model = BertSpanExtractor(BertEncoder(config, dtype=PRECISION))
    model.compile(optimizer=create_adamw(3e-5, 10000, 100))
    rng = np.random.default_rng(0)
    features = {
        "input_ids": tf.constant(rng.integers(1, config.vocab_size, (batch, length)), tf.int32),
        "input_mask": tf.ones((batch, length), tf.int32),
        "segment_ids": tf.zeros((batch, length), tf.int32),
    }
    starts = rng.integers(1, length - 10, (batch,))
    targets = {
        "start_logits": tf.constant(starts, tf.int32),
        "end_logits": tf.constant(starts + 3, tf.int32),
    }

    @tf.function(jit_compile=True)
    def step():
        return model.train_step((features, targets))["loss"]

    return lambda: step().numpy()


def serving_calls(config, batches, length, folder):
    """{batch: a call of the exported classifier's `serve_ids`}."""
    from keras_bert import BertEncoder, BertTokenizer
    from keras_bert.assets import VOCAB_FILE
    from keras_bert.export import export_saved_model
    from keras_bert.models.classifier import BertClassifier

    model = BertClassifier(BertEncoder(config), 2)
    path = export_saved_model(
        model,
        BertTokenizer(VOCAB_FILE),
        os.path.join(folder, "classifier", "1"),
        seq_length=length,
        precision=PRECISION,
        jit_compile=True,
    )
    serve = tf.saved_model.load(path).signatures["serve_ids"]
    rng = np.random.default_rng(0)
    calls = {}
    for batch in batches:
        ids = {
            "input_ids": tf.constant(rng.integers(1, config.vocab_size, (batch, length)), tf.int32),
            "input_mask": tf.ones((batch, length), tf.int32),
            "segment_ids": tf.zeros((batch, length), tf.int32),
        }
        calls[batch] = lambda ids=ids: serve(**ids)["logits"].numpy()
    return calls


def measure(config, windows, steps, peak):
    """Rows (what, rate, unit, MFU) of every figure."""
    rows = []

    def add(what, seconds, flops, rate, unit):
        mfu = flops / seconds / 1e9 / peak
        rows.append({"what": what, "rate": rate, "unit": unit, "mfu": mfu})
        print(f"{what}: {rate:,.1f} {unit}, MFU {mfu:.1%}", flush=True)

    for length, batch, predictions in PRETRAINING:
        data = pretraining_throughput.synthetic_batch(batch, length, predictions)
        step, _ = pretraining_throughput.ours_step(config, data, True, PRECISION)
        seconds = best_seconds(step, windows, steps)
        flops = pretraining_throughput.training_flops(config, batch, length, predictions)
        add(f"pretraining, length {length}, batch {batch}", seconds, flops, 1 / seconds, "steps/s")
    seconds = best_seconds(squad_step(config, SQUAD_BATCH, SQUAD_LENGTH), windows, steps)
    flops = squad_training_flops(config, SQUAD_BATCH, SQUAD_LENGTH)
    add(
        f"SQuAD fine-tuning, length {SQUAD_LENGTH}, batch {SQUAD_BATCH}",
        seconds,
        flops,
        1 / seconds,
        "steps/s",
    )
    with tempfile.TemporaryDirectory() as folder:
        for batch, call in serving_calls(config, SERVING_BATCHES, SERVING_LENGTH, folder).items():
            seconds = best_seconds(call, windows, max(steps, 20))
            flops = serving_flops(config, batch, SERVING_LENGTH)
            if batch == 1:
                add(
                    f"serving, batch 1, length {SERVING_LENGTH}",
                    seconds,
                    flops,
                    seconds * 1e3,
                    "ms",
                )
            else:
                add(
                    f"serving, batch {batch}, length {SERVING_LENGTH}",
                    seconds,
                    flops,
                    batch / seconds,
                    "seq/s",
                )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--allow-cpu", action="store_true", help="measure on the CPU when there is no GPU"
    )
    results_file.add_arguments(parser, "gpu")
    args = parser.parse_args(argv)
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and not args.allow_cpu:
        print(NO_GPU)
        return 0
    device = (
        tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
        if gpus
        else "CPU"
    )
    config = BertConfig.preset(args.preset)
    size = 8192 if gpus else 1024
    peak = results_file.measure_matmul_peak(size, dtype="bfloat16")
    print(f"{device}: bfloat16 matmul ({size}, {size}) {peak:,.0f} GFLOP/s", flush=True)
    start = time.perf_counter()
    rows = measure(config, args.windows, args.steps, peak)
    print(f"all figures in {time.perf_counter() - start:.0f} s")
    table = "\n".join(
        [f"Device: {device}; bfloat16 matmul peak {peak:,.0f} GFLOP/s.", ""]
        + ["| measure | rate | MFU |", "|---|---|---|"]
        + [f"| {r['what']} | {r['rate']:,.1f} {r['unit']} | {r['mfu']:.1%} |" for r in rows]
    )
    print(table)
    if not args.no_results:
        results_file.write(
            args.results_name,
            f"keras_bert on one GPU ({device})",
            table=table,
            argv=argv,
            figures={
                "device": device,
                "preset": args.preset,
                "bfloat16_peak_gflops": peak,
                "rows": rows,
            },
            method=f"{PRECISION} + XLA, synthetic ids, best of {args.windows} windows of "
            f"{args.steps} steps after 2 untimed; MFU against the bfloat16 matmul peak measured here.",
            directory=args.results_dir,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
