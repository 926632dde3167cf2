"""EntityF1, the in-graph streaming metric, against seqeval's F1 on the same tag
sequences (decoded here from the ids), batch after batch: eagerly, traced,
XLA-compiled, inside `fit` / `evaluate` of a Keras model and of a
BertTokenClassifier, and under MirroredStrategy on 2 logical CPUs."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import keras
import numpy as np
import pytest
import seqeval.metrics
import tensorflow as tf
from seqeval.metrics.sequence_labeling import get_entities as seqeval_get_entities

from keras_bert import BertEncoder
from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets.entity_f1 import EntityF1
from keras_bert.datasets.tagging import read_conll, tag_vocabulary
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor

from harness import tiny_config

# Each scheme's prefixes besides O; None reads any of B/I/E/S.
SCHEME_LETTERS = {
    "IOB1": "IB",
    "IOB2": "IB",
    "IOE1": "IE",
    "IOE2": "IE",
    "IOBES": "IBES",
    "BILOU": "BILU",
    None: "IBES",
}
# seqeval's lenient rules know B/I/E/S only; with scheme="BILOU", BILOU is read as
# its IOBES spelling (without a scheme, L and U as seqeval reads them).
AS_IOBES = {"L": "E", "U": "S"}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def label_names(scheme, types=("PER", "LOC", "ORG")):
    """O, each prefix with each type, and the bare prefixes (the empty type)."""
    letters = SCHEME_LETTERS[scheme]
    return ["O"] + [f"{p}-{t}" for p in letters for t in types] + list(letters)


def seqeval_spelling(tag):
    return AS_IOBES.get(tag[:1], tag[:1]) + tag[1:]


def decoded(names, ids, weights):
    """(N, T) tag ids and weights -> each row's word tags (its pieces of weight > 0)."""
    return [
        [names[i] for i, w in zip(row, row_weights) if w > 0]
        for row, row_weights in zip(ids, weights)
    ]


def seqeval_figures(true, pred, spelling=seqeval_spelling):
    true = [[spelling(t) for t in row] for row in true]
    pred = [[spelling(t) for t in row] for row in pred]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns where F1 is undefined (0)
        f1 = seqeval.metrics.f1_score(true, pred)
    count = lambda rows: sum(len(seqeval_get_entities(row)) for row in rows)  # noqa: E731
    return f1, count(true), count(pred)


def random_batch(rng, names, rows, width):
    """A tagger-like batch: tag ids (B, T), logits (B, T, K), weights (B, T) that
    are 1 on words' first pieces only ([CLS], other pieces and padding get 0 and
    arbitrary ids); predictions mostly agree with the gold tags."""
    k = len(names)
    outside = rng.random((rows, width)) < 0.6
    true = np.where(outside, 0, rng.integers(0, k, size=(rows, width)))
    weights = (rng.random((rows, width)) < 0.75).astype("float32")
    weights[:, 0] = 0.0  # [CLS]
    for row, length in enumerate(rng.integers(1, width + 1, size=rows)):
        weights[row, length:] = 0.0  # padding
    true = np.where(weights > 0, true, rng.integers(0, k, size=(rows, width)))
    pred = np.where(rng.random((rows, width)) < 0.7, true, rng.integers(0, k, size=(rows, width)))
    logits = rng.normal(size=(rows, width, k)) + 6.0 * np.eye(k)[pred]
    return true.astype("int32"), logits.astype("float32"), weights


def batches(seed, names, count=6, static=False):
    """Batches of different shapes, as trimmed batches have; or of one shape,
    as XLA steps get (no trimming there)."""
    rng = np.random.default_rng(seed)
    return [
        random_batch(
            rng,
            names,
            6 if static else int(rng.integers(1, 7)),
            24 if static else int(rng.integers(2, 24)),
        )
        for _ in range(count)
    ]


def expected_over(data, names, spelling=seqeval_spelling):
    true, pred = [], []
    for ids, logits, weights in data:
        true += decoded(names, ids, weights)
        pred += decoded(names, logits.argmax(-1), weights)
    return seqeval_figures(true, pred, spelling)


def assert_counts(metric, expected):
    f1, n_true, n_pred = expected
    assert float(metric.true_entities.numpy()) == n_true
    assert float(metric.predicted_entities.numpy()) == n_pred
    assert float(metric.result()) == pytest.approx(f1, abs=1e-6)


@pytest.mark.parametrize("scheme", list(SCHEME_LETTERS))
@pytest.mark.parametrize("run", ["eager", "traced", "xla"])
def test_streamed_f1_over_batches_equals_seqeval(scheme, run):
    names = label_names(scheme)
    data = batches(seed=len(names) + 7 * len(str(scheme)), names=names, static=run == "xla")
    metric = EntityF1(names, scheme=scheme)
    update = {
        "eager": metric.update_state,
        "traced": tf.function(metric.update_state, reduce_retracing=True),
        "xla": tf.function(metric.update_state, jit_compile=True),
    }[run]
    for ids, logits, weights in data:
        update(tf.constant(ids), tf.constant(logits), tf.constant(weights))
    expected = expected_over(data, names)
    assert expected[1] > 10 and expected[2] > 10 and expected[0] > 0  # a real comparison
    assert_counts(metric, expected)


def test_io_labels_read_as_inside_tags():
    """Without a scheme, labels without prefixes (IO tagging) are I- tags, as
    `entity_scores` reads them."""
    names = ["O", "PER", "LOC", "B-PER", "I-LOC"]
    data = batches(seed=5, names=names)
    metric = EntityF1(names, scheme=None)
    for ids, logits, weights in data:
        metric.update_state(ids, logits, weights)
    spelled = {name: name if name == "O" or name[1:2] == "-" else f"I-{name}" for name in names}
    assert_counts(metric, expected_over(data, names, spelled.get))


@pytest.mark.parametrize("run", ["eager", "xla"])
def test_without_a_scheme_l_and_u_tags_are_read_as_seqeval_reads_them(run):
    """seqeval's default mode knows B/I/E/S only: L- and U- tags (BILOU's)
    continue an entity and start one only where the type changes. Random
    B/I/E/S/L/U/O tags of two types, scored by seqeval as they are spelled."""
    names = ["O"] + [f"{p}-{t}" for p in "BIESLU" for t in ("PER", "LOC")]
    data = batches(seed=19, names=names, count=12, static=run == "xla")
    metric = EntityF1(names, scheme=None)
    update = (
        metric.update_state
        if run == "eager"
        else tf.function(metric.update_state, jit_compile=True)
    )
    for ids, logits, weights in data:
        update(tf.constant(ids), tf.constant(logits), tf.constant(weights))
    expected = expected_over(data, names, spelling=lambda tag: tag)
    assert expected[1] > 20 and expected[2] > 20 and expected[0] > 0  # a real comparison
    # Not the BILOU reading: the two differ on these batches.
    assert expected != expected_over(data, names)
    assert_counts(metric, expected)


def test_reset_state_and_labels_without_weights():
    names = label_names("IOB2")
    first, second = batches(seed=11, names=names, count=2)
    metric = EntityF1(names)
    metric.update_state(*first)
    metric.reset_state()
    assert float(metric.result()) == 0.0 and float(metric.true_entities.numpy()) == 0.0
    # (B, T, 1) labels, no weights: every position is a word, save ids < 0
    # (labels written for `ignore_class=-1`).
    ids, logits, weights = second
    ids = np.where(weights > 0, ids, -1)
    metric.update_state(ids[..., np.newaxis], logits)
    assert_counts(metric, expected_over([second], names))
    metric.reset_state()
    outside = np.zeros_like(ids)
    metric.update_state(outside, np.eye(len(names))[outside] * 5.0, weights)
    assert float(metric.result()) == 0.0  # no entity at all: 0, as seqeval's


def test_config_round_trip_and_registration():
    metric = EntityF1(label_names("BILOU"), scheme="BILOU", name="dev_entity_f1")
    config = metric.get_config()
    assert config == {
        "label_names": label_names("BILOU"),
        "scheme": "BILOU",
        "name": "dev_entity_f1",
        "dtype": "float32",
    }
    assert EntityF1.from_config(config).get_config() == config
    assert keras.saving.get_registered_name(EntityF1) == "keras_bert>EntityF1"
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(metric))
    assert type(restored) is EntityF1 and restored.get_config() == config


def test_label_names_must_follow_the_scheme():
    with pytest.raises(ValueError, match="'E-PER' does not follow the IOB2 scheme"):
        EntityF1(["O", "B-PER", "E-PER"])
    with pytest.raises(ValueError, match="scheme must be one of"):
        EntityF1(["O", "B-PER"], scheme="BIO")
    with pytest.raises(ValueError, match="needs the tag names"):
        EntityF1([])


def tiny_tagger_data(names, seed=0, rows=24, width=12):
    rng = np.random.default_rng(seed)
    ids, _, weights = random_batch(rng, names, rows, width)
    tokens = rng.integers(1, 30, size=(rows, width)).astype("int32")
    return tokens, ids, weights


@pytest.mark.parametrize("jit_compile", [False, True])
def test_inside_fit_and_evaluate_of_a_keras_model(jit_compile):
    names = label_names("IOBES")
    tokens, ids, weights = tiny_tagger_data(names)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((None,), dtype="int32")
    logits = keras.layers.Dense(len(names))(keras.layers.Embedding(30, 16)(inputs))
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        jit_compile=jit_compile,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[EntityF1(names, scheme="IOBES")],
    )
    history = model.fit(tokens, ids, sample_weight=weights, batch_size=4, epochs=1, verbose=0)
    assert len(history.history["entity_f1"]) == 1
    result = model.evaluate(
        tokens, ids, sample_weight=weights, batch_size=4, verbose=0, return_dict=True
    )
    predicted = model.predict(tokens, batch_size=4, verbose=0).argmax(-1)
    expected = seqeval_figures(decoded(names, ids, weights), decoded(names, predicted, weights))
    assert expected[2] > 0
    assert result["entity_f1"] == pytest.approx(expected[0], abs=1e-6)


def test_a_token_classifier_fits_and_evaluates_with_it(datasets_dir):
    """The tagger's own steps: text in, batches trimmed, first pieces weighted."""
    tweets = read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll"))
    words, tags = tweets.words[:16], tweets.tags[:16]
    names = tag_vocabulary(tweets.tags)
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(
        tiny_config(
            vocab_size=30522,
            num_hidden_layers=1,
            hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1,
        )
    )
    model = BertTokenClassifier(
        encoder,
        len(names),
        dropout=0.0,
        label_names=names,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=48),
    )
    metric = EntityF1(names)
    # A step too small to learn "all O": the predictions keep entities to score.
    model.compile(optimizer=keras.optimizers.Adam(1e-7), weighted_metrics=[metric])
    history = model.fit(words, tags, batch_size=4, epochs=1, verbose=0)
    assert len(history.history["entity_f1"]) == 1
    result = model.evaluate(words, tags, batch_size=4, verbose=0, return_dict=True)
    features, ids, weights = model.encode_text(words, tags)
    predicted = model.predict(features, batch_size=4, verbose=0).argmax(-1)
    expected = seqeval_figures(decoded(names, ids, weights), decoded(names, predicted, weights))
    assert expected[1] > 0 and expected[2] > 0
    assert float(metric.predicted_entities.numpy()) == expected[2]
    assert result["entity_f1"] == pytest.approx(expected[0], abs=1e-6)


MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from keras_bert.datasets.entity_f1 import EntityF1
    data = np.load(sys.argv[2])
    names = json.loads(sys.argv[3])
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        inputs = keras.Input((None,), dtype="int32")
        logits = keras.layers.Dense(len(names))(keras.layers.Embedding(30, 16)(inputs))
        model = keras.Model(inputs, logits)
        model.compile(optimizer="adam", weighted_metrics=[EntityF1(names)],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data["tokens"], data["ids"], sample_weight=data["weights"], batch_size=8,
              epochs=1, verbose=0)
    result = model.evaluate(data["tokens"], data["ids"], sample_weight=data["weights"],
                            batch_size=8, verbose=0, return_dict=True)
    predicted = model.predict(data["tokens"], batch_size=8, verbose=0).argmax(-1)
    print("RESULT", json.dumps({"f1": result["entity_f1"], "predicted": predicted.tolist()}))
""")


@pytest.mark.slow
def test_under_mirrored_strategy_the_replicas_counts_add_up(tmp_path):
    names = label_names("IOB2")
    tokens, ids, weights = tiny_tagger_data(names, seed=4, rows=32)
    np.savez(tmp_path / "data.npz", tokens=tokens, ids=ids, weights=weights)
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            MIRRORED_SCRIPT,
            REPO_ROOT,
            str(tmp_path / "data.npz"),
            json.dumps(names),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    line = next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    predicted = np.array(result["predicted"])
    expected = seqeval_figures(decoded(names, ids, weights), decoded(names, predicted, weights))
    assert expected[2] > 0
    assert result["f1"] == pytest.approx(expected[0], abs=1e-6)
