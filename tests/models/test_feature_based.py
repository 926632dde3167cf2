"""The paper's feature-based choices (Table 7) equal the encoder's outputs sliced by
hand; BiLSTM heads on the tagger and span extractor skip padding and save / load."""

import keras
import numpy as np
import pytest

from keras_bert import BertEncoder
from keras_bert.models.feature_extractor import FEATURE_CHOICES, BertFeatureExtractor
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier

from harness import small_config

CONFIG = small_config(num_hidden_layers=5, max_position_embeddings=32)


@pytest.fixture
def inputs(task_inputs):
    return task_inputs


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def _by_hand(encoder, inputs, feature, mix_weights):
    layers = [np.asarray(h) for h in encoder(inputs, training=False)["encoder_outputs"]]
    if feature == "embeddings":
        hidden, _ = encoder.embed(
            inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"], training=False
        )
        return np.asarray(hidden)
    if feature == "second_to_last_hidden":
        return layers[-2]
    if feature == "last_hidden":
        return layers[-1]
    if feature == "concat_last_four":
        return np.concatenate(layers[-4:], axis=-1)
    chosen = layers[-4:] if feature == "weighted_sum_last_four" else layers
    return sum(w * h for w, h in zip(_softmax(mix_weights), chosen))


@pytest.mark.parametrize("feature", FEATURE_CHOICES)
def test_features_equal_encoder_outputs_sliced_by_hand(inputs, feature):
    encoder = BertEncoder(CONFIG)
    extractor = BertFeatureExtractor(encoder, feature=feature)
    mix_weights = None
    if feature.startswith("weighted_sum"):
        mix = extractor.get_layer("features").mix
        mix_weights = np.linspace(-1.0, 1.0, mix.layer_weights.shape[0]).astype(np.float32)
        mix.layer_weights.assign(mix_weights)
    got = extractor(inputs)["token_features"]
    np.testing.assert_allclose(
        got, _by_hand(encoder, inputs, feature, mix_weights), rtol=1e-5, atol=1e-5
    )
    # No dropout in extracted features, even in a training call.
    np.testing.assert_allclose(extractor(inputs, training=True)["token_features"], got, atol=1e-6)


def test_bad_feature_choice_is_named(inputs):
    with pytest.raises(ValueError, match="feature must be one of"):
        BertFeatureExtractor(BertEncoder(CONFIG), feature="last_three")
    small = BertEncoder(small_config(max_position_embeddings=512))  # 2 layers
    with pytest.raises(ValueError, match="needs 4 layers"):
        BertTokenClassifier(small, num_labels=3, feature="concat_last_four")


def test_feature_based_tagger_trains_only_its_head(inputs, tmp_path):
    encoder = BertEncoder(CONFIG)
    tagger = BertTokenClassifier(
        encoder, num_labels=3, head="bilstm", head_layers=2, feature="concat_last_four"
    )
    assert not any(w is v for w in tagger.trainable_weights for v in encoder.weights)
    # Two BiLSTMs (kernel, recurrent kernel, bias per direction) and the output layer.
    assert len(tagger.trainable_weights) == 2 * 2 * 3 + 2
    before = [np.array(w) for w in encoder.weights]
    tagger.compile(optimizer=keras.optimizers.Adam(1e-2), loss=tagger.default_loss())
    tagger.fit(
        inputs, np.ones((2, 8), np.int32), sample_weight=inputs["input_mask"], epochs=2, verbose=0
    )
    for old, new in zip(before, encoder.weights):
        np.testing.assert_array_equal(old, np.asarray(new))
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    loaded = keras.models.load_model(path, compile=False)
    assert loaded.get_config()["feature"] == "concat_last_four"
    np.testing.assert_allclose(loaded(inputs), tagger(inputs), atol=1e-5)


def test_bilstm_heads_ignore_padding_and_round_trip(inputs, tmp_path):
    padded = dict(inputs, input_ids=np.where(inputs["input_mask"] == 1, inputs["input_ids"], 7))
    for model, output in (
        (
            BertTokenClassifier(BertEncoder(CONFIG), num_labels=3, head="bilstm"),
            lambda out: np.asarray(out),
        ),
        (
            BertSpanExtractor(BertEncoder(CONFIG), head="bilstm"),
            lambda out: np.asarray(out["start_logits"])[..., None],
        ),
    ):
        logits = output(model(inputs))
        real = inputs["input_mask"] == 1
        np.testing.assert_allclose(output(model(padded))[real], logits[real], atol=1e-5)
        path = str(tmp_path / "model.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        assert loaded.get_config()["head"] == "bilstm"
        np.testing.assert_allclose(output(loaded(inputs)), logits, atol=1e-5)
    with pytest.raises(ValueError, match="head must be one of"):
        BertSpanExtractor(BertEncoder(CONFIG), head="crf")


def _feature_tagger(feature):
    tagger = BertTokenClassifier(
        BertEncoder(CONFIG), num_labels=3, head="bilstm", head_layers=2, feature=feature
    )
    mix = tagger.get_layer("features").mix
    if mix is not None:  # unequal layer weights, so a wrong layer order shows
        mix.layer_weights.assign(np.linspace(-1.0, 1.0, mix.layer_weights.shape[0]))
    return tagger


@pytest.mark.parametrize("feature", FEATURE_CHOICES)
def test_cached_features_give_the_in_graph_features_and_logits(inputs, feature):
    tagger = _feature_tagger(feature)
    frozen = tagger.frozen_features(inputs, batch_size=1)  # two batches, concatenated
    features = tagger.get_layer("features")
    np.testing.assert_allclose(features.combine(frozen), features(inputs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        tagger.feature_head()([*frozen, inputs["input_mask"]]), tagger(inputs), rtol=1e-5, atol=1e-5
    )


def test_feature_head_trains_the_taggers_own_head_on_trimmed_batches(inputs):
    wide = {name: np.pad(value, ((0, 0), (0, 16))) for name, value in inputs.items()}  # (2, 24)
    tagger = _feature_tagger("weighted_sum_all")
    data = tagger.frozen_dataset(
        wide, np.ones((2, 24), np.int32), wide["input_mask"], batch_size=2, seed=0
    )
    (*frozen, mask), targets, weights = next(iter(data))
    # 7 real pieces at most: cut to 8 columns (a multiple of 8), as `fit` on text cuts.
    assert [t.shape for t in (*frozen, mask, targets, weights)] == [(2, 8, 16)] * 5 + [(2, 8)] * 3
    encoder_before = [np.array(w) for w in tagger.encoder.weights]
    head_before = [np.array(w) for w in tagger.trainable_weights]
    head = tagger.feature_head()
    head.compile(optimizer=keras.optimizers.Adam(1e-2), loss=tagger.default_loss())
    head.fit(data, epochs=2, shuffle=False, verbose=0)
    # The tagger's own BiLSTMs, output layer and layer mix moved; its encoder did not.
    assert all(
        np.abs(old - np.asarray(new)).max() > 0
        for old, new in zip(head_before, tagger.trainable_weights)
    )
    for old, new in zip(encoder_before, tagger.encoder.weights):
        np.testing.assert_array_equal(old, np.asarray(new))


def test_feature_head_needs_a_feature_based_tagger():
    with pytest.raises(ValueError, match="feature_head needs a feature-based tagger"):
        BertTokenClassifier(BertEncoder(CONFIG), num_labels=3).feature_head()
