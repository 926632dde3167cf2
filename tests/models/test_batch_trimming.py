"""Cutting a batch's padding in `fit` / `evaluate` / `predict`: the same
training as at the full width (Keras' own step on untouched batches is the
reference), and the cut only where it is safe."""

import os

import keras
import numpy as np
import tensorflow as tf
from task_models import assert_same_weights, classifier, reviews, tiny_encoder

from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets.tagging import read_conll
from keras_bert.models.batch_trimming import trim_features_batch
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor


def full_width(model):
    """`model` with Keras' own steps on the batches as they come."""
    model.trimmed = lambda data: data
    return model


def features(mask_lengths, width=64):
    mask = (np.arange(width)[None, :] < np.asarray(mask_lengths)[:, None]).astype(np.int32)
    return {"input_ids": mask * 7, "input_mask": mask, "segment_ids": np.zeros_like(mask)}


def test_rows_are_cut_to_the_longest_rounded_up_to_eight():
    x = {k: tf.constant(v) for k, v in features([3, 11, 5]).items()}
    labels = tf.ones([3, 64], tf.int32)
    cut_x, cut_y, cut_w = trim_features_batch(x, labels, labels, token_level_targets=True)
    assert {name: t.shape for name, t in cut_x.items()} == {name: (3, 16) for name in x}
    assert cut_y.shape == cut_w.shape == (3, 16)
    _, kept_y, _ = trim_features_batch(x, labels, None)  # per-example targets: not cut
    assert kept_y.shape == (3, 64)


def test_unknown_widths_and_other_inputs_are_left_alone():
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def width_of_variable_batch(mask):
        x, _, _ = trim_features_batch({"input_mask": mask}, mask, token_level_targets=True)
        return tf.shape(x["input_mask"])[1]

    assert int(width_of_variable_batch(tf.ones([2, 40], tf.int32))) == 40
    ids = tf.ones([2, 64], tf.int32)
    assert trim_features_batch(ids)[0] is ids  # not a features dict


def test_classifier_trains_evaluates_and_predicts_as_at_full_width(datasets_dir):
    texts, labels = reviews(datasets_dir)  # 5-30 pieces, padded to 64
    models = []
    for model in (classifier(seq_length=64), full_width(classifier(seq_length=64))):
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        history = model.fit(
            texts,
            labels,
            batch_size=4,
            epochs=2,
            shuffle=False,
            verbose=0,
            validation_data=(texts[:8], labels[:8]),
        )
        models.append((model, history.history))
    (cut, cut_history), (full, full_history) = models
    assert_same_weights(cut, full)
    for name, values in full_history.items():
        np.testing.assert_allclose(cut_history[name], values, rtol=1e-5, err_msg=name)
    ids = cut.preprocessor.encode(texts)
    np.testing.assert_allclose(cut.predict(ids, verbose=0), full.predict(ids, verbose=0), atol=1e-6)


def test_tagger_cuts_its_labels_and_weights_with_the_inputs(datasets_dir):
    tweets = read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll"))
    words, tags = tweets.words[:12], tweets.tags[:12]
    names = sorted({tag for row in tweets.tags for tag in row})
    models = []
    for cut in (True, False):
        model = BertTokenClassifier(
            tiny_encoder(),
            len(names),
            dropout=0.0,
            label_names=names,
            preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=64),
        )
        model = model if cut else full_width(model)
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        model.fit(words, tags, batch_size=4, epochs=2, shuffle=False, verbose=0)
        models.append(model)
    assert_same_weights(*models)


def test_xla_keeps_the_full_width():
    model = classifier(seq_length=64, preprocessor=False)
    model.compile(jit_compile=True)
    data = ({k: tf.constant(v) for k, v in features([3, 5]).items()}, tf.constant([0, 1]))
    assert model.trimmed(data) is data
