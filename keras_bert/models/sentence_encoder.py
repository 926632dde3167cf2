"""BertSentenceEncoder: sentence embeddings, as a sentence-transformers model computes them.

    model = BertSentenceEncoder.from_pretrained("path/to/all-MiniLM-L6-v2")
    embeddings = model.predict(["a sentence", "another"])      # (N, D) float32
    model.similarity(["a query"], ["doc one", "doc two"])      # (1, 2) cosines
    model.compile()                                            # in-batch negatives
    model.fit((anchors, positives), epochs=1, batch_size=64)   # or + negatives, or a dataset
    model.compile(loss="cosent"); model.fit((texts_a, texts_b), scores)

The model is the encoder, the pooling (`keras_bert.layers.sentence_pooling`:
every mode sentence-transformers has), optional Dense layers and optional L2
normalisation, with a preprocessor that makes it take text. The training
losses live in `keras_bert.models.contrastive`.

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
D = embedding size.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.checkpoints import caches
from keras_bert.checkpoints.sentence_transformers import (
    SentenceTransformerFolder,
    is_sentence_transformer,
    read_sentence_transformer,
    vocabulary_of,
)
from keras_bert.checkpoints.source import PretrainedSource, resolve
from keras_bert.layers.sentence_pooling import L2Normalize, SentencePooling, check_modes
from keras_bert.models import contrastive
from keras_bert.models.batch_trimming import trim_features_batch
from keras_bert.models.classifier import deserialize_encoder, encoder_inputs
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.text_task import DEFAULT_LEARNING_RATE, TextTask, deserialize_preprocessor
from keras_bert.models.update_step import UpdateStep
from keras_bert.preprocessing.preprocessor import BertPreprocessor, as_text_batch

COLUMNS = contrastive.COLUMNS


@keras.saving.register_keras_serializable(package="keras_bert")
class BertSentenceEncoder(TextTask, keras.Model):
    """Text -> one embedding per text, as sentence-transformers' `encode`.

    Args:
      encoder: a `BertEncoder`.
      pooling: one pooling mode or several (concatenated): "cls", "max",
        "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken".
      dense: Dense layers after the pooling, each {"units", "activation",
        "use_bias"[, "residual"]} (sentence-transformers' Dense modules;
        `residual`, its use_residual: the layer's input added to its output,
        through a bias-free projection `dense_{i}_residual` where the sizes differ).
      normalize: L2-normalise the embeddings (the Normalize module).
      lowercase_text: lowercase the text before the tokenizer
        (sentence_bert_config.json's do_lower_case; a no-op for an uncased
        tokenizer, which lowercases anyway).
      preprocessor: a `BertPreprocessor`; with it the model takes text.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Output: the embeddings (B, D), float32.

    Training (`compile`, then `fit`) reads rows of texts: (anchors,
    positives) or (anchors, positives, negatives) as columns, a list of such
    tuples, or a `tf.data.Dataset` of such string batches; with CoSENT, scored
    pairs `fit((texts_a, texts_b), scores)` or a dataset of ((a, b), score).
    Validation rows go in the same forms: `validation_data=(anchors,
    positives)`, `((texts_a, texts_b), scores)` or a dataset.
    """

    def __init__(
        self,
        encoder: BertEncoder | dict,
        pooling: str | Sequence[str] = "mean",
        dense: Sequence[Mapping[str, Any]] = (),
        normalize: bool = False,
        lowercase_text: bool = False,
        preprocessor: BertPreprocessor | dict | None = None,
        **kwargs: Any,
    ) -> None:
        encoder = deserialize_encoder(encoder)
        preprocessor = deserialize_preprocessor(preprocessor)
        pooling = check_modes(pooling)
        dense = [_dense_settings(layer, i) for i, layer in enumerate(dense)]

        # === Layers ===
        pool = SentencePooling(pooling, name="pooling")
        dense_layers = [
            keras.layers.Dense(
                layer["units"],
                activation=layer["activation"],
                use_bias=layer["use_bias"],
                name=f"dense_{i}",
            )
            for i, layer in enumerate(dense)
        ]
        # use_residual: the input added, projected (no bias) where the sizes differ.
        sizes = [len(pooling) * encoder.config.hidden_size] + [layer["units"] for layer in dense]
        residual_projections = [
            keras.layers.Dense(layer["units"], use_bias=False, name=f"dense_{i}_residual")
            if layer.get("residual") and sizes[i] != layer["units"]
            else None
            for i, layer in enumerate(dense)
        ]
        residual_sums = [
            keras.layers.Add(name=f"dense_{i}_plus_input") if layer.get("residual") else None
            for i, layer in enumerate(dense)
        ]
        # Float32 out under mixed precision: cosines of float16 vectors lose
        # the digits that rank near neighbours.
        to_float32 = keras.layers.Activation("linear", dtype="float32", name="embedding")
        normalize_layer = L2Normalize(dtype="float32", name="normalize") if normalize else None

        # === Functional Model ===
        inputs = encoder_inputs(encoder)
        sequence = encoder(inputs)["sequence_output"]  # (B, T, H)
        embedding = pool(sequence, inputs["input_mask"])  # (B, M*H)
        for layer, projection, plus in zip(dense_layers, residual_projections, residual_sums):
            output = layer(embedding)  # (B, D)
            if plus is not None:
                output = plus([output, embedding if projection is None else projection(embedding)])
            embedding = output
        embedding = to_float32(embedding)
        if normalize_layer is not None:
            embedding = normalize_layer(embedding)
        super().__init__(inputs=inputs, outputs=embedding, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.pooling = pooling
        self.dense = dense
        self.normalize = bool(normalize)
        self.lowercase_text = bool(lowercase_text)
        self.preprocessor = preprocessor
        self.dense_layers = dense_layers
        self.residual_projections = residual_projections  # per Dense: a layer or None
        self.contrastive_loss = contrastive.MultipleNegativesRankingLoss()
        self.loss_tracker = keras.metrics.Mean(name="loss")

    # A plain BERT checkpoint: sentence-transformers reads up to 512 positions.
    default_seq_length = 512
    text_forms = (
        "texts, text columns (anchors, positives[, negatives]) or rows of them, "
        "{'anchor': ..., 'positive': ...[, 'negative': ...]}"
    )
    outputs_logits = False

    # === Loading ===

    @classmethod
    def from_pretrained(
        cls,
        path: str | PretrainedSource,
        *,
        seq_length: int | None = None,
        lowercase: bool | None = None,
        vocab_file: str | None = None,
        dtype: str | keras.DTypePolicy | None = None,
        **model_kwargs: Any,
    ) -> BertSentenceEncoder:
        """A sentence-transformers folder (its Transformer, Pooling, Dense and
        Normalize modules, max_seq_length and do_lower_case) or its name in
        the local HuggingFace cache (`ORG/NAME`, never the network), or anything
        `TextTask.from_pretrained` reads: a plain BERT checkpoint gets mean
        pooling (as sentence-transformers gives it), a `.keras` file of this
        model comes back whole. `model_kwargs` override the folder's settings
        (`pooling=`, `normalize=`)."""
        cls.check_pretrained_keywords(model_kwargs)
        if not isinstance(path, PretrainedSource):
            path = _local_path(path)
        if isinstance(path, PretrainedSource) or not is_sentence_transformer(path):
            return super().from_pretrained(
                path,
                seq_length=seq_length,
                lowercase=lowercase,
                vocab_file=vocab_file,
                dtype=dtype,
                **model_kwargs,
            )
        folder = read_sentence_transformer(path)
        source = resolve(folder.transformer)
        encoder = BertEncoder.from_pretrained(source, dtype=dtype)
        seq_length = seq_length or folder.max_seq_length
        vocabulary = vocab_file or vocabulary_of(folder.transformer)  # a file, or the tokens
        preprocessor = cls._preprocessor_for(source, encoder, seq_length, lowercase, vocabulary)
        return cls.from_encoder(encoder, preprocessor, folder, **model_kwargs)

    @classmethod
    def from_encoder(
        cls,
        encoder: BertEncoder,
        preprocessor: BertPreprocessor | None = None,
        folder: SentenceTransformerFolder | None = None,
        **model_kwargs: Any,
    ) -> BertSentenceEncoder:
        """This model around `encoder` (already loaded, e.g. at a training
        run's precision) with the modules of a sentence-transformers folder
        (`sentence_transformer_folder`): its pooling, Dense layers with their
        weights, Normalize and do_lower_case; without one, mean pooling.
        `model_kwargs` override the folder's settings."""
        if folder is None:
            return cls(encoder, preprocessor=preprocessor, **model_kwargs)
        settings = {
            "pooling": folder.pooling_modes,
            "normalize": folder.normalize,
            "lowercase_text": folder.lowercase_text,
            "dense": [
                {
                    "units": int(module.kernel.shape[1]),
                    "activation": module.activation,
                    "use_bias": module.bias is not None,
                    **({"residual": True} if module.residual else {}),
                }
                for module in folder.dense
            ],
        }
        model = cls(encoder, preprocessor=preprocessor, **{**settings, **model_kwargs})
        if "dense" not in model_kwargs:
            for layer, projection, module in zip(
                model.dense_layers, model.residual_projections, folder.dense
            ):
                layer.set_weights(
                    [module.kernel] + ([module.bias] if module.bias is not None else [])
                )
                if projection is not None:
                    projection.set_weights([module.residual_kernel])
        return model

    # === Text in ===

    def texts(self, x: Any) -> Any:
        """`do_lower_case` applied, as sentence-transformers applies it (str.lower
        in memory, Unicode lowercasing in the graph)."""
        if not self.lowercase_text or self.require_preprocessor().lowercase:
            return x
        if isinstance(x, tf.Tensor):
            return tf.strings.lower(x, encoding="utf-8")
        return [
            text.lower() if isinstance(text, str) else text.decode("utf-8").lower()
            for text in ([x] if isinstance(x, (str, bytes)) else list(x))
        ]

    def preprocess(self, x: Any) -> dict[str, tf.Tensor]:
        """A batch of texts -> the encoder's features (B, T), in the graph."""
        return self.require_preprocessor()(self.texts(as_text_batch(x)))

    def is_text(self, x: Any) -> bool:
        return text_columns(x) is not None or _is_texts(x)

    def map_text_batch(self, x: Any, y: Any = None) -> tuple[dict[str, tf.Tensor], Any, Any]:
        return self.preprocess(x), y, None

    def text_features(self, x: Any) -> Any:
        """Texts -> the features of the model's call; text columns (anchors,
        positives[, negatives]) are training rows, refused here: call the
        model on one column at a time."""
        if not isinstance(x, tf.Tensor) and text_columns(x) is not None:
            raise ValueError(
                "a BertSentenceEncoder is called on one batch of texts (B,), which "
                "it embeds; text columns (anchors, positives[, negatives]) are "
                "training rows for fit / train_on_batch: call it on each column"
            )
        return super().text_features(x)

    def is_text_spec(self, spec: Any) -> bool:
        return _columns_spec(spec) is not None

    def encode_text(self, x: Any, y: Any = None) -> tuple[Any, Any, Any]:
        """Texts -> features (N, T); text columns -> {anchor, positive[,
        negative]: features}, with the scores (CoSENT) as float32."""
        columns = text_columns(x)
        preprocessor = self.require_preprocessor()
        if columns is None:
            return preprocessor.encode(self.texts(x)), self.encode_targets(y), None
        features = {
            name: preprocessor.encode(self.texts(column)) for name, column in zip(COLUMNS, columns)
        }
        return features, self.encode_targets(y), None

    def encode_targets(self, y: Any) -> Any:
        return None if y is None else np.asarray(y, np.float32)

    def preprocess_inputs(
        self, x: Any, y: Any = None, sample_weight: Any = None
    ) -> tuple[Any, Any, Any]:
        """`TextTask.preprocess_inputs`; text columns become {anchor, positive[,
        negative]: features}."""
        if isinstance(x, tf.data.Dataset) and self.preprocessor is not None:
            layout = _columns_spec(x.element_spec)
            if layout is not None:
                return (
                    x.map(self._map_columns(layout), num_parallel_calls=tf.data.AUTOTUNE),
                    y,
                    sample_weight,
                )
            return x, y, sample_weight
        if _encoded_columns(x):  # encode_text's output: ids already
            return x, y, sample_weight
        columns = text_columns(x)
        if columns is not None and not self.contrastive_loss.needs_scores:
            self._warn_about_repeated_positives(columns)
        return super().preprocess_inputs(x, y, sample_weight)

    def _warn_about_repeated_positives(self, columns: list) -> None:
        """Warns (once per model) when rows share a positive: in one batch,
        in-batch negatives make each the other's negative, equal to its own
        positive (a false negative the loss pushes away)."""
        if getattr(self, "_warned_about_repeats", False):
            return
        positives = [_text_key(text) for text in columns[1]]
        repeated = len(positives) - len(set(positives))
        if not repeated:
            return
        pairs = list(zip((_text_key(text) for text in columns[0]), positives))
        whole = len(pairs) - len(set(pairs))
        self._warned_about_repeats = True
        warnings.warn(
            f"{repeated} of {len(positives)} rows repeat another row's positive text "
            f"({whole} of them the whole (anchor, positive) pair): where two such rows "
            "share a batch, MultipleNegativesRankingLoss takes each one's positive as a "
            "negative of the other's anchor (a false negative). Remove the duplicates, "
            "or keep them in different batches (sentence-transformers' "
            "NoDuplicatesBatchSampler)",
            UserWarning,
            stacklevel=4,
        )

    def validation_features(self, validation_data: Any) -> Any:
        """`validation_data` as users pass it: text columns `(anchors,
        positives[, negatives])` or rows of them, Keras' `(x, y)` form
        (`((texts_a, texts_b), scores)`, `((anchors, positives), None)`) or a
        dataset. Bare columns are rows of texts, not (x, y[, sample_weight]):
        a column of texts is never a target."""
        if not isinstance(validation_data, tf.data.Dataset):
            columns = text_columns(validation_data)
            if columns is not None:
                validation_data = (tuple(columns), None)
        return super().validation_features(validation_data)

    def _map_columns(self, layout: str):
        if layout == "texts":
            return self.preprocess
        if layout == "columns":
            return lambda *columns: {
                name: self.preprocess(column) for name, column in zip(COLUMNS, columns)
            }
        return lambda columns, scores: (
            {name: self.preprocess(column) for name, column in zip(COLUMNS, columns)},
            tf.cast(scores, tf.float32),
        )

    # === Training ===

    def compile(
        self,
        optimizer: Any = "auto",
        loss: Any = "auto",
        metrics: Any = None,
        gradient_accumulation_steps: int = 1,
        **kwargs: Any,
    ) -> None:
        """Keras' compile with a contrastive loss: "auto" is
        MultipleNegativesRankingLoss (scale 20), "cosent" CoSENTLoss, or a
        loss object of `keras_bert.models.contrastive` (its `mini_batch_size`
        turns on gradient caching). The optimizer: Adam at 5e-5 for "auto"
        (a model computing in float16 gets it loss-scaled)."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(DEFAULT_LEARNING_RATE)
        self.contrastive_loss = contrastive.get_loss(
            "multiple_negatives_ranking" if loss == "auto" else loss
        )
        if metrics:
            raise ValueError(
                "BertSentenceEncoder reports its loss only; evaluate retrieval "
                "with keras_bert.datasets.retrieval"
            )
        if gradient_accumulation_steps != 1:
            # Accumulated micro-batches would each rank against their own rows
            # only: a different, weaker loss than the large batch's.
            raise ValueError(
                f"gradient_accumulation_steps={gradient_accumulation_steps}: a contrastive "
                "loss compares every row of the batch with every other, so micro-batches "
                "would change the loss; for a large batch in bounded memory give the loss a "
                "mini_batch_size (gradient caching: the same loss and gradients)"
            )
        UpdateStep.compile(self, optimizer=optimizer, **kwargs)

    def get_compile_config(self) -> dict | None:
        config = super().get_compile_config()
        if config and self.compiled:
            config["loss"] = keras.saving.serialize_keras_object(self.contrastive_loss)
        return config

    def compile_from_config(self, config: dict) -> None:
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**{key: value for key, value in config.items() if key != "metrics"})
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_weights)  # the unused pooler left out

    def unused_weights(self) -> list:
        # No pooling mode reads the pooler (cls pools [CLS]'s last layer output).
        return list(self.encoder.pooler.weights)

    def random_states(self) -> list:
        """The dropout layers' random generator states (gradient caching replays
        them); none without dropout, where there is nothing to replay."""
        config = self.encoder.config
        if not (config.hidden_dropout_prob or config.attention_probs_dropout_prob):
            return []
        return [v for v in self.non_trainable_variables if v.path.endswith("seed_generator_state")]

    def loss_and_gradients(self, data: Any) -> tuple[tf.Tensor, tf.Tensor, list]:
        """One batch of training data -> (this replica's share of the loss,
        its mean over this replica's rows, gradients for `trainable_weights`):
        the train step's computation, whole or by gradient caching."""
        x, scores, _ = keras.utils.unpack_x_y_sample_weight(data)
        if not isinstance(x, Mapping) or ANCHOR_COLUMN not in x:
            raise ValueError(
                "training takes text columns (anchors, positives[, negatives]); "
                f"got a batch with {sorted(x) if isinstance(x, Mapping) else x!r:.80}"
            )
        x = {name: self._trim(features) for name, features in x.items()}
        scale = self.optimizer.scale_loss if getattr(self, "optimizer", None) else (lambda v: v)
        arguments = self.step_arguments(x)
        return contrastive.loss_and_gradients(
            lambda features: self(features, training=True, **arguments),
            x,
            self.contrastive_loss,
            scores,
            self.trainable_weights,
            scale_loss=scale,
            seed_states=self.random_states(),
        )

    def train_step(self, data: Any) -> dict:
        self.apply_update(data)
        return {"loss": self.loss_tracker.result()}

    def apply_update(self, data: Any) -> None:
        """One optimizer update from one (per-replica) batch: `fit` calls it
        through `train_step`, a custom loop inside `strategy.run`
        (`keras_bert.models.strategy_run_fit`, multi-worker)."""
        _, value, gradients = self.loss_and_gradients(data)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_weights))
        self._track(value, data)

    def test_step(self, data: Any) -> dict:
        x, scores, _ = keras.utils.unpack_x_y_sample_weight(data)
        x = {name: self._trim(features) for name, features in x.items()}
        arguments = self.step_arguments(x)
        embeddings = {
            name: self(features, training=False, **arguments) for name, features in x.items()
        }
        _, value = self.contrastive_loss(embeddings, scores)
        return self._track(value, data)

    def predict_step(self, data: Any) -> tf.Tensor:
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        return self(self._trim(x), training=False, **self.step_arguments(x))

    def _track(self, value: tf.Tensor, data: Any) -> dict:
        x = keras.utils.unpack_x_y_sample_weight(data)[0]
        rows = tf.shape(x[ANCHOR_COLUMN]["input_ids"])[0]
        self.loss_tracker.update_state(value, sample_weight=rows)
        return {"loss": self.loss_tracker.result()}

    @property
    def metrics(self) -> list:
        return [self.loss_tracker]

    def _trim(self, features: Any) -> Any:
        return features if self.static_shapes() else trim_features_batch(features)[0]

    # === Embeddings out ===

    def encode(self, texts: Any, batch_size: int = 32) -> np.ndarray:
        """Texts -> embeddings (N, D) float32, as `predict`, in batches of texts
        of similar lengths (longest first, as sentence-transformers' `encode`
        orders them): each batch is cut to its longest row, so short texts do
        not pay for long ones. Returned in the texts' order; no texts give
        an empty (0, D) array, as sentence-transformers' `encode([])`."""
        if _no_texts(texts):
            return np.zeros((0, self.output_shape[-1]), np.float32)
        features = self.encode_text(texts)[0]
        lengths = features["input_mask"].sum(axis=1)
        order = np.argsort(-lengths, kind="stable")
        embeddings = self.predict(
            {name: value[order] for name, value in features.items()},
            batch_size=batch_size,
            verbose=0,
        )
        restored = np.empty_like(embeddings)
        restored[order] = embeddings
        return restored

    def similarity(self, a: Any, b: Any, batch_size: int | None = None) -> np.ndarray:
        """Cosine similarities (N, M) of two lists of texts (or of two arrays of
        embeddings), as sentence-transformers' `similarity` (cosine by default)."""
        a, b = (self._embeddings(side, batch_size) for side in (a, b))
        return cosine_similarity(a, b)

    def _embeddings(self, x: Any, batch_size: int | None) -> np.ndarray:
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            return x
        return self.encode(x, batch_size=batch_size or 32)

    # === Config ===

    config_fields = ("pooling", "dense", "normalize", "lowercase_text", "name", "trainable")

    def get_config(self) -> dict:
        # Plain lists and dicts, as a saved file's JSON reads back.
        return {
            **super().get_config(),
            "pooling": list(self.pooling),
            "dense": [dict(layer) for layer in self.dense],
        }


ANCHOR_COLUMN = contrastive.ANCHOR


def _local_path(path: str | os.PathLike) -> str:
    """A path, or a model's `ORG/NAME` in the local HuggingFace cache -> its folder."""
    path = os.fspath(path)
    if not os.path.exists(path) and caches.is_name(path):
        path = caches.find_cached(path)  # sentence-transformers/all-MiniLM-L6-v2
    return path


def sentence_transformer_folder(path: str | os.PathLike | None) -> SentenceTransformerFolder | None:
    """The modules of a sentence-transformers folder (or of its `ORG/NAME` in
    the local HuggingFace cache), or None for anything else (a plain BERT
    checkpoint, a `.keras` file, nothing)."""
    if not path:
        return None
    path = _local_path(path)
    return read_sentence_transformer(path) if is_sentence_transformer(path) else None


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, D), (M, D) -> (N, M) cosines (zero vectors: 0), as torch's F.normalize."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return a @ b.T


def _dense_settings(layer: Mapping[str, Any], index: int) -> dict:
    unknown = sorted(set(layer) - {"units", "activation", "use_bias", "residual"})
    if "units" not in layer or unknown:
        raise ValueError(
            f"dense[{index}]: give {{'units', 'activation', 'use_bias'[, 'residual']}}; "
            f"got {sorted(layer)}"
        )
    settings = {
        "units": int(layer["units"]),
        "activation": layer.get("activation"),
        "use_bias": bool(layer.get("use_bias", True)),
    }
    if layer.get("residual"):  # written only when on: earlier configs stay as they were
        settings["residual"] = True
    return settings


def _text_key(text: Any) -> Any:
    return text.decode("utf-8") if isinstance(text, bytes) else text


def _no_texts(x: Any) -> bool:
    """An empty list, tuple, array or Series of texts (not an empty dict or string)."""
    if isinstance(x, (list, tuple)):
        return len(x) == 0
    if isinstance(x, np.ndarray):
        return x.ndim == 1 and x.size == 0
    return type(x).__name__ == "Series" and len(x) == 0


def _is_texts(x: Any) -> bool:
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (np.ndarray, tf.Tensor)):
        return x.dtype == tf.string or getattr(x.dtype, "kind", "") in "OSU"
    return isinstance(x, list) and len(x) > 0 and isinstance(x[0], (str, bytes))


def _encoded_columns(x: Any) -> bool:
    """Whether `x` is {anchor, positive[, negative]: id features}."""
    return (
        isinstance(x, Mapping)
        and ANCHOR_COLUMN in x
        and set(x) <= set(COLUMNS)
        and all(isinstance(part, Mapping) and "input_ids" in part for part in x.values())
    )


def text_columns(x: Any) -> list | None:
    """Training rows -> their 2 or 3 text columns, or None when `x` is not
    rows of texts: a tuple / list of columns, a list of (anchor, positive[,
    negative]) tuples, or a dict with the columns' names."""
    if isinstance(x, Mapping):
        if ANCHOR_COLUMN not in x:
            return None
        unknown = sorted(set(x) - set(COLUMNS))
        if unknown:
            raise ValueError(f"text columns by name take {list(COLUMNS)}; got {sorted(x)}")
        return [x[name] for name in COLUMNS if name in x]
    if not isinstance(x, (list, tuple)) or not x:
        return None
    if all(isinstance(row, tuple) and 2 <= len(row) <= 3 and _is_texts(list(row)) for row in x):
        widths = {len(row) for row in x}
        if len(widths) != 1:
            raise ValueError(
                f"rows of texts must all have the same number of columns; got {sorted(widths)}"
            )
        return [list(column) for column in zip(*x)]
    if 2 <= len(x) <= 3 and all(
        not isinstance(c, (str, bytes)) and _is_texts(c if not isinstance(c, tuple) else list(c))
        for c in x
    ):
        sizes = {len(column) for column in x}
        if len(sizes) != 1:
            raise ValueError(f"text columns of different lengths: {[len(c) for c in x]}")
        return list(x)
    return None


def _columns_spec(spec: Any) -> str | None:
    """A dataset's element spec -> "texts" (one string batch), "columns"
    (2-3 string batches) or "scored" ((2 string batches), scores), else None."""

    def is_strings(s):
        return isinstance(s, tf.TensorSpec) and s.dtype == tf.string

    if is_strings(spec):
        return "texts"
    if isinstance(spec, tuple) and 2 <= len(spec) <= 3 and all(map(is_strings, spec)):
        return "columns"
    if (
        isinstance(spec, tuple)
        and len(spec) == 2
        and isinstance(spec[0], tuple)
        and len(spec[0]) == 2
        and all(map(is_strings, spec[0]))
        and isinstance(spec[1], tf.TensorSpec)
        and spec[1].dtype.is_floating
    ):
        return "scored"
    return None
