"""Quality guards on what the README promises a new user: the quickstart's
held-out accuracy, and its suggested next step (fine-tuning a real pretrained
encoder) reaching the reference figure of a HuggingFace run.

Both are slow (minutes on 2 CPU cores) and assert measured figures with a
margin, so a schedule or default that quietly costs accuracy fails here."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_bert.datasets.text_classification import read_text_examples

# Held-out accuracy of the quickstart (6 epochs at 5e-4), seeds 0 / 1 / 2, on a CPU
# with AVX512_BF16 (AMD EPYC, no AMX): float32 0.764 / 0.768 / 0.772, mixed_bfloat16
# 0.771 / 0.764 / 0.762. With 5 epochs: float32 0.770 / 0.765 / 0.754, mixed_bfloat16
# 0.768 / 0.765 / 0.756. At the fine-tuning rate before (1e-3; on AVX512_BF16 + AMX: float32 0.771 /
# 0.772 / 0.765) seed 0 in mixed_bfloat16 fell to 0.61 after a change in the GELU's
# last bits: the floor catches a schedule at the edge of what trains. Once the
# masked-LM head pretrained in bfloat16 too (its losses the same to 3 decimals),
# 5 epochs gave mixed_bfloat16 0.754 / 0.760 / 0.687, seed 2 still rising: the
# same encoder fine-tunes to 0.775 and 0.746 at fine-tuning seeds 0 and 1, so
# the spread was the fine-tune's, hence the sixth epoch. Six novels make the
# majority class 0.133.
QUICKSTART_FLOOR = 0.75

# One epoch of MiniLM on rotten_tomatoes with the defaults, dev accuracy at seeds
# 0 / 1 / 2: 0.837 / 0.820 / 0.799, the same to the last digit with oneDNN held to
# AVX2 (ONEDNN_MAX_CPU_ISA=AVX2, as on an AVX2-only CI machine) and on AVX512_BF16 +
# AMX; an unseeded CI run drew 0.804. The constant learning rate of one epoch leaves
# a spread of four points over seeds, so the test fixes its seed and its floor is
# the lowest seed's, rounded down.
ROTTEN_TOMATOES_SEED = 0
ROTTEN_TOMATOES_FLOOR = 0.79


def run_quickstart(output, *options):
    """The quickstart as the README runs it: the installed command, in its own
    process; its results file."""
    command = os.path.join(os.path.dirname(sys.executable), "keras-bert")
    started = time.monotonic()
    result = subprocess.run(
        [command, "quickstart", "--output", str(output), *options], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(output / "quickstart_results.json") as f:
        results = json.load(f)
    print(
        f"quickstart {' '.join(options)}: dev accuracy {results['dev_accuracy']:.3f} "
        f"({results['mixed_precision']}), majority class {results['majority_baseline']:.3f}, "
        f"{time.monotonic() - started:.0f} s"
    )
    return results


@pytest.mark.slow
@pytest.mark.proof
def test_quickstart_beats_the_majority_class_on_held_out_chapters(tmp_path):
    results = run_quickstart(tmp_path / "qs")
    # The default is float32 on every machine, whatever bfloat16 the CPU has.
    assert results["mixed_precision"] == "float32"
    assert results["dev_accuracy"] >= QUICKSTART_FLOOR
    assert results["dev_accuracy"] > results["majority_baseline"] + 0.4


@pytest.mark.slow
@pytest.mark.proof
def test_the_quickstart_in_bfloat16_reaches_the_float32_level(tmp_path):
    results = run_quickstart(tmp_path / "qs", "--mixed-precision", "mixed_bfloat16")
    assert results["mixed_precision"] == "mixed_bfloat16"
    assert results["dev_accuracy"] >= QUICKSTART_FLOOR


@pytest.mark.slow
@pytest.mark.proof
def test_real_encoder_fine_tunes_to_the_reference_accuracy(minilm_path, datasets_dir):
    import keras

    from keras_bert.models.classifier import BertClassifier

    keras.utils.set_random_seed(ROTTEN_TOMATOES_SEED)

    train = read_text_examples(os.path.join(datasets_dir, "rotten_tomatoes", "train.tsv"))
    dev = read_text_examples(os.path.join(datasets_dir, "rotten_tomatoes", "dev.tsv"))
    # A user's natural choices, as in the HuggingFace reference (length 64,
    # batch 32); everything else is the library's default (compile's
    # optimizer, the head's dropout and initialiser).
    model = BertClassifier.from_pretrained(
        minilm_path, seq_length=64, num_classes=2, label_names=["rotten", "fresh"]
    )
    model.compile()
    started = time.monotonic()
    model.fit(train.texts_a, train.labels, epochs=1, batch_size=32, verbose=2)
    fit_seconds = time.monotonic() - started
    metrics = model.evaluate(dev.texts_a, dev.labels, batch_size=64, return_dict=True, verbose=0)
    predicted = model.predict_labels(dev.texts_a, batch_size=64)
    by_labels = float(np.mean(np.array(predicted) == np.array(dev.labels)))
    print(
        f"MiniLM on rotten_tomatoes, 1 epoch: dev accuracy {metrics['accuracy']:.4f} "
        f"(predict_labels {by_labels:.4f}), fit {fit_seconds:.0f} s"
    )
    # HuggingFace's Trainer reaches ~0.83 after 2 epochs (lr 5e-5, linear
    # decay); one epoch of the defaults comes within its seed spread of that.
    assert metrics["accuracy"] >= ROTTEN_TOMATOES_FLOOR
    assert by_labels == pytest.approx(metrics["accuracy"], abs=2 / len(dev.labels))
