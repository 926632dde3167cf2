"""Tiny task models exported once per test session, shared by tests/export/test_export*.py.

Exporting and loading a SavedModel takes seconds, so each model is built,
exported and loaded once (`exported(kind)`, cached) and every test reads it.
The output layers' kernels are scaled up so that logits are well apart: the
comparisons of argmax / best-span decisions between the SavedModel and the
Keras model then do not hinge on float rounding.
"""

import atexit
import contextlib
import functools
import io
import json
import os
import shutil
import tempfile

import numpy as np

from keras_bert import BertEncoder, BertTokenizer
from keras_bert.assets import VOCAB_FILE

from harness import BERT_DROPOUT, tiny_config

KINDS = ("embeddings", "classifier", "regressor", "tagger", "squad")
# The default (fast) suite exports the classifier only; tests of the other
# exports are marked slow (CI runs both).
FAST_KINDS = ("classifier",)
CLASS_NAMES = ["negative", "neutral", "positive"]
# The multi-label classifier's (exported as "multi_label", outside KINDS: its
# tests live in test_export_multi_label.py), and the threshold it is exported with.
TOPICS = ["sports", "politics", "tech", "culture"]
MULTI_LABEL_THRESHOLD = 0.4
# Texts and the logits the multi-label head is fitted to on them: per text
# several labels, one or none above the threshold (logit -0.405), none tied.
MULTI_LABEL_TEXTS = [
    "The match ended in a draw.",
    "Parliament passed the budget.",
    "A new phone with a faster chip.",
    "The minister opened the stadium.",
    "It rained all day in Highbury.",
    "Emma Woodhouse, handsome, clever, and rich.",
]
MULTI_LABEL_LOGITS = [
    [2.0, -1.0, -2.0, -3.0],
    [-1.5, 2.5, -1.2, -2.2],
    [-2.0, -1.1, 3.0, 0.4],
    [1.5, 1.0, -2.0, -0.1],
    [-2.0, -3.0, -1.0, -1.6],
    [-1.2, -2.5, 0.8, 1.7],
]
TAG_NAMES = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SEQ_LENGTH = {
    "embeddings": 32,
    "classifier": 32,
    "regressor": 32,
    "tagger": 16,
    "squad": 64,
    "multi_label": 32,
}
SQUAD_OPTIONS = {
    "version_2_with_negative": True,
    "doc_stride": 16,
    "max_query_length": 16,
    "max_answer_length": 30,
    "n_best_size": 20,
}
SIGNATURES = {"serving_default", "serve_examples", "serve_ids"}

_ROOT = tempfile.mkdtemp(prefix="keras_bert_exports_")
atexit.register(shutil.rmtree, _ROOT, True)


@functools.lru_cache(maxsize=None)
def tokenizer():
    return BertTokenizer(VOCAB_FILE)


def kinds(*names):
    """pytest parameters for these export kinds, marked slow unless in FAST_KINDS."""
    import pytest

    return [
        pytest.param(name, marks=() if name in FAST_KINDS else pytest.mark.slow)
        for name in names or KINDS
    ]


def tiny_encoder(seed):
    import keras

    keras.utils.set_random_seed(seed)
    return BertEncoder(tiny_config(vocab_size=tokenizer().vocab_size, **BERT_DROPOUT))


def _spread(layer, factor):
    for weight in layer.weights:
        weight.assign(weight.numpy() * factor)


@functools.lru_cache(maxsize=None)
def keras_model(kind):
    from keras_bert.models.classifier import BertClassifier
    from keras_bert.models.span_extractor import BertSpanExtractor
    from keras_bert.models.token_classifier import BertTokenClassifier

    encoder = tiny_encoder(KINDS.index(kind) if kind in KINDS else len(KINDS))
    if kind == "embeddings":
        return encoder
    if kind == "classifier":
        model = BertClassifier(encoder, len(CLASS_NAMES), label_names=CLASS_NAMES)
        _spread(model.get_layer("classifier_output"), 20.0)
    elif kind == "multi_label":
        model = multi_label_classifier()
    elif kind == "regressor":
        model = BertClassifier(encoder, 1)
    elif kind == "tagger":
        model = BertTokenClassifier(encoder, len(TAG_NAMES), label_names=TAG_NAMES)
        _spread(model.get_layer("tagger_output"), 50.0)
    else:
        model = BertSpanExtractor(encoder, max_answer_length=SQUAD_OPTIONS["max_answer_length"])
        _spread(model.get_layer("span_head"), 50.0)
    return model


def multi_label_classifier(activation=None):
    """A multi-label classifier whose head is fitted (least squares) to give
    MULTI_LABEL_TEXTS their MULTI_LABEL_LOGITS; the encoder's initializer
    range is wider than BERT's, so that the texts' pooled outputs differ."""
    import keras

    from keras_bert.models.classifier import BertClassifier

    keras.utils.set_random_seed(len(KINDS))
    config = tiny_config(vocab_size=tokenizer().vocab_size, initializer_range=0.2, **BERT_DROPOUT)
    model = BertClassifier(
        BertEncoder(config),
        len(TOPICS),
        label_names=TOPICS,
        multi_label=True,
        activation=activation,
    )
    pooled = model.encoder(keras_features(MULTI_LABEL_TEXTS, kind="multi_label"))
    pooled = pooled["pooled_output"].numpy()
    ones = np.ones((len(MULTI_LABEL_TEXTS), 1))
    weights = np.linalg.lstsq(np.hstack([pooled, ones]), MULTI_LABEL_LOGITS, rcond=None)[0]
    model.get_layer("classifier_output").set_weights(
        [weights[:-1].astype(np.float32), weights[-1].astype(np.float32)]
    )
    return model


_EXPORT_LOGS = {}


@functools.lru_cache(maxsize=None)
def export_path(kind):
    """EXPORT_DIR/<kind>/1 of the exported model."""
    from keras_bert.export import export_saved_model
    from keras_bert.progress import show_progress

    options = dict(SQUAD_OPTIONS) if kind == "squad" else {}
    if kind == "multi_label":
        options["threshold"] = MULTI_LABEL_THRESHOLD
    path = os.path.join(_ROOT, kind, "1")
    # Progress lines on, as the `keras-bert` command shows them, kept for `export_log`.
    log = io.StringIO()
    show_progress(True)
    try:
        with contextlib.redirect_stderr(log):
            export_saved_model(
                keras_model(kind), tokenizer(), path, seq_length=SEQ_LENGTH[kind], **options
            )
    finally:
        show_progress(None)
    _EXPORT_LOGS[kind] = log.getvalue()
    return path


# The classifier exported in each form its options make (test_export_options.py,
# test_export_precision.py), padded to each request's longest: built once per
# process, whichever of those files asks first.
CLASSIFIER_FORMS = {
    "float32": {},
    "bfloat16": {"precision": "mixed_bfloat16"},
    "int8": {"quantize": "int8"},
    "xla": {"jit_compile": True},
}
LENGTH_MULTIPLE = 8


@functools.lru_cache(maxsize=None)
def classifier_form(form):
    """EXPORT_DIR/classifier_<form>/1: the classifier of `keras_model`
    exported with CLASSIFIER_FORMS[form], `padding="longest"` in multiples of
    LENGTH_MULTIPLE."""
    from keras_bert.export import export_saved_model

    path = os.path.join(_ROOT, f"classifier_{form}", "1")
    return export_saved_model(
        keras_model("classifier"),
        tokenizer(),
        path,
        seq_length=SEQ_LENGTH["classifier"],
        padding="longest",
        length_multiple=LENGTH_MULTIPLE,
        **CLASSIFIER_FORMS[form],
    )


def export_log(kind):
    """What the export of `kind` wrote on stderr (its progress lines)."""
    export_path(kind)
    return _EXPORT_LOGS[kind]


@functools.lru_cache(maxsize=None)
def loaded(kind):
    import tensorflow as tf

    return tf.saved_model.load(export_path(kind))


def keras_features(texts, pairs=None, kind="classifier"):
    """What the Keras model is fed: ids packed by `keras_bert.BertTokenizer`."""
    import tensorflow as tf

    return tokenizer().pack(
        tf.constant(texts),
        None if pairs is None else tf.constant(pairs),
        seq_length=SEQ_LENGTH[kind],
    )


def call(kind, signature="serving_default", **inputs):
    """Runs a signature of the loaded SavedModel on NumPy / lists -> NumPy dict."""
    import tensorflow as tf

    function = loaded(kind).signatures[signature]
    specs = function.structured_input_signature[1]
    tensors = {
        name: value if isinstance(value, tf.Tensor) else tf.constant(value, dtype=specs[name].dtype)
        for name, value in inputs.items()
    }
    return {name: value.numpy() for name, value in function(**tensors).items()}


def signature_defs(kind):
    """SignatureDef protos of an export, as TensorFlow Serving reads them."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(export_path(kind), "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return saved_model.meta_graphs[0].signature_def


def export_metadata(kind):
    with open(os.path.join(export_path(kind), "assets", "keras_bert_export.json")) as f:
        return json.load(f)


def decode(values):
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(values)


def normalized_mean(sequence_output, input_mask):
    """(B, T, H), (B, T) -> (B, H): the mean over the real tokens, L2-normalised,
    in NumPy (what an encoder's export serves, written apart from keras_bert)."""
    mask = np.asarray(input_mask, np.float64)[..., None]
    mean = (np.asarray(sequence_output, np.float64) * mask).sum(axis=1) / mask.sum(axis=1)
    return mean / np.linalg.norm(mean, axis=-1, keepdims=True)
