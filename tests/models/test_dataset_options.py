"""Pipelines without tf.data's autotuning thread (`keras_bert.dataset_options`),
whose deletion could hold up the end of `fit` by tens of seconds: the task
models' own pipelines over in-memory arrays (built in place of Keras' array
pipeline, with its semantics), the fine-tuning command's epochs."""

import functools
import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf
from task_models import NAMES, assert_same_weights, classifier, reviews

from keras_bert.dataset_options import (
    array_batches,
    class_weights_per_row,
    default_batch_size,
    epoch_batches,
    ordered_batches,
    split_validation,
    without_autotune,
)


def rows_of(dataset, leaf=lambda element: element):
    return [leaf(element).tolist() for element in dataset.as_numpy_iterator()]


def test_without_autotune_keeps_the_elements():
    dataset = tf.data.Dataset.range(10).map(lambda i: i * 2, num_parallel_calls=tf.data.AUTOTUNE)
    quiet = without_autotune(dataset.prefetch(tf.data.AUTOTUNE))
    assert quiet.options().autotune.enabled is False
    assert list(quiet.as_numpy_iterator()) == list(range(0, 20, 2))


def test_array_batches_in_order_with_the_last_partial_and_keras_batch_sizes():
    x = {"a": np.arange(70), "b": np.arange(70)[:, None] * 10}
    dataset = array_batches(x, np.arange(70), batch_size=default_batch_size(x, None, None))
    assert dataset.options().autotune.enabled is False
    sizes = [len(t) for _, t in dataset.as_numpy_iterator()]
    assert sizes == [32, 32, 6]  # Keras' default of 32, the last batch partial
    assert np.concatenate(rows_of(dataset, lambda e: e[0]["b"][:, 0])).tolist() == list(
        range(0, 700, 10)
    )
    assert default_batch_size(x, None, 3) == 24  # as Keras: rows for `steps` batches
    assert default_batch_size(x, 5, 3) == 5
    # x alone (predict's element), a tuple of inputs kept one x, floats in floatx.
    alone = array_batches((np.zeros((5, 2)), np.ones((5, 1), np.int32)), batch_size=2)
    first = next(iter(alone))
    assert isinstance(first, tuple) and len(first) == 1 and len(first[0]) == 2
    assert first[0][0].dtype == tf.float32 and first[0][1].dtype == tf.int32


def test_array_batches_shuffle_every_row_afresh_each_epoch():
    keras.utils.set_random_seed(0)
    dataset = array_batches(np.arange(50), np.arange(50), batch_size=8, shuffle=True)
    epochs = [np.concatenate([t for _, t in dataset.as_numpy_iterator()]) for _ in range(3)]
    for order in epochs:
        assert sorted(order.tolist()) == list(range(50))
    assert epochs[0].tolist() != list(range(50))
    assert epochs[0].tolist() != epochs[1].tolist() != epochs[2].tolist()
    # Over the whole array, not within a window: the first batch reaches the end.
    assert max(epochs[0][:8]) > 8 or max(epochs[1][:8]) > 8
    within = array_batches(np.arange(20), batch_size=5, shuffle="batch")
    batches = rows_of(within)
    assert [sorted(b) for b in batches] == [list(range(i, i + 5)) for i in range(0, 20, 5)]


def test_validation_split_takes_the_last_rows_and_class_weight_keras_weights():
    x, y, weight = np.arange(10), np.arange(10) % 3, None
    (train_x, train_y, _), (val_x, val_y, val_weight) = split_validation(x, y, weight, 0.2)
    assert train_x.tolist() == list(range(8)) and val_x.tolist() == [8, 9]
    assert val_y.tolist() == [2, 0] and val_weight is None
    with pytest.raises(ValueError, match="not enough to split"):
        split_validation(np.arange(3), None, None, 0.9)
    weights = class_weights_per_row(y, None, {0: 2.0, 2: 0.5})
    assert weights.tolist() == [2.0, 1.0, 0.5, 2.0, 1.0, 0.5, 2.0, 1.0, 0.5, 2.0]
    one_hot = np.eye(3)[y]
    assert class_weights_per_row(one_hot, None, {0: 2.0, 2: 0.5}).tolist() == weights.tolist()
    with pytest.raises(ValueError, match="cannot both"):
        class_weights_per_row(y, np.ones(10), {0: 2.0})


def ids_and_labels(datasets_dir, count):
    texts, labels = reviews(datasets_dir, count=count)
    features = classifier().preprocessor.encode(texts)
    features = {name: np.asarray(value) for name, value in features.items()}
    return features, np.asarray([NAMES.index(label) for label in labels])


@pytest.mark.parametrize(
    "arguments",
    [
        # validation_split's last rows, class weights, partial batches.
        dict(
            batch_size=3,
            epochs=2,
            shuffle=False,
            validation_split=0.3,
            class_weight={0: 2.0, 1: 0.5},
        ),
        # sample weights, validation arrays at their own batch size, steps_per_epoch
        # setting the batch size (and carrying the iterator over into epoch 2).
        dict(
            epochs=2,
            shuffle=False,
            steps_per_epoch=2,
            validation_batch_size=4,
            sample_weight=np.linspace(0.5, 1.5, 10),
        ),
    ],
)
def test_task_models_train_on_arrays_as_keras_own_array_pipeline_does(datasets_dir, arguments):
    features, labels = ids_and_labels(datasets_dir, 10)
    if "validation_split" not in arguments:
        arguments = dict(
            arguments,
            validation_data=({k: v[:6] for k, v in features.items()}, labels[:6], np.full(6, 2.0)),
        )
    ours, keras_own = classifier(preprocessor=False), classifier(preprocessor=False)
    for model in (ours, keras_own):
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=["accuracy"],
        )
    history = ours.fit(features, labels, verbose=0, **arguments).history
    # keras.Model's own fit on the same model class: Keras' array pipeline.
    expected = keras.Model.fit(keras_own, features, labels, verbose=0, **arguments).history
    assert_same_weights(ours, keras_own)
    assert history.keys() == expected.keys() and "val_loss" in history
    for name in history:
        np.testing.assert_allclose(history[name], expected[name], rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(
        ours.evaluate(features, labels, batch_size=4, verbose=0),
        keras.Model.evaluate(keras_own, features, labels, batch_size=4, verbose=0),
        rtol=1e-5,
    )
    predicted = ours.predict(features, batch_size=4, verbose=0)  # order and the last 2 rows
    np.testing.assert_allclose(
        predicted, keras.Model.predict(keras_own, features, batch_size=4, verbose=0), atol=1e-6
    )
    assert predicted.shape == (10, 2)


def test_task_model_fit_evaluate_predict_hand_keras_pipelines_without_it(datasets_dir, monkeypatch):
    """What Keras is handed to iterate, text and arrays alike, validation and
    the evaluation inside fit included, is a dataset without autotuning."""
    texts, labels = reviews(datasets_dir, count=8)
    model = classifier()
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    seen = []

    def spy(name):
        keras_own = getattr(keras.Model, name)

        @functools.wraps(keras_own)
        def recorded(self, *args, **kwargs):
            bound = inspect.signature(keras_own).bind(self, *args, **kwargs)
            for argument in ("x", "validation_data"):
                value = bound.arguments.get(argument)
                if value is not None:
                    seen.append(
                        (
                            name,
                            argument,
                            isinstance(value, tf.data.Dataset)
                            and value.options().autotune.enabled is False,
                        )
                    )
            return keras_own(self, *args, **kwargs)

        monkeypatch.setattr(keras.Model, name, recorded)

    for name in ("fit", "evaluate", "predict"):
        spy(name)
    model.fit(texts, labels, batch_size=4, epochs=1, verbose=0, validation_data=(texts, labels))
    model.fit(texts, labels, batch_size=4, epochs=1, verbose=0, validation_split=0.5)
    model.evaluate(texts, labels, batch_size=4, verbose=0)
    model.predict(model.preprocessor.encode(texts), batch_size=4, verbose=0)
    model.predict(texts, batch_size=4, verbose=0)
    assert seen == [
        ("fit", "x", True),
        ("fit", "validation_data", True),
        ("evaluate", "x", True),
        ("fit", "x", True),
        ("fit", "validation_data", True),
        ("evaluate", "x", True),
        ("evaluate", "x", True),
        ("predict", "x", True),
        ("predict", "x", True),
    ]


def test_finetuning_epochs_read_without_it():
    data = {
        "features": {
            "input_ids": np.ones((6, 8), np.int32),
            "input_mask": np.ones((6, 8), np.int32),
            "segment_ids": np.zeros((6, 8), np.int32),
        },
        "targets": np.arange(6),
        "weights": None,
    }
    batches = epoch_batches(np.full([6], 8), batch_size=4, seed=0, epoch=0)
    dataset = ordered_batches(data["features"], data["targets"], batches=batches)
    assert dataset.options().autotune.enabled is False
    assert sorted(np.concatenate([t for _, t in dataset.as_numpy_iterator()])) == list(range(6))
