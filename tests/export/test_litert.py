"""LiteRT classifiers taking strings: the tokenizer inside gives the original
FullTokenizer's ids on real text (its one difference named and bounded), and the
answers equal the SavedModel's on real sentences."""

import csv
import gc
import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import CLASS_NAMES, call, keras_model
from official.nlp.tools import tokenization

import keras_bert
from keras_bert import cli
from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets.tagging import read_conll
from keras_bert.export import litert
from keras_bert.export.litert import (
    convert,
    custom_ops,
    export_litert,
    litert_interpreter,
    litert_metadata,
    litert_tokenizer,
    run_litert,
)
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer

from harness import run_command

SEQ_LENGTH = 32  # the SavedModel classifier's (export_helpers)


def _tsv_column(path, column):
    with open(path, encoding="utf-8", newline="") as f:
        return [row[column] for row in csv.DictReader(f, delimiter="\t")]


@pytest.fixture(scope="module")
def real_texts(datasets_dir):
    """Every dev text of data/: reviews, tweets, news articles."""
    return (
        _tsv_column(os.path.join(datasets_dir, "rotten_tomatoes", "dev.tsv"), "sentence")
        + [
            " ".join(words)
            for words in read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll")).words
        ]
        + _tsv_column(os.path.join(datasets_dir, "bbc_news", "dev.tsv"), "text")
    )


def _has_compatibility_character(text):
    """Characters NFKD decomposes further than NFD ("…", "½", U+2011, ...)."""
    return any(unicodedata.normalize("NFKD", c) != unicodedata.normalize("NFD", c) for c in text)


def _litert_word_pieces(tokenizer, texts, tmp_path):
    """The ids the LiteRT tokenizer gives `texts`, run in the LiteRT interpreter."""
    fast = litert_tokenizer(tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def pieces(text):
        ids = fast.tokenize(text)
        return {"ids": ids.to_tensor(), "lengths": ids.row_lengths()}

    path = tmp_path / "tokenizer.tflite"
    path.write_bytes(convert(pieces.get_concrete_function()))
    interpreter = litert_interpreter(path)
    rows = []
    for start in range(0, len(texts), 256):
        out = run_litert(interpreter, texts[start : start + 256])
        rows += [list(row[:n]) for row, n in zip(out["ids"], out["lengths"])]
    return rows


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_litert_tokenizer_gives_the_original_ids_on_real_text(lowercase, real_texts, tmp_path):
    reference = tokenization.FullTokenizer(VOCAB_FILE, do_lower_case=lowercase)
    got = _litert_word_pieces(BertTokenizer(VOCAB_FILE, lowercase=lowercase), real_texts, tmp_path)
    differ = [
        text
        for text, ids in zip(real_texts, got)
        if ids != reference.convert_tokens_to_ids(reference.tokenize(text))
    ]
    if not lowercase:
        assert differ == []
        return
    # Uncased, FastBertNormalizer decomposes compatibility characters (NFKD),
    # the original only canonically (NFD): those texts, and only those, may differ.
    assert all(_has_compatibility_character(text) for text in differ)
    assert (
        len(differ) <= sum(map(_has_compatibility_character, real_texts)) < 0.01 * len(real_texts)
    )
    assert len(real_texts) > 1700  # 1,280 reviews, the tweets, 222 articles


def _classifier_with_preprocessor():
    """export_helpers' SavedModel classifier (same weights), taking text."""
    model = keras_model("classifier")
    copy = BertClassifier.from_config(
        {
            **model.get_config(),
            "preprocessor": BertPreprocessor(VOCAB_FILE, lowercase=True, seq_length=SEQ_LENGTH),
        }
    )
    copy.set_weights(model.get_weights())
    return copy


def _convert_after_a_collection(function, quantize=None):
    gc.collect()
    return convert(function, quantize)


@pytest.fixture(scope="module")
def litert_files(tmp_path_factory):
    """The files the tests below read, each frozen after a garbage collection:
    the file is traced on a copy of the model (plain ops) whose variables the
    traced function holds weakly, and a collection between tracing and
    freezing once deleted them mid-export in the full suite."""
    folder = tmp_path_factory.mktemp("litert")
    model = _classifier_with_preprocessor()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(litert, "convert", _convert_after_a_collection)
        files = {
            quantize: export_litert(model, folder / f"{quantize}.tflite", quantize=quantize)
            for quantize in (None, "int8")
        }
        files["longest"] = export_litert(model, folder / "longest.tflite", padding="longest")
    return files


def test_litert_answers_equal_the_saved_model_on_real_sentences(litert_files, real_texts):
    reviews = [t for t in real_texts[:1280] if not _has_compatibility_character(t)]
    assert len(reviews) > 1250
    served = call("classifier", text=reviews, text_pair=[])
    answers = run_litert(litert_interpreter(litert_files[None]), reviews)
    np.testing.assert_allclose(answers["probabilities"], served["probabilities"], atol=1e-4)
    np.testing.assert_allclose(answers["logits"], served["logits"], atol=1e-4)
    np.testing.assert_array_equal(answers["label"], served["label"])
    assert set(answers["label"]) <= {name.encode() for name in CLASS_NAMES}

    # Padded to each request's longest text: the same answers, one interpreter
    # resized from request to request (batches of other lengths, one text alone).
    longest = litert_interpreter(litert_files["longest"])
    for batch in (reviews[:64], reviews[64:65], reviews[65:97]):
        shorter = run_litert(longest, batch)
        expected = call("classifier", text=batch, text_pair=[])
        np.testing.assert_allclose(shorter["logits"], expected["logits"], atol=1e-4)
        np.testing.assert_array_equal(shorter["label"], expected["label"])

    quantized = run_litert(litert_interpreter(litert_files["int8"]), reviews)
    assert litert_metadata(litert_files["int8"])["precision"] == "int8_dynamic_range"
    assert os.path.getsize(litert_files["int8"]) < 0.6 * os.path.getsize(litert_files[None])
    assert np.abs(quantized["probabilities"] - served["probabilities"]).max() < 0.05
    assert np.mean(quantized["label"] == served["label"]) > 0.95


def test_cli_export_litert(tmp_path, capsys):
    model_dir = tmp_path / "finetuned"
    model_dir.mkdir()
    _classifier_with_preprocessor().save(str(model_dir / "model.keras"))
    output = str(tmp_path / "reviews.tflite")
    assert (
        run_command(
            "export --format litert --model-dir {model_dir} --output {output} --seq-length 16"
            " --padding longest",
            model_dir=model_dir,
            output=output,
        )
        == 0
    )
    assert f"wrote {output}" in capsys.readouterr().out
    answers = run_litert(litert_interpreter(output), ["a fine film", "a dull one"])
    assert answers["probabilities"].shape == (2, 3)
    # What the file holds is said inside it, and the interpreter ran past it above.
    assert litert_metadata(output) == {
        "task": "BertClassifier",
        "precision": "float32",
        "padding": "longest",
        "seq_length": 16,
        "lowercase": True,
        "keras_bert_version": keras_bert.__version__,
    }
    assert (
        cli.main(
            ["export", "--format", "litert", "--model-dir", str(model_dir), "--output", output]
        )
        == 2
    )
    assert "exists" in capsys.readouterr().err


def test_litert_export_names_what_it_cannot_take(tmp_path):
    model = _classifier_with_preprocessor()
    with pytest.raises(ValueError, match="must end in .tflite"):
        export_litert(model, tmp_path / "model.lite")
    with pytest.raises(ValueError, match="quantize must be one of"):
        export_litert(model, tmp_path / "model.tflite", quantize="int4")
    with pytest.raises(ValueError, match="padding must be one of"):
        export_litert(model, tmp_path / "model.tflite", padding="bucket")
    with pytest.raises(ValueError, match=r"seq_length must be in \[3, 512\]"):
        export_litert(model, tmp_path / "model.tflite", seq_length=1000)
    with pytest.raises(
        ValueError,
        match="takes a BertClassifier or a BertSentenceEncoder, got a BertTokenClassifier",
    ):
        export_litert(BertTokenClassifier(model.encoder, 3), tmp_path / "model.tflite")
    with pytest.raises(ValueError, match="needs a model with a preprocessor"):
        export_litert(keras_model("classifier"), tmp_path / "model.tflite")


def test_lora_models_export_merged(tmp_path):
    """Both exports of a LoRA model answer as the LoRA model does."""
    from keras_bert.export import export_saved_model

    model = _classifier_with_preprocessor()
    model.enable_lora(2)
    rng = np.random.default_rng(0)
    for variable in model.trainable_weights:
        if "lora_kernel_b" in variable.path:
            variable.assign(rng.normal(0, 0.5, size=variable.shape).astype(np.float32))
    texts = ["a fine film", "a dull, tired retread"]
    expected = model.classify(texts)["probabilities"]
    assert not np.allclose(
        expected, _classifier_with_preprocessor().classify(texts)["probabilities"], atol=1e-3
    )
    litert = run_litert(litert_interpreter(export_litert(model, tmp_path / "lora.tflite")), texts)
    np.testing.assert_allclose(litert["probabilities"], expected, atol=1e-4)
    served = tf.saved_model.load(export_saved_model(model, str(tmp_path / "lora" / "1")))
    probabilities = served.signatures["serving_default"](
        text=tf.constant(texts), text_pair=tf.constant([], tf.string)
    )["probabilities"]
    np.testing.assert_allclose(probabilities.numpy(), expected, atol=1e-5)


def test_an_op_litert_cannot_run_is_refused_at_conversion():
    # An axis added by slicing a tensor of dynamic length lowers to no LiteRT
    # builtin: the converter would write it as a custom op that fails at the
    # file's first call (the sentence encoder's mask did, padded to the longest text).
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def add_axis(values):
        return {"out": values[..., None] * 2.0}

    with pytest.raises(ValueError, match=r"\['StridedSlice'\].*SavedModel"):
        convert(add_axis.get_concrete_function())


def test_the_classifier_file_calls_only_tensorflow_texts_custom_ops(litert_files):
    for path in litert_files.values():
        with open(path, "rb") as f:
            assert custom_ops(f.read()) == {
                "FastBertNormalize",
                "FastWordpieceTokenizeWithOffsets",
                "RaggedTensorToTensor",
            }
