"""Contrastive fine-tuning of BertSentenceEncoder: the losses against NumPy,
gradient caching against the whole batch, the input forms `fit` takes, and
MirroredStrategy on 2 logical CPUs against one device at the same global batch."""

import json
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_sentence_encoder import bbc_headlines_and_openings

from keras_bert import BertEncoder, BertPreprocessor, BertSentenceEncoder
from keras_bert.assets import VOCAB_FILE
from keras_bert.models.contrastive import CoSENTLoss, MultipleNegativesRankingLoss

from harness import tiny_config, tolerance
from repo_paths import REPO_ROOT


def tiny_model(seed=0, dropout=0.0):
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(
        tiny_config(
            vocab_size=30522, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout
        )
    )
    return BertSentenceEncoder(
        encoder, pooling="mean", preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24)
    )


@pytest.fixture(scope="module")
def triplets(datasets_dir):
    """Real (headline, opening sentence, another article's headline) rows."""
    texts = bbc_headlines_and_openings(datasets_dir, count=8)
    titles, openings = texts[:8], texts[8:]
    return titles, openings, titles[3:] + titles[:3]


# === The losses, against NumPy ===


def numpy_cross_entropy(logits, labels):
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels]


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("negatives", [False, True])
def test_multiple_negatives_ranking_loss_equals_numpy(symmetric, negatives):
    rng = np.random.default_rng(1)
    a, p, n = (rng.normal(size=(6, 5)).astype(np.float32) for _ in range(3))
    candidates = np.concatenate([unit(p), unit(n)]) if negatives else unit(p)
    forward = numpy_cross_entropy(20 * unit(a) @ candidates.T, np.arange(6))
    if symmetric:
        backward = numpy_cross_entropy(20 * unit(p) @ unit(a).T, np.arange(6))
        forward = (forward + backward) / 2
    embeddings = {"anchor": a, "positive": p, **({"negative": n} if negatives else {})}
    share, value = MultipleNegativesRankingLoss(symmetric=symmetric)(embeddings)
    np.testing.assert_allclose(share, forward.mean(), rtol=1e-5)
    np.testing.assert_allclose(value, forward.mean(), rtol=1e-5)


def test_cosent_loss_equals_numpy():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(7, 5)).astype(np.float32), rng.normal(size=(7, 5)).astype(np.float32)
    scores = np.array([0.1, 0.5, 0.5, 0.9, 0.0, 0.3, 1.0], np.float32)
    cosines = 20 * (unit(a) * unit(b)).sum(axis=1)
    terms = [cosines[i] - cosines[j] for i in range(7) for j in range(7) if scores[i] < scores[j]]
    expected = np.log1p(np.exp(np.array(terms, np.float64)).sum())
    share, value = CoSENTLoss()({"anchor": a, "positive": b}, scores)
    np.testing.assert_allclose(value, expected, rtol=1e-5)
    np.testing.assert_allclose(share, expected, rtol=1e-5)


# === Gradient caching ===


def batch_of(model, columns, scores=None):
    features = model.encode_text(tuple(columns))[0]
    x = {
        name: {key: tf.constant(value) for key, value in part.items()}
        for name, part in features.items()
    }
    return x if scores is None else (x, tf.constant(scores, tf.float32))


@pytest.mark.precision
@pytest.mark.parametrize(
    "loss",
    [
        lambda size: MultipleNegativesRankingLoss(symmetric=True, mini_batch_size=size),
        lambda size: CoSENTLoss(mini_batch_size=size),
    ],
    ids=["mnrl_symmetric", "cosent"],
)
def test_gradient_caching_equals_the_whole_batch(triplets, loss):
    """Chunks of 3 rows (the last one partial) give the whole batch's loss and gradients."""
    model = tiny_model()
    scored = isinstance(loss(None), CoSENTLoss)
    columns = triplets[:2] if scored else triplets
    data = batch_of(model, columns, np.linspace(0, 1, 8)[::-1] if scored else None)
    model.compile(loss=loss(None))
    whole = model.loss_and_gradients(data)
    model.compile(loss=loss(3))
    cached = model.loss_and_gradients(data)
    np.testing.assert_allclose(cached[0], whole[0], rtol=1e-5)
    np.testing.assert_allclose(cached[1], whole[1], rtol=1e-5)
    assert len(cached[2]) == len(whole[2]) == len(model.trainable_weights)
    assert any(np.abs(g).max() > 0 for g in whole[2])
    # Chunked or whole, the same sums in another order: two layers forward and
    # back, ~40 roundings deep (harness.tolerance).
    for got, want, weight in zip(cached[2], whole[2], model.trainable_weights):
        np.testing.assert_allclose(
            got, want, atol=tolerance(depth=40), rtol=1e-4, err_msg=weight.path
        )


def test_gradient_caching_replays_each_chunks_dropout(triplets):
    """With dropout on and one chunk, the cached pass draws the masks the
    whole-batch pass draws: its second forward replays the first's."""
    data = batch_of(tiny_model(), triplets)
    results = []
    for size in (None, 8):
        model = tiny_model(seed=3, dropout=0.3)
        model.compile(loss=MultipleNegativesRankingLoss(mini_batch_size=size))
        results.append(model.loss_and_gradients(data))
    (whole_loss, _, whole), (cached_loss, _, cached) = results
    np.testing.assert_allclose(cached_loss, whole_loss, rtol=1e-5)
    for got, want in zip(cached, whole):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-4)


def test_a_cached_fit_takes_the_same_steps(triplets):
    model, cached = tiny_model(), tiny_model()
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=MultipleNegativesRankingLoss())
    cached.compile(
        optimizer=keras.optimizers.SGD(0.5), loss=MultipleNegativesRankingLoss(mini_batch_size=3)
    )
    losses = [
        m.fit(triplets, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
        for m in (model, cached)
    ]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    for a, b in zip(model.trainable_weights, cached.trainable_weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-5)  # float32 sums, 4 steps


# === What fit takes ===


def test_fit_takes_columns_rows_and_datasets_alike(triplets):
    titles, openings, _ = triplets
    forms = {
        "columns": (titles, openings),
        "rows": list(zip(titles, openings)),
        "dataset": tf.data.Dataset.from_tensor_slices((titles, openings)).batch(4),
    }
    histories = {}
    for name, x in forms.items():
        model = tiny_model()
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        kwargs = {} if name == "dataset" else {"batch_size": 4, "shuffle": False}
        histories[name] = model.fit(x, epochs=2, verbose=0, **kwargs).history["loss"]
    assert histories["columns"][1] < histories["columns"][0]
    np.testing.assert_allclose(histories["rows"], histories["columns"], rtol=1e-5)
    np.testing.assert_allclose(histories["dataset"], histories["columns"], rtol=1e-5)
    result = model.evaluate((titles, openings), batch_size=4, verbose=0, return_dict=True)
    assert set(result) == {"loss"} and result["loss"] > 0


def test_cosent_fits_scored_pairs_from_arrays_and_datasets(triplets):
    titles, openings, _ = triplets
    scores = np.linspace(0, 1, 8).astype(np.float32)
    histories = []
    for x, y in (
        ((titles, openings), scores),
        (tf.data.Dataset.from_tensor_slices(((titles, openings), scores)).batch(4), None),
    ):
        model = tiny_model()
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="cosent")
        kwargs = {} if y is None else {"batch_size": 4, "shuffle": False}
        histories.append(model.fit(x, y, epochs=1, verbose=0, **kwargs).history["loss"])
    np.testing.assert_allclose(histories[1], histories[0], rtol=1e-5)


def test_a_compiled_model_round_trips_its_loss(tmp_path, triplets):
    model = tiny_model()
    model.compile(loss=MultipleNegativesRankingLoss(scale=10.0, symmetric=True, mini_batch_size=2))
    model.fit(triplets[:2], batch_size=4, epochs=1, verbose=0)
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert restored.contrastive_loss.get_config() == model.contrastive_loss.get_config()
    np.testing.assert_allclose(
        restored.predict(triplets[0], verbose=0), model.predict(triplets[0], verbose=0), atol=1e-6
    )


# === The global batch under MirroredStrategy ===

MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    for folder in ("", "/tests", "/tests/models"):
        sys.path.insert(0, sys.argv[1] + folder)
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from keras_bert.models.contrastive import CoSENTLoss, MultipleNegativesRankingLoss
    from test_sentence_encoder_training import tiny_model
    columns = json.loads(sys.argv[2])
    scores = [i / 7 for i in range(8)]
    losses = {"mnrl": lambda: MultipleNegativesRankingLoss(symmetric=True),
              "mnrl_cached": lambda: MultipleNegativesRankingLoss(mini_batch_size=3),
              "cosent": lambda: CoSENTLoss()}
    # One strategy for every run: a second one over the same devices would
    # reuse the first's collective keys.
    strategies = {"one": tf.distribute.OneDeviceStrategy("/cpu:0"),
                  "mirrored": tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])}
    results = {}
    for name, loss in losses.items():
        x = tuple(columns[:2]) if name == "cosent" else tuple(columns)
        y = scores if name == "cosent" else None
        for strategy, scope in strategies.items():
            with scope.scope():
                model = tiny_model()
                model.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss())
            history = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
            results[f"{name}/{strategy}"] = {
                "loss": history.history["loss"],
                "weights": [w.numpy().ravel()[:64].tolist() for w in model.trainable_weights]}
    print("RESULT", json.dumps(results))
""")


@pytest.mark.slow
def test_mirrored_negatives_are_the_global_batch(triplets):
    """Two replicas of 4 rows each train as one device with 8: every anchor
    is scored against all 8 positives (and negatives), not its replica's 4."""
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            MIRRORED_SCRIPT,
            REPO_ROOT,
            json.dumps([list(column) for column in triplets]),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))
    results = json.loads(line[len("RESULT ") :])
    for name in ("mnrl", "mnrl_cached", "cosent"):
        one, mirrored = results[f"{name}/one"], results[f"{name}/mirrored"]
        assert one["loss"][-1] < one["loss"][0], name
        np.testing.assert_allclose(mirrored["loss"], one["loss"], rtol=1e-5, err_msg=name)
        for a, b in zip(one["weights"], mirrored["weights"]):
            np.testing.assert_allclose(b, a, atol=1e-5, err_msg=name)


def test_validation_data_takes_text_columns_as_users_pass_them(triplets):
    """`validation_data=(anchors, positives)` (or triplets, or rows) are rows
    of texts, scored as `evaluate` scores them; Keras' own `((anchors,
    positives), None)` form still reads the same."""
    titles, openings, negatives = triplets
    model = tiny_model()
    model.compile(optimizer=keras.optimizers.SGD(0.5))
    forms = {
        "pairs": ((titles, openings), (titles, openings)),
        "keras_form": ((titles, openings), ((titles, openings), None)),
        "rows": ((titles, openings), list(zip(titles, openings))),
        "triplets": (triplets, triplets),
    }
    for name, (x, validation) in forms.items():
        history = model.fit(
            x, batch_size=4, epochs=1, shuffle=False, verbose=0, validation_data=validation
        )
        # Evaluated after the epoch's updates, as fit's validation is.
        expected = model.evaluate(x, batch_size=4, verbose=0, return_dict=True)["loss"]
        np.testing.assert_allclose(history.history["val_loss"], [expected], rtol=1e-5, err_msg=name)
    scores = np.linspace(0, 1, 8).astype(np.float32)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="cosent")
    history = model.fit(
        (titles, openings),
        scores,
        batch_size=4,
        epochs=1,
        shuffle=False,
        verbose=0,
        validation_data=((titles, openings), scores),
    )
    expected = model.evaluate(
        (titles, openings), scores, batch_size=4, verbose=0, return_dict=True
    )["loss"]
    np.testing.assert_allclose(history.history["val_loss"], [expected], rtol=1e-5)


def test_rows_sharing_a_positive_warn_once_naming_how_many(triplets):
    """In-batch negatives: two rows with the same positive text make it a
    negative of each other's anchor (a false negative), without a word before."""
    import warnings

    titles, openings, _ = triplets
    anchors = titles + [titles[0], "an anchor of its own"]
    positives = openings + [openings[0], openings[1]]  # one whole pair repeated, one positive
    model = tiny_model()
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    with pytest.warns(UserWarning) as caught:
        model.fit((anchors, positives), batch_size=10, epochs=1, verbose=0)
    messages = [str(w.message) for w in caught if "positive text" in str(w.message)]
    assert len(messages) == 1
    assert "2 of 10 rows repeat another row's positive text (1 of them the whole" in messages[0]
    assert "false negative" in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per model
        model.fit((anchors, positives), batch_size=10, epochs=1, verbose=0)
        # Distinct positives, or scored pairs (CoSENT has no in-batch negatives): no warning.
        fresh = tiny_model()
        fresh.compile(optimizer=keras.optimizers.SGD(0.1))
        fresh.fit((titles, openings), batch_size=4, epochs=1, verbose=0)
        scored = tiny_model()
        scored.compile(optimizer=keras.optimizers.SGD(0.1), loss="cosent")
        scores = np.linspace(0, 1, 10).astype(np.float32)
        scored.fit((anchors, positives), scores, batch_size=10, epochs=1, verbose=0)


def test_encode_of_no_texts_is_an_empty_array(triplets):
    """As sentence-transformers' encode([]): shape (0, D), float32 (was Keras'
    UnboundLocalError from predict on no batches)."""
    titles = triplets[0]
    model = tiny_model()
    for nothing in ([], (), np.array([], dtype=str)):
        empty = model.encode(nothing)
        assert empty.shape == (0, 32) and empty.dtype == np.float32
    assert model.similarity([], titles[:3]).shape == (0, 3)
    assert model.encode(titles[:2]).shape == (2, 32)
