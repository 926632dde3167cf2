"""A BertSentenceEncoder's SavedModel: strings in, the model's embeddings and
cosine similarities out, served in a fresh process where keras and keras_bert
cannot be imported (tensorflow-text's op libraries loaded alone, as TensorFlow
Serving links them)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert import BertEncoder, BertPreprocessor, BertSentenceEncoder
from keras_bert.assets import VOCAB_FILE
from keras_bert.export import export_saved_model
from keras_bert.export.serving_ops import SERVING_TEXT_OPS
from keras_bert.features import ENCODER_INPUTS

from harness import tiny_config

TEXTS = [
    "Emma Woodhouse, handsome, clever, and rich.",
    "naïve café — 東京",
    "",
    "Dollar drops on reserves concerns",
]
OTHERS = ["a rich and clever woman", "the dollar fell"]
CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_portability_check.py")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    keras.utils.set_random_seed(0)
    model = BertSentenceEncoder(
        BertEncoder(tiny_config(vocab_size=30522)),
        pooling=["mean", "cls"],
        normalize=True,
        dense=[{"units": 12, "activation": "tanh"}],
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24),
    )
    path = str(tmp_path_factory.mktemp("sentence_encoder") / "model" / "1")
    export_saved_model(model, path)
    return model, path


@pytest.mark.slow
def test_the_export_serves_embeddings_and_similarities_without_keras(exported, tmp_path):
    model, path = exported
    features = model.preprocessor(TEXTS)
    request = {
        "allowed_ops": sorted(SERVING_TEXT_OPS),
        "models": {
            "sentence_encoder": {
                "path": path,
                "inputs": {
                    "serving_default": {"text": TEXTS},
                    "similarity": {"text_a": TEXTS, "text_b": OTHERS},
                    "serve_ids": {
                        name: np.asarray(features[name]).tolist() for name in ENCODER_INPUTS
                    },
                },
            }
        },
    }
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(request))
    run = subprocess.run(
        [sys.executable, CHECK, str(request_file)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=os.path.dirname(CHECK),
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["_process"]["loaded_blocked_modules"] == []
    served = report["sentence_encoder"]
    assert served["not_allowed"] == []
    signatures = served["signatures"]
    expected = model.predict(TEXTS, verbose=0)
    for name in ("serving_default", "serve_ids"):
        np.testing.assert_allclose(signatures[name]["outputs"]["embedding"], expected, atol=1e-5)
        np.testing.assert_allclose(
            signatures[name]["outputs_in_order"]["embedding"], expected, atol=1e-5
        )
    np.testing.assert_allclose(
        signatures["similarity"]["outputs"]["similarity"],
        model.similarity(TEXTS, OTHERS),
        atol=1e-5,
    )


@pytest.mark.slow
def test_a_litert_embedding_model_takes_strings_and_gives_predicts_embeddings(exported, tmp_path):
    # The pooling, Dense layer and normalisation go inside with the tokenizer;
    # plain ASCII texts (LiteRT's tokenizer differs only on compatibility characters).
    from keras_bert.export.litert import export_litert, litert_interpreter, run_litert

    model, _ = exported
    texts = [TEXTS[0], TEXTS[3], *OTHERS]
    expected = model.predict(texts, verbose=0)
    for padding in ("max_length", "longest"):
        path = export_litert(model, tmp_path / f"{padding}.tflite", padding=padding)
        served = run_litert(litert_interpreter(path), texts)["embedding"]
        np.testing.assert_allclose(served, expected, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(served, axis=-1), 1.0, atol=1e-5)
