"""The task models: outputs equal the paper's heads computed by hand from the
encoder's outputs. (Saving, reloading and export: test_tasks.py's harness.)"""

import numpy as np
import pytest

from keras_bert import BertEncoder
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.feature_extractor import BertFeatureExtractor
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier

from harness import small_config

CONFIG = small_config(num_hidden_layers=4, max_position_embeddings=32)


@pytest.fixture
def inputs(task_inputs):
    return task_inputs


def test_classifier_is_one_dense_layer_on_pooled_output(inputs):
    encoder = BertEncoder(CONFIG)
    model = BertClassifier(encoder, num_classes=3, label_names=["neg", "neutral", "pos"])
    logits = model(inputs).numpy()
    kernel, bias = model.get_layer("classifier_output").get_weights()
    pooled = encoder(inputs)["pooled_output"].numpy()
    np.testing.assert_allclose(logits, pooled @ kernel + bias, rtol=1e-5, atol=1e-6)
    assert logits.shape == (2, 3)
    assert model.get_config()["label_names"] == ["neg", "neutral", "pos"]
    # Dropout is active in training only.
    assert not np.allclose(model(inputs, training=True).numpy(), logits)


def test_regressor_has_one_output_and_no_labels(inputs):
    model = BertClassifier(BertEncoder(CONFIG), num_classes=1)
    assert model(inputs).shape == (2, 1)
    assert model.get_config()["label_names"] is None
    with pytest.raises(ValueError, match="label_names"):
        BertClassifier(BertEncoder(CONFIG), num_classes=2, label_names=["a", "b", "c"])


def test_token_classifier_labels_every_token(inputs):
    encoder = BertEncoder(CONFIG)
    model = BertTokenClassifier(encoder, num_labels=5, label_names=list("OABCD"))
    logits = model(inputs).numpy()
    kernel, bias = model.get_layer("tagger_output").get_weights()
    sequence = encoder(inputs)["sequence_output"].numpy()
    np.testing.assert_allclose(logits, sequence @ kernel + bias, rtol=1e-5, atol=1e-6)
    assert model.label_names == list("OABCD") and model.num_labels == 5


def test_span_extractor_scores_start_and_end_vectors(inputs):
    encoder = BertEncoder(CONFIG)
    model = BertSpanExtractor(encoder, max_answer_length=17)
    outputs = model(inputs)
    kernel, bias = model.get_layer("span_head").get_weights()  # (H, 2): S and E
    sequence = encoder(inputs)["sequence_output"].numpy()
    np.testing.assert_allclose(
        outputs["start_logits"].numpy(), sequence @ kernel[:, 0] + bias[0], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        outputs["end_logits"].numpy(), sequence @ kernel[:, 1] + bias[1], rtol=1e-5, atol=1e-6
    )
    assert model.get_config()["max_answer_length"] == 17


def test_feature_extractor_concatenates_top_layers_and_mean_pools(inputs):
    encoder = BertEncoder(CONFIG)
    model = BertFeatureExtractor(encoder, num_top_layers=4)
    outputs = model(inputs)
    layers = [x.numpy() for x in encoder(inputs)["encoder_outputs"]]
    np.testing.assert_allclose(
        outputs["token_features"].numpy(), np.concatenate(layers, axis=-1), rtol=1e-5, atol=1e-6
    )
    mask = inputs["input_mask"][..., None]
    mean = (layers[-1] * mask).sum(axis=1) / mask.sum(axis=1)
    expected = mean / np.linalg.norm(mean, axis=-1, keepdims=True)
    np.testing.assert_allclose(
        outputs["sentence_embedding"].numpy(), expected, rtol=1e-5, atol=1e-6
    )
    assert not model.trainable_weights
    assert BertFeatureExtractor(BertEncoder(CONFIG), 2)(inputs)["token_features"].shape == (
        2,
        8,
        32,
    )
    with pytest.raises(ValueError, match="4 layers"):
        BertFeatureExtractor(BertEncoder(CONFIG), num_top_layers=5)
