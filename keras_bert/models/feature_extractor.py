"""BertFeatureExtractor: the paper's feature-based setting and sentence embeddings.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
K = number of top layers concatenated, F = feature size (H, or K*H concatenated).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras

from keras_bert.config_fields import keep_config_fields
from keras_bert.dataset_options import are_arrays, array_batches, default_batch_size
from keras_bert.layers.pooling import WeightedLayerSum
from keras_bert.layers.sentence_pooling import L2Normalize, SentencePooling
from keras_bert.models.classifier import deserialize_encoder, encoder_inputs
from keras_bert.models.text_task import TextTask, deserialize_preprocessor

if TYPE_CHECKING:
    import tensorflow as tf

    from keras_bert.models.encoder import BertEncoder
    from keras_bert.preprocessing.preprocessor import BertPreprocessor


# The paper's feature-based choices (Table 7), each token's features from a
# frozen encoder: the embedding layer's output, a layer, or a mix of the top layers.
# What `BertFeatureExtractor.predict` returns: one output alone, or both in a dict.
PREDICT_OUTPUTS = ("both", "sentence_embedding", "token_features")

FEATURE_CHOICES = (
    "embeddings",
    "second_to_last_hidden",
    "last_hidden",
    "weighted_sum_last_four",
    "concat_last_four",
    "weighted_sum_all",
)


class FrozenTokenFeatures(keras.layers.Layer):
    """The encoder's inputs -> the `feature` choice (one of FEATURE_CHOICES) of
    each token, (B, T, F), from the encoder in inference mode: features are
    extracted, not trained, so no dropout even when the model around trains
    (`call` takes no `training`, so a functional model passes none down). The
    weighted sums own their (trainable) layer weights; the encoder is frozen."""

    def __init__(self, encoder: BertEncoder, feature: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if feature not in FEATURE_CHOICES:
            raise ValueError(f"feature must be one of {FEATURE_CHOICES}, got {feature!r}")
        layers = encoder.config.num_hidden_layers
        needed = {
            "second_to_last_hidden": 2,
            "weighted_sum_last_four": 4,
            "concat_last_four": 4,
        }.get(feature, 1)
        if layers < needed:
            raise ValueError(f"feature {feature!r} needs {needed} layers; the encoder has {layers}")
        encoder.trainable = False
        self.encoder = encoder
        self.feature = feature
        self.mix = None
        if feature.startswith("weighted_sum"):
            self.mix = WeightedLayerSum(name=f"{feature}_mix")

    def build(self, input_shape: dict) -> None:
        if self.mix is not None:
            mixed = (
                4
                if self.feature == "weighted_sum_last_four"
                else (self.encoder.config.num_hidden_layers)
            )
            self.mix.build([(None, None, self.encoder.config.hidden_size)] * mixed)

    def call(self, inputs: dict) -> tf.Tensor:
        return self.combine(self.frozen(inputs))

    def frozen(self, inputs: dict) -> list[tf.Tensor]:
        """The frozen encoder's part: the layer outputs the choice reads, each
        (B, T, H). They do not change while the tagger trains, so they can be
        computed once and cached (`BertTokenClassifier.feature_head`)."""
        if self.feature == "embeddings":
            hidden, _ = self.encoder.embed(
                inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"], training=False
            )
            return [hidden]  # (B, T, H)
        layers = self.encoder(inputs, training=False)["encoder_outputs"]  # L x (B, T, H)
        if self.feature == "second_to_last_hidden":
            return [layers[-2]]
        if self.feature == "last_hidden":
            return [layers[-1]]
        if self.feature in ("concat_last_four", "weighted_sum_last_four"):
            return list(layers[-4:])
        return list(layers)

    def combine(self, frozen: list[tf.Tensor]) -> tf.Tensor:
        """The outputs of `frozen` -> the features (B, T, F); the weighted sums'
        layer weights are the only trained part."""
        if self.feature == "concat_last_four":
            return keras.ops.concatenate(frozen, axis=-1)  # (B, T, 4H)
        if self.mix is not None:
            return self.mix(frozen)  # (B, T, H)
        return frozen[0]

    @property
    def num_frozen(self) -> int:
        """How many tensors `frozen` returns."""
        return {
            "embeddings": 1,
            "second_to_last_hidden": 1,
            "last_hidden": 1,
            "weighted_sum_all": self.encoder.config.num_hidden_layers,
        }.get(self.feature, 4)

    def compute_output_shape(self, input_shape: dict) -> tuple:
        width = self.encoder.config.hidden_size * (4 if self.feature == "concat_last_four" else 1)
        return tuple(input_shape["input_ids"]) + (width,)


@keras.saving.register_keras_serializable(package="keras_bert")
class BertFeatureExtractor(TextTask, keras.Model):
    """Frozen-encoder features.

    `token_features` concatenates the top `num_top_layers` layers' outputs
    for each token (the paper's best feature-based CoNLL-2003 setting, 4 layers:
    96.1 dev F1 against 96.4 fine-tuned); `sentence_embedding` is the
    mean of the last layer over real tokens, L2-normalised (cosine similarity
    is then a dot product): `BertSentenceEncoder(encoder, "mean", normalize=True)`'s
    embedding.

    Args:
      encoder: a `BertEncoder`; its weights are not trained through this model.
      num_top_layers: how many of the last layers to concatenate (4 in the paper).
      feature: instead, one of the paper's choices (`FEATURE_CHOICES`, see
        `FrozenTokenFeatures`); `BertTokenClassifier(feature=...)` trains a
        tagger on them.
      preprocessor: optional `BertPreprocessor`; with it `predict` takes text
        (one segment or pairs) and returns the same outputs as NumPy.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Outputs: `token_features` (B, T, K*H) (or (B, T, F) of `feature`),
    `sentence_embedding` (B, H) float32. `predict(x, output=...)` computes and returns
    one of them alone (an array), or both (a dict, the default).
    """

    def __init__(
        self,
        encoder: BertEncoder | dict,
        num_top_layers: int = 4,
        preprocessor: BertPreprocessor | dict | None = None,
        feature: str | None = None,
        **kwargs: Any,
    ) -> None:
        encoder = deserialize_encoder(encoder)
        preprocessor = deserialize_preprocessor(preprocessor)
        num_layers = encoder.config.num_hidden_layers
        if not 1 <= num_top_layers <= num_layers:
            raise ValueError(
                f"num_top_layers={num_top_layers}: the encoder has {num_layers} layers"
            )

        # === Layers ===
        concat = keras.layers.Concatenate(axis=-1, name="top_layers")
        # BertSentenceEncoder's mean pooling and normalisation, float32 out.
        pool = SentencePooling(("mean",), name="mean_pool")
        normalize = L2Normalize(dtype="float32", name="normalize")

        # === Functional Model ===
        inputs = encoder_inputs(encoder)
        outputs = encoder(inputs)
        top = outputs["encoder_outputs"][-num_top_layers:]  # K x (B, T, H)
        token_features = concat(top) if num_top_layers > 1 else top[0]  # (B, T, K*H)
        if feature is not None:
            token_features = FrozenTokenFeatures(encoder, feature, name="features")(
                inputs
            )  # (B, T, F)
        sentence = normalize(pool(outputs["sequence_output"], inputs["input_mask"]))  # (B, H)
        outputs = {"token_features": token_features, "sentence_embedding": sentence}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.__dict__["_output_tensors"] = outputs  # untracked: for `predict(output=...)`
        encoder.trainable = False

        # === Config ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        keep_config_fields(self, locals())

    outputs_logits = False  # features, not scores

    def predict(
        self, x: Any, batch_size: int | None = None, *args: Any, output: str = "both", **kwargs: Any
    ) -> Any:
        """Keras' predict on ids or text; `output`: "sentence_embedding" (N, H),
        "token_features" (N, T, F), or "both" ({name: array}). One output alone
        is all that runs: sentence embeddings never build the (N, T, K*H)
        token features."""
        if output not in PREDICT_OUTPUTS:
            raise ValueError(f"output must be one of {PREDICT_OUTPUTS}, got {output!r}")
        if output == "both":
            return super().predict(x, batch_size, *args, **kwargs)
        # The model of that output alone, its own `predict` (nothing on this
        # model changes between calls: no compiled function to swap).
        features = self.preprocess_inputs(x, None, None)[0]
        if are_arrays(features):
            features = array_batches(
                features, batch_size=default_batch_size(features, batch_size, kwargs.get("steps"))
            )
        return self._output_model(output).predict(features, *args, **kwargs)

    def _output_model(self, name: str) -> keras.Model:
        """This model with the output `name` alone (its layers, shared)."""
        models = self.__dict__.setdefault("_output_models_by_name", {})
        if name not in models:
            with self.distribute_strategy.scope():
                models[name] = keras.Model(self.inputs, self.__dict__["_output_tensors"][name])
        return models[name]

    # === Config ===

    # Kept from the constructor's arguments (`keep_config_fields`).
    num_top_layers: int
    feature: str | None
    config_fields = ("num_top_layers", "feature", "name")
