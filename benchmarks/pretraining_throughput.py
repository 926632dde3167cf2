"""Pretraining throughput: our BertPretrainer against keras-hub's BertMaskedLM
and Model Garden's BertPretrainerV2 (tf_keras), in one run.

Each model is trained on the same synthetic batches (random ids over a 30522
vocabulary; length 128, batch 32, 20 masked positions per sequence): one
training step = forward + masked-LM loss + backward + AdamW update, in a
`tf.function`. Every model is tried with XLA on and off (and in
mixed_bfloat16 too where the CPU has bfloat16 arithmetic, AVX512-BF16 or AMX)
and is reported at its fastest setting. Ours also trains its next-sentence
head and tracks two accuracies (the peers here train the masked LM alone), so
the comparison is conservative for ours. Ours runs its last Transformer block
only at [CLS] and the masked positions, the only rows its losses read (same
outputs and gradients, tests/models/test_pretrainer.py); the peers run it over every
position.

All models share this process, hence TensorFlow's CPU settings: those of the
`keras-bert` training commands, oneDNN kernels and the pooling host allocator,
the fastest for every model here (unless the environment sets them: export
TF_ENABLE_ONEDNN_OPTS=0 or TF_CPU_ALLOCATOR_USE_BFC=false to compare).

Timing excludes tracing and XLA compilation (two warm-up steps per setting).
Other processes may share the CPUs, so the settings take turns: each timing
window runs `--repeats` steps of every setting (and the peak-FLOP/s matmul)
one after the other, in a rotated order, and each figure is the best of its
`--windows` windows; `uptime`'s load is printed next to them. Step times
here drift by 10-20 % from minute to minute, so the ratio against the faster
peer is also given window by window (each window's own ratio of the two
best settings: median and range), which that drift affects less. One step is
about a second here, so a step per Python call costs nothing measurable
(`steps_per_execution` matters for much smaller steps).

Model FLOP utilisation (MFU) = achieved training FLOP/s / peak FLOP/s, with
training FLOPs = 6 * (matmul weights used per token) * tokens + attention
(QK^T and PV: 12 * layers * batch * length^2 * hidden), the masked-LM head
counted over the masked positions only (all three models compute it there).
The same count is used for all three models, so ours, which skips most of its
last block at the unmasked positions, reads a higher MFU than the arithmetic
it actually does. Peak FLOP/s is the best window of a 2048^3 float32 matmul
in TensorFlow, measured in the same rotation.

    pip install -e .[bench]
    python benchmarks/pretraining_throughput.py [--presets mini,small] [--windows 5]

Writes benchmarks/results/pretraining_throughput.{md,json} (`results_file`).
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The training commands' CPU settings (oneDNN, pooling host allocator; see
# keras_bert.cli.startup), for every model: they share this process.
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert.config import BertConfig  # noqa: E402

import results_file  # noqa: E402

VOCAB_SIZE = 30522


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_has_bfloat16():
    """AVX512-BF16 or AMX: bfloat16 matmuls faster than float32 ones."""
    from keras_bert.kernels.precision import CPU_BFLOAT16_FLAGS, read_cpu_flags

    return any(flag in read_cpu_flags() for flag in CPU_BFLOAT16_FLAGS)


def matmul_step(size=2048):
    """One float32 (size x size) matmul: its FLOPs and a call that runs it."""
    a = tf.random.normal((size, size))
    b = tf.random.normal((size, size))
    matmul = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    return 2 * size**3, lambda: matmul().numpy()


def time_in_turns(runs, windows, repeats, warmup=2):
    """Seconds per call of each run in every window: `repeats` calls per
    window, the runs taking turns within every window (in a rotated order)
    so that load from other processes falls on all of them alike."""
    names = list(runs)
    for name in names:
        for _ in range(warmup):  # tracing and (with XLA) compilation
            runs[name]()
    per_window = {name: [] for name in names}
    for window in range(windows):
        shift = window % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            for _ in range(repeats):
                runs[name]()
            per_window[name].append((time.perf_counter() - start) / repeats)
    return per_window


def training_flops(config, batch, length, predictions):
    """Training FLOPs of one step (see the module docstring)."""
    hidden, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    encoder_weights = layers * (4 * hidden * hidden + 2 * hidden * inter)
    head_weights = hidden * hidden + hidden * config.vocab_size  # transform + tied output
    pooler_weights = hidden * hidden + 2 * hidden
    matmuls = 6 * (
        encoder_weights * batch * length
        + head_weights * batch * predictions
        + pooler_weights * batch
    )
    attention = 12 * layers * batch * length * length * hidden
    return matmuls + attention


def synthetic_batch(batch, length, predictions, seed=0):
    rng = np.random.default_rng(seed)
    positions = np.sort(
        np.stack(
            [rng.choice(np.arange(1, length), predictions, replace=False) for _ in range(batch)]
        ),
        axis=1,
    )
    return {
        "input_ids": rng.integers(1, VOCAB_SIZE, (batch, length)).astype("int32"),
        "input_mask": np.ones((batch, length), "int32"),
        "segment_ids": np.concatenate(
            [
                np.zeros((batch, length // 2), "int32"),
                np.ones((batch, length - length // 2), "int32"),
            ],
            1,
        ),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(1, VOCAB_SIZE, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


def weighted_mlm_loss(logits, ids, weights):
    per_prediction = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=ids, logits=logits
    )  # (B, P)
    return tf.reduce_sum(per_prediction * weights) / tf.maximum(tf.reduce_sum(weights), 1e-5)


def ours_step(config, batch, jit_compile, precision="float32"):
    import keras

    from keras_bert.models.encoder import BertEncoder
    from keras_bert.models.pretrainer import BertPretrainer
    from keras_bert.training.optimization import create_adamw

    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(config, dtype=None if precision == "float32" else precision))
    model.compile(optimizer=create_adamw(1e-4, 10000, 100))  # as `keras-bert pretrain`
    data = {k: tf.constant(v) for k, v in batch.items()}

    @tf.function(jit_compile=jit_compile)
    def step():  # what `fit` runs: loss, gradients, update, metrics
        return model.train_step(data)["loss"]

    return lambda: step().numpy(), model.count_params()


def keras_hub_step(config, batch, jit_compile, precision="float32"):
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        dtype=precision,
    )
    model = keras_hub.models.BertMaskedLM(backbone)
    optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6)
    data = {
        "token_ids": tf.constant(batch["input_ids"]),
        "segment_ids": tf.constant(batch["segment_ids"]),
        "padding_mask": tf.constant(batch["input_mask"].astype(bool)),
        "mask_positions": tf.constant(batch["masked_lm_positions"]),
    }
    ids, weights = tf.constant(batch["masked_lm_ids"]), tf.constant(batch["masked_lm_weights"])

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            loss = weighted_mlm_loss(tf.cast(model(data, training=True), "float32"), ids, weights)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return lambda: step().numpy(), model.count_params()


def model_garden_step(config, batch, jit_compile, precision="float32"):
    import tf_keras
    from official.nlp.modeling import models, networks

    tf_keras.utils.set_random_seed(0)
    # tf_keras layers take the global policy when they are built.
    tf_keras.mixed_precision.set_global_policy(precision)
    encoder = networks.BertEncoderV2(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        inner_dim=config.intermediate_size,
        inner_activation="gelu",
        output_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
    )
    model = models.BertPretrainerV2(encoder_network=encoder, mlm_activation="gelu")
    optimizer = tf_keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6)
    data = {
        "input_word_ids": tf.constant(batch["input_ids"]),
        "input_mask": tf.constant(batch["input_mask"]),
        "input_type_ids": tf.constant(batch["segment_ids"]),
        "masked_lm_positions": tf.constant(batch["masked_lm_positions"]),
    }
    ids, weights = tf.constant(batch["masked_lm_ids"]), tf.constant(batch["masked_lm_weights"])
    model(data)  # builds the variables outside the tf.function
    tf_keras.mixed_precision.set_global_policy("float32")

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            logits = model(data, training=True)["mlm_logits"]
            loss = weighted_mlm_loss(tf.cast(logits, "float32"), ids, weights)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return lambda: step().numpy(), model.count_params()


MODELS = {"ours": ours_step, "keras-hub": keras_hub_step, "model-garden": model_garden_step}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="mini,small")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--xla", default="on,off", help="XLA settings to try per model")
    parser.add_argument(
        "--precisions",
        default="auto",
        help="float32 and/or mixed_bfloat16; auto: float32, plus "
        "mixed_bfloat16 where the CPU has AVX512-BF16 or AMX",
    )
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-predictions", type=int, default=20)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="steps per timing window")
    parser.add_argument(
        "--inter-op-threads",
        type=int,
        default=0,
        help="TensorFlow inter-op threads (0: TensorFlow's default)",
    )
    results_file.add_arguments(parser, "pretraining_throughput")
    args = parser.parse_args(argv)
    if args.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    xla_settings = [s == "on" for s in args.xla.split(",")]
    precisions = (
        ["float32"] + (["mixed_bfloat16"] if cpu_has_bfloat16() else [])
        if args.precisions == "auto"
        else args.precisions.split(",")
    )
    print(
        f"{os.cpu_count()} CPUs, bfloat16 arithmetic: {'yes' if cpu_has_bfloat16() else 'no'}; "
        # Unset where TensorFlow was imported before this module (a test's process).
        f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}, "
        f"TF_CPU_ALLOCATOR_USE_BFC={os.environ.get('TF_CPU_ALLOCATOR_USE_BFC', 'unset')}; "
        f"precisions {precisions}; TensorFlow threads intra-op "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}, inter-op "
        f"{tf.config.threading.get_inter_op_parallelism_threads() or 'default'}"
    )

    batch = synthetic_batch(args.batch_size, args.seq_length, args.max_predictions)
    measured = {}
    for preset in args.presets.split(","):
        config = BertConfig.preset(preset, vocab_size=VOCAB_SIZE)
        flops = training_flops(config, args.batch_size, args.seq_length, args.max_predictions)
        print(
            f"\n{preset}: L{config.num_hidden_layers}/H{config.hidden_size}, length "
            f"{args.seq_length}, batch {args.batch_size}, {args.max_predictions} predictions, "
            f"{flops / 1e9:.1f} GFLOP per training step  (load {load_average()})",
            flush=True,
        )
        runs = {}
        matmul_flops, runs["peak"] = matmul_step()
        params = {}
        for name in args.models.split(","):
            for precision in precisions:
                for xla in xla_settings:
                    key = (name, precision, xla)
                    runs[key], params[name] = MODELS[name](config, batch, xla, precision)
        per_window = time_in_turns(runs, args.windows, args.repeats)
        seconds = {key: min(times) for key, times in per_window.items()}  # best window
        peak = matmul_flops / seconds.pop("peak")
        print(f"  peak float32 matmul: {peak / 1e9:.1f} GFLOP/s")
        measured[preset] = {"peak_gflops": peak / 1e9, "load": load_average(), "best": {}}
        best = {}
        for (name, precision, xla), step_seconds in seconds.items():
            rate = args.batch_size / step_seconds
            print(
                f"  {name:13s} {precision:14s} XLA {'on ' if xla else 'off'} "
                f"{params[name]:>11,d} weights  {rate:7.2f} seq/s  "
                f"MFU {flops / step_seconds / peak:6.1%}"
            )
            if rate > best.get(name, (0,))[0]:
                best[name] = (rate, precision, xla, flops / step_seconds / peak)
        for name, (rate, precision, xla, mfu) in best.items():
            print(
                f"  best {name:13s} {rate:7.2f} seq/s  MFU {mfu:6.1%}  "
                f"({precision}, XLA {'on' if xla else 'off'})"
            )
            measured[preset]["best"][name] = {
                "seq_per_second": rate,
                "mfu": mfu,
                "precision": precision,
                "xla": xla,
            }
        if "ours" in best:
            for name, (rate, *_) in best.items():
                if name != "ours":
                    print(f"  ours / {name}: {best['ours'][0] / rate:.2f}x")
            peers = {name: rate for name, (rate, *_) in best.items() if name != "ours"}
            if peers:
                print(f"  ours / faster peer: {best['ours'][0] / max(peers.values()):.2f}x")
                # Windows ran every setting back to back: the same window's
                # ratio cancels the load that moves between windows. Against
                # every peer (the goals name keras-hub), the faster one first.
                ours_times = per_window[("ours", *best["ours"][1:3])]
                by_peer = {}
                for peer in sorted(peers, key=peers.get, reverse=True):
                    peer_times = per_window[(peer, *best[peer][1:3])]
                    ratios = sorted(p / o for o, p in zip(ours_times, peer_times))
                    print(
                        f"  ours / {peer}, window by window: median "
                        f"{statistics.median(ratios):.2f}x, range {ratios[0]:.2f}-{ratios[-1]:.2f}x"
                    )
                    by_peer[peer] = ratios
                measured[preset]["window_ratios"] = by_peer[max(peers, key=peers.get)]
                measured[preset]["window_ratios_by_peer"] = by_peer
        print(f"  (load {load_average()})", flush=True)
        del runs
    if not args.no_results:
        write_results(args, argv, measured)


# The results files' names of the sides (MODELS' keys here).
SIDES = {"ours": "keras_bert", "keras-hub": "keras-hub", "model-garden": "Model Garden"}


def _spread(ratios):
    """Sorted window ratios -> "median (lowest-highest)", or "" without them."""
    if not ratios:
        return ""
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}x)"


def write_results(args, argv, measured):
    lines = [
        "| size | side | seq/s | MFU | precision, XLA | ours / faster peer, "
        "per window (median, range) | ours / this peer, per window (median, range) |",
        "|---|---|---|---|---|---|---|",
    ]
    for preset, run in measured.items():
        by_peer = run.get("window_ratios_by_peer", {})
        for name, best in run["best"].items():
            faster = run.get("window_ratios") if name == "ours" else None
            lines.append(
                f"| {preset} | {SIDES[name]} | {best['seq_per_second']:.2f} | "
                f"{best['mfu']:.1%} | {best['precision']}, XLA "
                f"{'on' if best['xla'] else 'off'} | {_spread(faster)} | "
                f"{_spread(by_peer.get(name))} |"
            )
    results_file.write(
        args.results_name,
        "Pretraining step throughput",
        table="\n".join(lines),
        argv=argv,
        figures={
            "seq_length": args.seq_length,
            "batch_size": args.batch_size,
            "max_predictions": args.max_predictions,
            "windows": args.windows,
            "repeats": args.repeats,
            "presets": measured,
        },
        method=f"Synthetic batches of {args.batch_size} x {args.seq_length} tokens, "
        f"{args.max_predictions} predictions, AdamW; every model with XLA on and off "
        "(and mixed_bfloat16 where the CPU has bfloat16 arithmetic), the settings in "
        f"turns in every window, best of {args.windows} windows of {args.repeats} steps; "
        "MFU against the float32 matmul peak of the same windows.",
        headlines=[
            results_file.headline(
                f"{preset}_seq_per_second",
                f"pretraining step, BERT-{preset}",
                "seq/s",
                {SIDES[name]: best["seq_per_second"] for name, best in run["best"].items()},
                decimals=2,
            )
            for preset, run in measured.items()
        ],
        matmul_peak_gflops=max(run["peak_gflops"] for run in measured.values()),
        directory=args.results_dir,
    )


if __name__ == "__main__":
    main()
