"""Accuracy of a fine-tuned classifier's float32, int8 and bfloat16 exports on a
dev set, through the SavedModels' `serving_default` (strings in), as a server
answers, and of its LiteRT files (float32 and dynamic-range int8, through their
signature runner). Each reduced form is held to within `MAX_GAP_POINTS` of
float32.

    keras-bert finetune ... --output-dir OUT        # e.g. recipes/finetuning/rotten_tomatoes.sh
    python benchmarks/int8_accuracy.py --model-dir OUT \
        --dev data/rotten_tomatoes/dev.tsv

or, to score the classifier `cpu_serving.py` times (hf_reference_classifier.py's
folder), `--classifier CLASSIFIER` instead of `--model-dir`.

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
from keras_bert.export.litert import export_litert_dir, litert_interpreter  # noqa: E402

import results_file  # noqa: E402

# The export forms: name -> export_model_dir's options.
FORMS = {"float32": {}, "int8": {"quantize": "int8"}, "bfloat16": {"precision": "bfloat16"}}
# The LiteRT files: name -> export_litert_dir's options.
LITERT_FORMS = {"LiteRT float32": {}, "LiteRT int8": {"quantize": "int8"}}
# A faster form may cost at most this much dev accuracy (the serving goal's bound).
MAX_GAP_POINTS = 0.5


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


def predict_litert(path, texts, batch=64):
    runner = litert_interpreter(path, num_threads=os.cpu_count()).get_signature_runner()
    labels, seconds = [], 0.0
    for start in range(0, len(texts), batch):
        chunk = np.array(texts[start : start + batch], dtype=object)
        begin = time.perf_counter()
        outputs = runner(text=chunk)
        seconds += time.perf_counter() - begin
        labels.extend(label.decode() for label in outputs["label"])
    return labels, seconds


def export_and_predict(name, model_dir, folder, texts, padding):
    """(labels, seconds) of the form `name` of `model_dir`'s classifier."""
    if name in LITERT_FORMS:
        path = export_litert_dir(
            model_dir,
            os.path.join(folder, name.replace(" ", "_") + ".tflite"),
            padding=padding,
            **LITERT_FORMS[name],
        )
        return predict_litert(path, texts)
    path = export_model_dir(
        model_dir, os.path.join(folder, name, "1"), padding=padding, **FORMS[name]
    )
    return predict(path, texts)


def finetune_folder_of(classifier, folder, seq_length=64):
    """hf_reference_classifier.py's folder -> a `keras-bert finetune` output
    folder of the same classifier under `folder` (its length, 64, by default)."""
    from cpu_serving import keras_classifier

    from keras_bert.training.finetuning import FinetuneConfig, save_finetuned
    from keras_bert.training.task_families import make_task

    model, tokenizer, labels = keras_classifier(classifier)
    config = FinetuneConfig(
        task="classify",
        seq_length=seq_length,
        lowercase=tokenizer.lowercase,
        label_names=labels,
    )
    task = make_task(config)  # its label names: config's
    model_dir = os.path.join(folder, "model_dir")
    vocab = os.path.join(classifier, "encoder", "vocab.txt")
    save_finetuned(model, config, task, vocab, model_dir)
    return model_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", help="a `keras-bert finetune` output folder")
    source.add_argument("--classifier", help="hf_reference_classifier.py's folder")
    parser.add_argument("--dev", required=True, help="TSV with `sentence` and `label` columns")
    parser.add_argument("--padding", default="longest")
    results_file.add_arguments(parser, "int8_accuracy")
    args = parser.parse_args(argv)
    texts, gold = read_tsv(args.dev)
    folder = tempfile.mkdtemp(prefix="int8_accuracy_")
    model_dir = args.model_dir or finetune_folder_of(args.classifier, folder)
    results, serving_seconds = {}, {}
    for name in [*FORMS, *LITERT_FORMS]:
        predicted, seconds = export_and_predict(name, model_dir, folder, texts, args.padding)
        results[name] = float(np.mean([p == g for p, g in zip(predicted, gold)]))
        serving_seconds[name] = seconds
        print(
            f"{name:>8}: accuracy {results[name]:.4f} on {len(texts)} examples "
            f"({seconds:.1f} s in serving_default, batches of 64)"
        )
    gaps = {name: 100 * (results[name] - results["float32"]) for name in results}
    for name in list(results)[1:]:
        print(f"{name} - float32: {gaps[name]:+.2f} points")
    if not args.no_results:
        table = "\n".join(
            [
                "| export | dev accuracy | points against float32 | within "
                f"{MAX_GAP_POINTS} | seconds in serving_default |",
                "|---|---|---|---|---|",
            ]
            + [
                f"| {name} | {results[name]:.4f} | {gaps[name]:+.2f} | "
                f"{'yes' if abs(gaps[name]) <= MAX_GAP_POINTS else 'NO'} | "
                f"{serving_seconds[name]:.1f} |"
                for name in results
            ]
        )
        results_file.write(
            args.results_name,
            "Dev accuracy of the float32, int8 and bfloat16 exports and LiteRT files",
            table=table,
            argv=argv,
            figures={
                "dev": args.dev,
                "examples": len(texts),
                "padding": args.padding,
                "accuracy": results,
                "points_against_float32": gaps,
                "serving_seconds": serving_seconds,
            },
            method="Each export's `serving_default` (strings in), each LiteRT file's signature "
            "runner, over the dev set, batches of 64.",
            directory=args.results_dir,
        )


if __name__ == "__main__":
    main()
