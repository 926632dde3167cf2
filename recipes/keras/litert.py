"""A fine-tuned classifier as LiteRT files taking strings: accuracy, size and latency.

    python recipes/keras/litert.py --model text_classifier.keras [--threads 1]

`--model`: a `.keras` BertClassifier with its preprocessor (what
text_classification.py or lora.py --output-dir saves). Writes the float32 and
the dynamic-range int8 `.tflite` files and prints, for each and for the Keras
model itself: rotten_tomatoes dev accuracy, file size, and the median latency
of one review per call (batch 1) on the first `--latency-examples` dev reviews.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from text_classification import read_reviews  # noqa: E402

import keras_bert.models  # noqa: E402, F401 (registers the classes load_model looks up)
from keras_bert.export.litert import export_litert, litert_interpreter, run_litert  # noqa: E402

from common import DATA, print_table  # noqa: E402


def median_ms(call, texts):
    call(texts[:1])  # the first call allocates
    seconds = []
    for text in texts:
        start = time.perf_counter()
        call([text])
        seconds.append(time.perf_counter() - start)
    return round(1000 * float(np.median(seconds)), 2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a .keras BertClassifier taking text")
    parser.add_argument("--dev", default=os.path.join(DATA, "rotten_tomatoes", "dev.tsv"))
    parser.add_argument("--max-dev-examples", type=int, default=None)
    parser.add_argument("--latency-examples", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="LiteRT interpreter threads")
    parser.add_argument("--output-dir", default="litert")
    args = parser.parse_args(argv)

    texts, labels = read_reviews(args.dev, args.max_dev_examples)
    model = keras.models.load_model(args.model, compile=False)
    names = np.array(model.answer_names())
    latency_texts = texts[: args.latency_examples]

    def keras_labels(batch):
        return names[np.argmax(model.predict(batch, batch_size=64), axis=-1)]

    rows = [
        {
            "model": "Keras (float32)",
            "accuracy": float(np.mean(keras_labels(texts) == labels)),
            "latency_ms": median_ms(lambda b: model.classify(b), latency_texts),
        }
    ]
    for quantize in (None, "int8"):
        path = export_litert(
            model,
            os.path.join(args.output_dir, f"{quantize or 'float32'}.tflite"),
            quantize=quantize,
            overwrite=True,
        )
        interpreter = litert_interpreter(path, num_threads=args.threads)
        predicted = np.concatenate(
            [run_litert(interpreter, texts[i : i + 64])["label"] for i in range(0, len(texts), 64)]
        )
        rows.append(
            {
                "model": f"LiteRT {quantize or 'float32'}",
                "accuracy": float(np.mean(predicted.astype(str) == np.array(labels))),
                "file_mb": round(os.path.getsize(path) / 2**20, 1),
                "latency_ms": median_ms(lambda b: run_litert(interpreter, b), latency_texts),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    print_table(
        ["model", f"dev accuracy ({len(texts)})", "file MB", "median ms per review (batch 1)"],
        [
            [row["model"], f"{row['accuracy']:.4f}", row.get("file_mb", ""), row["latency_ms"]]
            for row in rows
        ],
    )


if __name__ == "__main__":
    main()
