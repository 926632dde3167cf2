"""BertTokenClassifier: one label per token (named entities, part of speech).

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
K = number of labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.config_fields import keep_config_fields
from keras_bert.datasets.entity_f1 import EntityF1
from keras_bert.datasets.tagging import TaggedSentences, decode_tags, encode_tagged
from keras_bert.features import ENCODER_INPUTS
from keras_bert.layers.task_heads import HEADS, BiLSTMHead
from keras_bert.models.batch_trimming import longest_width, trim_padding
from keras_bert.models.classifier import deserialize_encoder, encoder_inputs
from keras_bert.models.feature_extractor import FrozenTokenFeatures
from keras_bert.models.global_batch import global_weight_sum
from keras_bert.models.text_task import TextTask, batches, deserialize_preprocessor
from keras_bert.models.user_inputs import check_labels
from keras_bert.preprocessing.preprocessor import is_text
from keras_bert.preprocessing.tagging import WordTagger, tag_names, whitespace_words
from keras_bert.preprocessing.text_ops import clean_utf8
from keras_bert.text.tokenizer import text_tensor

if TYPE_CHECKING:
    from keras_bert.models.encoder import BertEncoder
    from keras_bert.preprocessing.preprocessor import BertPreprocessor


@keras.saving.register_keras_serializable(package="keras_bert")
class BertTokenClassifier(TextTask, keras.Model):
    """Dropout then one dense layer on every token of `sequence_output`
    (or of a BiLSTM over it, or, in the feature-based setting, of frozen features).

    As in the paper, each word is labelled on its first word piece; training
    gives the other pieces zero weight (see `keras_bert.datasets.tagging`).

    Args:
      encoder: a `BertEncoder`.
      num_labels: number of tags (e.g. BIO tags of every entity type, with `O`).
      dropout: dropout rate before the output layer.
      label_names: optional tag names, index-aligned with the logits.
      preprocessor: optional `BertPreprocessor`; with it `fit` / `evaluate`
        take texts (words split at whitespace as the original tokenizer
        splits them: NUL and control characters deleted first) or word lists with one tag
        name per word, and `predict` on texts gives the entities.
      head: "linear" (the paper's) or "bilstm": `head_layers` randomly
        initialised BiLSTMs (H / 2 units per direction) before the output layer.
      head_layers: BiLSTM layers of the "bilstm" head.
      feature: None to fine-tune the encoder; one of the paper's feature-based
        choices (`keras_bert.models.feature_extractor.FEATURE_CHOICES`) to train
        the head alone on that frozen encoder's features (the paper's
        feature-based tagger: `head="bilstm", head_layers=2`).

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int32 (B, T).
    Output: logits (B, T, K).
    """

    def __init__(
        self,
        encoder: BertEncoder | dict,
        num_labels: int | None = None,
        dropout: float = 0.1,
        label_names: Sequence[str] | None = None,
        preprocessor: BertPreprocessor | dict | None = None,
        head: str = "linear",
        head_layers: int = 1,
        feature: str | None = None,
        **kwargs: Any,
    ) -> None:
        encoder = deserialize_encoder(encoder)
        preprocessor = deserialize_preprocessor(preprocessor)
        if num_labels is None:
            if label_names is None:
                raise ValueError(
                    "BertTokenClassifier needs label_names (the tags, e.g. "
                    "['O', 'B-PER', 'I-PER']) or num_labels"
                )
            num_labels = len(label_names)
        num_labels, label_names = check_labels(num_labels, label_names, "num_labels")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        # The new head from a plain normal (HuggingFace's token-classification head), not
        # the original BERT's truncated one (effective stddev 0.88x): the original has no
        # tagger, and on wnut16 the plain draw fine-tuned better over many seeds
        # (docs/benchmarks.md, fine-tuning).
        init = keras.initializers.RandomNormal(stddev=encoder.config.initializer_range)

        # === Layers ===
        bilstm = None
        if head == "bilstm":
            bilstm = BiLSTMHead(encoder.config.hidden_size // 2, head_layers, name="tagger_bilstm")
        dropout_layer = keras.layers.Dropout(dropout, name="tagger_dropout")
        output_layer = keras.layers.Dense(num_labels, kernel_initializer=init, name="tagger_output")

        # === Functional Model ===
        inputs = encoder_inputs(encoder)
        if feature is None:
            sequence = encoder(inputs)["sequence_output"]  # (B, T, H)
        else:
            sequence = FrozenTokenFeatures(encoder, feature, name="features")(inputs)  # (B, T, F)
        if bilstm is not None:
            sequence = bilstm(sequence, inputs["input_mask"])  # (B, T, H)
        logits = output_layer(dropout_layer(sequence))  # (B, T, K)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        keep_config_fields(self, locals())

    def read_positions(self, x: Any, y: Any = None, sample_weight: Any = None) -> tf.Tensor | None:
        """The labelled pieces (weight > 0): the loss and metrics read no other
        output of the linear head; a BiLSTM reads every position."""
        if (
            self.head != "linear"
            or self.feature is not None
            or not isinstance(sample_weight, tf.Tensor)
            or sample_weight.shape.rank != 2
        ):
            return None
        return sample_weight

    # === The feature-based setting: the head trained on cached features ===

    def feature_head(self) -> keras.Model:
        """The trainable part of a feature-based tagger as a model of its own,
        sharing this model's weights: the frozen encoder's outputs
        (`frozen_features`) and `input_mask` in, logits (B, T, K) out. Fitting
        it on features computed once trains this model as `fit` on text would,
        without rerunning the frozen encoder every epoch (the paper's way)."""
        if self.feature is None:
            raise ValueError(
                "feature_head needs a feature-based tagger (feature=...); "
                "this one fine-tunes its encoder"
            )
        features = self.get_layer("features")
        width = self.encoder.config.hidden_size
        frozen = [
            keras.Input((None, width), name=f"frozen_{i}") for i in range(features.num_frozen)
        ]  # each (B, T, H)
        input_mask = keras.Input((None,), dtype="int32", name="input_mask")  # (B, T)
        sequence = features.combine(frozen)  # (B, T, F)
        if self.head == "bilstm":
            sequence = self.get_layer("tagger_bilstm")(sequence, input_mask)  # (B, T, H)
        logits = self.get_layer("tagger_output")(self.get_layer("tagger_dropout")(sequence))
        return keras.Model([*frozen, input_mask], logits, name=f"{self.name}_feature_head")

    def frozen_features(self, x: dict[str, np.ndarray], batch_size: int = 32) -> list[np.ndarray]:
        """Encoder features (`input_ids`, `input_mask`, `segment_ids`, (N, T))
        -> the frozen encoder's outputs that `feature_head` reads, each (N, T, H)."""
        extract = tf.function(self.get_layer("features").frozen)
        parts = [
            extract(
                {name: tf.constant(x[name][start : start + batch_size]) for name in ENCODER_INPUTS}
            )
            for start in range(0, len(x["input_ids"]), batch_size)
        ]
        return [
            np.concatenate([np.asarray(part[i]) for part in parts]) for i in range(len(parts[0]))
        ]

    def frozen_dataset(
        self,
        x: dict[str, np.ndarray],
        y: np.ndarray,
        sample_weight: np.ndarray,
        batch_size: int,
        seed: int | None = None,
    ) -> tf.data.Dataset:
        """Encoder features, tag ids and weights (`encode_text`'s, (N, T)) ->
        `feature_head`'s training batches: the frozen outputs computed once,
        shuffled each epoch, each batch cut past its longest row
        (`keras_bert.models.batch_trimming`, as `fit` on text does)."""
        frozen = self.frozen_features(x, batch_size)
        width = x["input_mask"].shape[1]

        def trimmed(inputs, targets, weights):
            length = longest_width(inputs[-1], width)
            inputs = tuple(t[:, :length] for t in inputs)  # each (B, T', ...)
            return inputs, *trim_padding((targets, weights), width, length)

        data = tf.data.Dataset.from_tensor_slices(
            ((*frozen, x["input_mask"]), y, sample_weight.astype("float32"))
        )
        return (
            data.shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
            .batch(batch_size)
            .map(trimmed)
            .prefetch(1)
        )

    # === Text in, entities out ===

    token_level_targets = True  # tag ids and weights (B, T): cut with the padding

    def default_weighted_metrics(self) -> list:
        # Only with tag names: "0", "1", ... mean nothing as entities. No
        # scheme: IO, IOB2, IOBES and BILOU tags all read (leniently, conlleval's way).
        if self.label_names is None:
            return []
        return [EntityF1(self.label_names, scheme=None)]

    def default_loss(self) -> keras.losses.Loss:
        # The mean over labelled pieces only, not over every padded position.
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        )

    # === The loss of one update (`keras_bert.models.update_step`) ===

    def update_normaliser(self, x: Any, y: Any = None, sample_weight: Any = None) -> tf.Tensor:
        """The labelled pieces of a whole update (all micro-batches, all
        replicas): each part's loss is then its share of the global batch's
        mean, however replicas and micro-batches split it (a per-part
        `mean_with_sample_weight` is not: the parts label different numbers of
        pieces). The default loss, computed this way; used while the model is
        compiled with its own loss (`loss="auto"`)."""
        return global_weight_sum(_piece_weights(y, sample_weight))

    def update_loss(
        self, x: Any, y: Any, sample_weight: Any, normaliser: tf.Tensor, micro_batches: int = 1
    ) -> tuple[tf.Tensor, tf.Tensor]:
        logits = self.step_outputs(x, y, sample_weight, training=True)  # (B, T, K)
        per_piece = keras.losses.sparse_categorical_crossentropy(
            y, keras.ops.cast(logits, "float32"), from_logits=True
        )  # (B, T)
        weights = _piece_weights(y, sample_weight)  # (B, T)
        return keras.ops.sum(per_piece * weights) / normaliser, logits

    def word_tagger(self) -> WordTagger:
        preprocessor = self.require_preprocessor()
        return WordTagger(
            preprocessor.tokenizer,
            preprocessor.seq_length,
            tag_names(self.num_labels, self.label_names),
        )

    text_forms = (
        "texts (a list, NumPy array or pandas Series of strings) or word lists "
        "(a list of lists of strings)"
    )

    def is_text(self, x: Any) -> bool:
        """Texts, or word lists (a list of lists of strings)."""
        if isinstance(x, (list, tuple)) and x and isinstance(x[0], (list, tuple)):
            return all(isinstance(word, str) for word in x[0])
        return is_text(x)

    def words_of(self, x: Any) -> list[list[str]]:
        """Texts or word lists -> word lists; texts split as `tag` splits them
        (the original tokenizer's whitespace words, `whitespace_words`)."""
        rows = list(x)
        texts = [i for i, row in enumerate(rows) if isinstance(row, str)]
        split = whitespace_words(self.require_preprocessor().tokenizer, [rows[i] for i in texts])
        words = [list(row) for row in rows]
        for i, row_words in zip(texts, split):
            words[i] = row_words
        return words

    def encode_text(self, x: Any, y: Any = None) -> tuple[dict[str, np.ndarray], Any, Any]:
        """Texts or word lists (+ one tag per word) -> features, tag ids on each
        word's first piece and weights 1 there, 0 elsewhere (`encode_tagged`)."""
        words = self.words_of(x)
        tags = None if y is None else [list(row) for row in y]
        if tags is not None and any(len(w) != len(t) for w, t in zip(words, tags)):
            row = next(i for i, (w, t) in enumerate(zip(words, tags)) if len(w) != len(t))
            raise ValueError(f"text {row}: {len(words[row])} words but {len(tags[row])} tags")
        preprocessor = self.require_preprocessor()
        features, labels, weights, _ = encode_tagged(
            preprocessor.tokenizer,
            TaggedSentences(words, tags),
            tag_names(self.num_labels, self.label_names),
            preprocessor.seq_length,
        )
        if labels is None:  # no tags given
            return features, None, None
        return features, np.maximum(labels, 0), weights

    def map_text_batch(self, x: Any, y: Any = None) -> tuple[dict[str, tf.Tensor], Any, Any]:
        """(B,) texts and (B, W) tag names (ragged, or padded with "") -> the
        same features, targets and weights as `encode_text`, in the graph."""
        _, _, _, first, features = self.word_tagger().words_and_features(clean_utf8(x))
        if y is None:
            return features, None, None
        tags = y.to_tensor("") if isinstance(y, tf.RaggedTensor) else y  # (B, W')
        names = tf.constant(tag_names(self.num_labels, self.label_names))
        known = tf.equal(tags[:, :, tf.newaxis], names)  # (B, W', K)
        words = tf.shape(first)[1]
        check = tf.debugging.Assert(
            tf.reduce_all(tf.reduce_any(known, axis=2) | tf.equal(tags, ""))
            & tf.equal(tf.shape(tags)[1], words),
            [
                "every tag must be among the label_names and each text needs one tag per word; "
                "tags",
                tags,
            ],
        )
        with tf.control_dependencies([check]):
            ids = tf.argmax(tf.cast(known, tf.int32), axis=2, output_type=tf.int32)  # (B, W)
        labelled = tf.where((first >= 0) & tf.reduce_any(known, axis=2))  # (L, 2): row, word
        at = tf.stack([labelled[:, 0], tf.gather_nd(first, labelled)], axis=1)  # (L, 2)
        shape = tf.shape(features["input_ids"], out_type=tf.int64)
        targets = tf.scatter_nd(at, tf.gather_nd(ids, labelled), shape)  # (B, T)
        weights = tf.scatter_nd(at, tf.ones(tf.shape(at)[:1]), shape)
        return features, targets, weights

    def tag(self, x: Any, batch_size: int | None = None) -> list[dict[str, Any]]:
        """Texts -> per text {"tokens": words, "tags": one per word,
        "entities": [{"type", "text", "start", "end"}]} (character offsets,
        `text[start:end] == entity["text"]`), as the exported tagger answers."""
        tagger, results = self.word_tagger(), []
        for chunk in batches(x, batch_size or 32):
            out = tagger.tag_words(text_tensor(chunk), lambda f: self(f, training=False))
            out = {name: value.numpy() for name, value in out.items()}
            for row in range(len(chunk)):
                words, entities = int(out["num_tokens"][row]), int(out["num_entities"][row])
                results.append(
                    {
                        "tokens": [w.decode("utf-8") for w in out["tokens"][row, :words]],
                        "tags": [t.decode("utf-8") for t in out["tags"][row, :words]],
                        "entities": [
                            {
                                "type": out["entity_type"][row, e].decode("utf-8"),
                                "text": out["entity_text"][row, e].decode("utf-8"),
                                "start": int(out["entity_start"][row, e]),
                                "end": int(out["entity_end"][row, e]),
                            }
                            for e in range(entities)
                        ],
                    }
                )
        return results

    def unused_weights(self) -> list:
        return self.encoder.pooler.weights  # tags read the sequence output only

    def predict_entities(self, x: Any, batch_size: int | None = None) -> list[list[dict]]:
        """Texts -> their entities (see `tag`)."""
        return [row["entities"] for row in self.tag(x, batch_size)]

    def score(self, x: Any, y: Any, batch_size: int | None = None) -> dict[str, float]:
        """Entity precision, recall and F1 (conlleval's, `datasets.metrics.entity_scores`)
        of word lists (or texts) `x` against their tags `y`, one per word; a
        word the sequence cut off counts as tagged "O". What `keras-bert
        finetune` reports on dev."""
        from keras_bert.datasets.metrics import entity_scores

        words = self.words_of(x)
        preprocessor = self.require_preprocessor()
        names = tag_names(self.num_labels, self.label_names)
        features, _, _, first_pieces = encode_tagged(
            preprocessor.tokenizer, TaggedSentences(words, None), names, preprocessor.seq_length
        )
        logits = self.predict(features, batch_size=batch_size or 64, verbose=0)
        predicted = decode_tags(np.argmax(logits, axis=-1), first_pieces, names)
        return entity_scores([list(tags) for tags in y], predicted)

    # === Config ===

    # Kept from the constructor's arguments (`keep_config_fields`).
    num_labels: int
    dropout: float
    label_names: list[str] | None
    head: str
    head_layers: int
    feature: str | None
    config_fields = (
        "num_labels",
        "dropout",
        "label_names",
        "head",
        "head_layers",
        "feature",
        "name",
        "trainable",
    )


def _piece_weights(y: Any, sample_weight: Any) -> tf.Tensor:
    """(B, T) float32 weights of the labelled pieces: every piece without weights."""
    if sample_weight is None:
        return keras.ops.ones_like(y, dtype="float32")
    return keras.ops.cast(sample_weight, "float32")
