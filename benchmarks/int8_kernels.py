"""int8 products as TensorFlow runs them, against float32 and bfloat16.

`export_saved_model(quantize="int8")` stores the Dense kernels as int8 with
per-column scales (Keras' `Model.quantize`). On the TensorFlow backend Keras'
int8 Dense casts its input to int8 and multiplies with `BatchMatMulV3(int8,
int8) -> int32` (this script prints the op types of a traced layer); the
encoder's exported layers run `keras_bert.kernels.int8_dense.int8_project`
instead (oneDNN's u8 x s8 `QuantizedMatMulWithBiasAndDequantize`, the
activations quantized per call). Both are timed beside float32 and bfloat16
`MatMul` at a BERT-base feed-forward shape (`--tokens` x 768 @ 768 x 3072, each
at its own dtype), best of `--windows` alternating windows; the flags printed
say whether the CPU has int8 dot products (VNNI / AMX) and bfloat16 ones. Run
with ONEDNN_VERBOSE=1 to see which oneDNN kernel each product takes (on a
Sapphire Rapids core: `brgemm:avx10_1_512_amx` for keras_bert's int8 and
`brg_matmul:avx10_1_512_amx` for bfloat16; Keras' int8 is not a oneDNN primitive).

    PYTHONPATH=. .venv/bin/python benchmarks/int8_kernels.py [--tokens 4096] [--windows 5]

Writes benchmarks/results/int8_kernels.{md,json} (`results_file`).
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# oneDNN on: keras_bert's int8 kernel runs only with it, and TensorFlow turns it
# on by itself only on CPUs with VNNI, BF16 or AMX (on AVX2 the kernel runs too).
from keras_bert.cli.startup import use_fast_cpu_training_settings  # noqa: E402

use_fast_cpu_training_settings()

import results_file  # noqa: E402

HIDDEN, INTERMEDIATE = 768, 3072


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096, help="rows of the product")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5, help="products timed per window")
    results_file.add_arguments(parser, "int8_kernels")
    return parser.parse_args(argv)


def quantized_dense_ops():
    """[(op type, input dtypes, output dtypes)] of a Keras int8 Dense's call."""
    import keras
    import tensorflow as tf

    layer = keras.layers.Dense(16)
    layer.build((None, 16))
    layer.quantize("int8")
    x = tf.zeros((2, 16))
    graph = tf.function(layer).get_concrete_function(x).graph
    return [
        (op.type, [t.dtype.name for t in op.inputs], [t.dtype.name for t in op.outputs])
        for op in graph.get_operations()
        if op.type in ("Cast", "MatMul", "BatchMatMulV2", "BatchMatMulV3")
    ]


def products(tokens):
    """{side: (function, arguments)}: one product per dtype, as the layers run it."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.standard_normal((tokens, HIDDEN)).astype("float32")
    w = rng.standard_normal((HIDDEN, INTERMEDIATE)).astype("float32")
    xi = tf.constant(rng.integers(-127, 128, x.shape).astype("int8"))
    wi = tf.constant(rng.integers(-127, 128, w.shape).astype("int8"))
    from keras_bert.kernels.int8_dense import column_sums, int8_kernel_available, int8_project

    scale = tf.ones((INTERMEDIATE,))
    sides = {
        "float32": (tf.function(tf.linalg.matmul), (tf.constant(x), tf.constant(w))),
        "bfloat16": (
            tf.function(tf.linalg.matmul),
            (tf.constant(x, tf.bfloat16), tf.constant(w, tf.bfloat16)),
        ),
        "keras int8": (
            tf.function(lambda a, b: tf.linalg.matmul(a, b, output_type=tf.int32)),
            (xi, wi),
        ),
    }
    if int8_kernel_available():  # x86 Linux builds of TensorFlow
        sides["keras_bert int8 (oneDNN)"] = (
            tf.function(lambda a, q: int8_project(a, q, scale, tf.constant(column_sums(wi)))),
            (tf.constant(x), wi),
        )
    return sides


def best_rates(sides, tokens, windows, repeats):
    """{side: best GOP/s over the windows}, the sides alternating within each window."""
    operations = 2 * tokens * HIDDEN * INTERMEDIATE
    best = {}
    for function, arguments in sides.values():
        function(*arguments).numpy()  # traced and warm before any window
    for _ in range(windows):
        for side, (function, arguments) in sides.items():
            started = time.perf_counter()
            for _ in range(repeats):
                result = function(*arguments)
            result.numpy()
            rate = operations * repeats / (time.perf_counter() - started) / 1e9
            best[side] = max(best.get(side, 0.0), rate)
    return best


def main(argv=None):
    args = parse_args(argv)
    ops = quantized_dense_ops()
    print("Keras int8 Dense on TensorFlow runs:")
    for op_type, inputs, outputs in ops:
        print(f"  {op_type} {inputs} -> {outputs}")
    machine = results_file.cpu()
    print(f"CPU: {machine['model']}; {results_file.flags_text(machine['flags'])}")
    if not any(flag in machine["flags"] for flag in results_file.INT8_DOT_PRODUCT_FLAGS):
        print(
            "This CPU has no int8 dot-product instructions (VNNI / AMX): its int8 products "
            "sum u8 x s8 pairs in int16 (AVX2), not at a VNNI CPU's pace."
        )
    rates = best_rates(products(args.tokens), args.tokens, args.windows, args.repeats)
    shape = f"{args.tokens} x {HIDDEN} @ {HIDDEN} x {INTERMEDIATE}"
    table = "| product | GOP/s (best window) | vs float32 |\n|---|---|---|\n" + "".join(
        f"| {side} | {rate:.1f} | {rate / rates['float32']:.2f}x |\n"
        for side, rate in rates.items()
    )
    print(f"Products of {shape}:")
    print(table)
    for side in rates:
        if "int8" in side:
            print(f"{side} / float32: {rates[side] / rates['float32']:.2f}x")
    if not args.no_results:
        results_file.write(
            args.results_name,
            "int8 products (Keras' and keras_bert's) against float32 and bfloat16",
            table=table,
            figures={"ops_of_a_keras_int8_dense": ops, "gops": rates, "shape": shape},
            method=(
                f"{args.repeats} products per side and window, sides alternating, "
                f"best of {args.windows} windows"
            ),
            headlines=[
                results_file.headline(
                    "int8_product",
                    "int8 product vs float32, BERT-base feed-forward shape",
                    "GOP/s",
                    {side: rate for side, rate in rates.items() if side != "bfloat16"},
                )
            ],
            directory=args.results_dir,
        )


if __name__ == "__main__":
    main()
