"""Accuracy of a fine-tuned classifier's float32 and int8 exports on a dev set,
through the SavedModels' `serving_default` (strings in), as a server answers.

    keras-bert finetune ... --output-dir OUT        # e.g. recipes/finetuning/rotten_tomatoes.sh
    python benchmarks/int8_accuracy.py --model-dir OUT \
        --dev data/rotten_tomatoes/dev.tsv

Writes benchmarks/results/int8_accuracy.{md,json} (`results_file`).
"""

import argparse
import csv
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert.export import export_model_dir  # noqa: E402

import results_file  # noqa: E402


def read_tsv(path, text_column="sentence", label_column="label"):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [row[text_column] for row in rows], [row[label_column] for row in rows]


def predict(path, texts, batch=64):
    serve = tf.saved_model.load(path).signatures["serving_default"]
    labels, seconds = [], 0.0
    for start in range(0, len(texts), batch):
        chunk = tf.constant(texts[start : start + batch])
        begin = time.perf_counter()
        outputs = serve(text=chunk, text_pair=tf.constant([], tf.string))
        seconds += time.perf_counter() - begin
        labels.extend(label.decode() for label in outputs["label"].numpy())
    return labels, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="a `keras-bert finetune` output folder")
    parser.add_argument("--dev", required=True, help="TSV with `sentence` and `label` columns")
    parser.add_argument("--padding", default="longest")
    results_file.add_arguments(parser, "int8_accuracy")
    args = parser.parse_args(argv)
    texts, gold = read_tsv(args.dev)
    folder = tempfile.mkdtemp(prefix="int8_accuracy_")
    results, serving_seconds = {}, {}
    for quantize in (None, "int8"):
        name = quantize or "float32"
        path = export_model_dir(
            args.model_dir, os.path.join(folder, name, "1"), padding=args.padding, quantize=quantize
        )
        predicted, seconds = predict(path, texts)
        results[name] = float(np.mean([p == g for p, g in zip(predicted, gold)]))
        serving_seconds[name] = seconds
        print(
            f"{name:>8}: accuracy {results[name]:.4f} on {len(texts)} examples "
            f"({seconds:.1f} s in serving_default, batches of 64)"
        )
    print(f"int8 - float32: {100 * (results['int8'] - results['float32']):+.2f} points")
    if not args.no_results:
        table = "\n".join(
            ["| export | dev accuracy | seconds in serving_default |", "|---|---|---|"]
            + [
                f"| {name} | {results[name]:.4f} | {serving_seconds[name]:.1f} |"
                for name in results
            ]
        )
        results_file.write(
            args.results_name,
            "Dev accuracy of the float32 and int8 exports",
            table=table,
            argv=argv,
            figures={
                "dev": args.dev,
                "examples": len(texts),
                "padding": args.padding,
                "accuracy": results,
                "serving_seconds": serving_seconds,
            },
            method="Each export's `serving_default` (strings in) over the dev set, batches of 64.",
            directory=args.results_dir,
        )


if __name__ == "__main__":
    main()
