"""Pipelines without tf.data's autotuning thread (`keras_bert.dataset_options`),
whose deletion could hold up the end of `fit` by tens of seconds: Keras' own
array pipelines while a task model's fit / evaluate / predict run, the
fine-tuning command's epochs."""

import keras
import numpy as np
import tensorflow as tf
from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter

from keras_bert.dataset_options import keras_arrays_without_autotune, without_autotune
from keras_bert.training.finetuning_data import epoch_dataset

from task_models import classifier, reviews


def array_pipeline_autotunes():
    """Whether Keras would build its pipeline over arrays with autotuning now."""
    adapter = ArrayDataAdapter(np.zeros((8, 3), np.float32), batch_size=4)
    return adapter.get_tf_dataset().options().autotune.enabled is not False


def test_without_autotune_keeps_the_elements():
    dataset = tf.data.Dataset.range(10).map(lambda i: i * 2, num_parallel_calls=tf.data.AUTOTUNE)
    quiet = without_autotune(dataset.prefetch(tf.data.AUTOTUNE))
    assert quiet.options().autotune.enabled is False
    assert list(quiet.as_numpy_iterator()) == list(range(0, 20, 2))


def test_keras_array_pipelines_only_inside_the_context_even_nested():
    assert array_pipeline_autotunes()
    with keras_arrays_without_autotune():
        with keras_arrays_without_autotune():  # evaluate inside fit
            assert not array_pipeline_autotunes()
        assert not array_pipeline_autotunes()
    assert array_pipeline_autotunes()


def test_task_model_fit_evaluate_predict_build_their_pipelines_without_it(datasets_dir):
    texts, labels = reviews(datasets_dir, count=8)
    model = classifier()
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    seen = []

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.append(("fit", array_pipeline_autotunes()))

        def on_test_begin(self, logs=None):
            seen.append(("evaluate", array_pipeline_autotunes()))

        def on_predict_begin(self, logs=None):
            seen.append(("predict", array_pipeline_autotunes()))

    model.fit(texts, labels, batch_size=4, epochs=1, verbose=0, callbacks=[Probe()],
              validation_data=(texts, labels))
    model.evaluate(texts, labels, batch_size=4, verbose=0, callbacks=[Probe()])
    features = model.preprocessor.encode(texts)
    model.predict(features, batch_size=4, verbose=0, callbacks=[Probe()])
    assert seen == [("fit", False), ("evaluate", False), ("evaluate", False),
                    ("predict", False)]
    assert array_pipeline_autotunes()  # and Keras as it was afterwards


def test_finetuning_epochs_read_without_it():
    data = {"features": {"input_ids": np.ones((6, 8), np.int32),
                         "input_mask": np.ones((6, 8), np.int32),
                         "segment_ids": np.zeros((6, 8), np.int32)},
            "targets": np.arange(6), "weights": None}
    dataset = epoch_dataset(data, batch_size=4, seed=0, epoch=0, seq_length=8)
    assert dataset.options().autotune.enabled is False
    assert sorted(np.concatenate([t for _, t in dataset.as_numpy_iterator()])) == list(range(6))
