"""TextTask: what a task model needs to take raw text in `fit`, `evaluate`, `predict`.

A task model built with a `preprocessor` (a `BertPreprocessor`) accepts text
wherever Keras accepts inputs, and keeps accepting the three id tensors:

    model = BertClassifier.from_pretrained("path/to/checkpoint", num_classes=2)
    model.compile()                                  # the paper's defaults, see `compile`
    model.fit(["a fine film", "a dull one"], ["pos", "neg"], epochs=2)
    model.fit(dataset_of_text_and_labels)            # tf.data: (text, label) batches
    model.predict(["a film"])                        # logits, as for ids (Keras' convention)
    model.predict_labels(["a film"])                 # the task's answers (see each model)

In-memory text is tokenized once, up front, into NumPy features, batched
with Keras' own array semantics (shuffling, validation_split, class and
sample weights: `keras_bert.dataset_options.array_batches`) and handed to
Keras' `fit` (callbacks, distribution strategies), so strings train exactly
as the same ids do; each
training and evaluation batch is cut to its longest row in the graph
(`keras_bert.models.batch_trimming`), ids or text alike. A
`tf.data.Dataset` of text is tokenized batch by batch inside its pipeline.

`predict` returns what the model computes (logits), for text and ids
alike, as keras-hub's task models do; each task model has named helpers for
its answers (`predict_labels` / `predict_proba`, `predict_entities`,
`predict_answers`) and says how its labels read (`encode_targets`); the
shared parts live here.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Mapping

import keras
import numpy as np
import tensorflow as tf

from keras_bert import features
from keras_bert.checkpoints.source import PretrainedSource, keras_saved_config, resolve
from keras_bert.checkpoints.task_heads import load_original_task_head
from keras_bert.config_fields import EncoderConfigFields
from keras_bert.dataset_options import (
    are_arrays,
    array_batches,
    class_weights_per_row,
    default_batch_size,
    split_validation,
)
from keras_bert.models import lora
from keras_bert.models.batch_trimming import trim_features_batch
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.modernbert import ModernBertEncoder
from keras_bert.models.update_step import UpdateStep
from keras_bert.models.user_inputs import (
    accepted_keywords,
    check_features,
    check_model_keywords,
    check_one_label_per_text,
    check_texts,
    check_vocabulary_fits,
    refuse_rows_that_are_not_text,
)
from keras_bert.modernbert_config import ModernBertConfig
from keras_bert.preprocessing.preprocessor import BertPreprocessor, is_text, is_text_spec

# keras-hub's task default; the paper's fine-tuning range is 2e-5 to 5e-5.
DEFAULT_LEARNING_RATE = 5e-5


def check_preprocessor_fits(preprocessor: BertPreprocessor, encoder: Any) -> None:
    """`check_vocabulary_fits` for a preprocessor's vocabulary and an encoder's
    embedding table (nothing to check before either is there)."""
    if not isinstance(encoder, BertEncoder) or not preprocessor.has_vocabulary:
        return
    tokenizer = preprocessor.tokenizer
    check_vocabulary_fits(
        len(tokenizer.vocab),
        encoder.config.vocab_size,
        tokenizer.vocab_file or f"the {preprocessor.name} vocabulary",
        pretrained=False,
    )


def deserialize_preprocessor(
    preprocessor: BertPreprocessor | dict | None,
) -> BertPreprocessor | None:
    if isinstance(preprocessor, dict):
        return keras.saving.deserialize_keras_object(
            preprocessor, custom_objects={"BertPreprocessor": BertPreprocessor}
        )
    return preprocessor


class TextTask(UpdateStep, EncoderConfigFields):
    """Mixin for `keras.Model` task models with an optional `preprocessor`.

    Training runs `UpdateStep`'s step (gradient accumulation, float16 loss
    scaling, global-batch losses and metrics) on batches cut to their longest
    row, with the padding packed out of the encoder where the loss allows it:
    the same step for `fit` in a user's script and for `keras-bert finetune`.

    A task model's config is its encoder, its `config_fields` (the other
    constructor arguments, `name` and `trainable` among them where it keeps
    them) and its preprocessor, if any."""

    preprocessor: BertPreprocessor | None = None
    default_seq_length = 128

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
    ):
        """This task model on a pretrained encoder, taking text.

        `path`: anything `keras_bert.checkpoints.resolve` reads (a HuggingFace
        folder, an original TF1 folder or prefix, a `.keras` file, a
        `keras-bert finetune` output). The configuration, the vocabulary and
        the casing come from the checkpoint (`lowercase=` that contradicts
        it fails, naming both). `model_kwargs` go to the model (`num_classes`,
        `label_names`, `dropout`, ...): a new, randomly initialised head, or
        the checkpoint's own where an original run_classifier.py / run_squad.py
        checkpoint holds one (`keras_bert.checkpoints.task_heads`). A
        `.keras` file or finetune output holding this very task model, with
        no `model_kwargs`, comes back whole (its head and its preprocessor).
        """
        cls.check_pretrained_keywords(model_kwargs)
        source = path if isinstance(path, PretrainedSource) else resolve(path)
        if not model_kwargs and source.kind in ("keras", "finetune_output"):
            saved = keras_saved_config(source.weights)
            if saved.get("class_name") == cls.__name__:
                return cls._load_whole(source, seq_length, lowercase, vocab_file)
        # A ModernBERT checkpoint (a ModernBertConfig) builds its own encoder.
        modern = isinstance(source.config, ModernBertConfig)
        encoder = (ModernBertEncoder if modern else BertEncoder).from_pretrained(
            source, dtype=dtype
        )
        preprocessor = cls._preprocessor_for(source, encoder, seq_length, lowercase, vocab_file)
        model = cls(encoder, preprocessor=preprocessor, **model_kwargs)
        # An original run_classifier.py / run_squad.py checkpoint keeps its fine-tuned head.
        load_original_task_head(model, source)
        return model

    from_preset = from_pretrained  # keras-hub's name for the same loader

    @classmethod
    def check_pretrained_keywords(cls, model_kwargs: Mapping[str, Any]) -> None:
        """A keyword neither `from_pretrained` nor the model takes is refused
        before anything is loaded, naming what both take."""
        own = ["seq_length", "lowercase", "vocab_file", "dtype"]
        taken = [k for k in accepted_keywords(cls) if k not in ("encoder", "preprocessor")]
        check_model_keywords(
            cls, model_kwargs, own + taken, where=f"{cls.__name__}.from_pretrained"
        )

    @classmethod
    def _preprocessor_for(cls, source, encoder, seq_length, lowercase, vocab_file):
        seq_length = seq_length or min(
            cls.default_seq_length, encoder.config.max_position_embeddings
        )
        preprocessor = BertPreprocessor.from_pretrained(
            source, seq_length=seq_length, lowercase=lowercase, vocab_file=vocab_file
        )
        # The checkpoint's own vocabulary or the user's must fit its embedding
        # table (the shipped default, for checkpoints without one, is the user's risk).
        vocabulary_file = vocab_file or getattr(source, "vocab_file", None)
        if vocabulary_file:
            check_vocabulary_fits(
                len(preprocessor.vocabulary), encoder.config.vocab_size, vocabulary_file
            )
        return preprocessor

    @classmethod
    def _load_whole(cls, source, seq_length, lowercase, vocab_file):
        model = keras.models.load_model(source.weights, compile=False)
        if model.preprocessor is None or seq_length or vocab_file or lowercase is not None:
            model.preprocessor = cls._preprocessor_for(
                source, model.encoder, seq_length, lowercase, vocab_file
            )
        return model

    def __setattr__(self, name: str, value: Any) -> None:
        # The one boundary every way of building a task model passes (its
        # constructor, `from_pretrained`, the command line's fine-tuning, a
        # preprocessor set later): a vocabulary with ids past the encoder's
        # embedding table is refused before anything trains on it.
        if name == "preprocessor" and isinstance(value, BertPreprocessor):
            check_preprocessor_fits(value, getattr(self, "encoder", None))
        super().__setattr__(name, value)

    # === Per-task hooks ===

    def default_loss(self) -> Any:
        raise NotImplementedError

    def default_metrics(self) -> list:
        return []

    def default_weighted_metrics(self) -> list:
        """Metrics that read the sample weights (Keras hands them to
        `weighted_metrics` only): a tagger's entity F1, whose weights mark
        each word's first piece."""
        return []

    default_loss_weights: dict[str, float] | None = None

    def encode_text(self, x: Any, y: Any = None) -> tuple[dict[str, np.ndarray], Any, Any]:
        """In-memory text (and targets) -> (features, targets, sample weights)."""
        return self.require_preprocessor().encode(x), self.encode_targets(y), None

    def encode_targets(self, y: Any) -> Any:
        return y

    def map_text_batch(self, x: Any, y: Any = None) -> tuple[dict[str, tf.Tensor], Any, Any]:
        """One batch of a text dataset -> (features, targets, sample weights), in graph."""
        return self.require_preprocessor()(x), y, None

    def is_text(self, x: Any) -> bool:
        """Whether `x` is raw text for this task (else: features)."""
        return is_text(x)

    def is_text_spec(self, spec: Any) -> bool:
        """Whether a dataset's `x` element spec is raw text for this task."""
        return is_text_spec(spec)

    # The text this task takes, for the message that refuses anything else.
    text_forms = (
        "texts (a list, NumPy array or pandas Series of strings), "
        "(texts, text_pairs) or {'text': ..., 'text_pair': ...}"
    )

    @property
    def outputs_logits(self) -> bool:
        """Whether the outputs are logits (a probability-expecting loss is then a
        mistake). A property, so that a classifier can answer from its activation."""
        return True

    def unused_weights(self) -> list:
        """Weights the task's outputs never depend on (a tagger's pooler): left
        out of training, so the optimizer neither tracks them nor warns that
        they have no gradients."""
        return []

    @property
    def trainable_weights(self) -> list:
        unused = {id(weight) for weight in self.unused_weights()}
        return [w for w in super().trainable_weights if id(w) not in unused]

    # === Keras entry points ===

    def compile(
        self, optimizer: Any = "auto", loss: Any = "auto", metrics: Any = "auto", **kwargs: Any
    ) -> None:
        """Keras' compile; "auto" picks the task's usual choice: Adam at
        learning rate 5e-5 (keras-hub's default, inside the paper's range), the
        task's loss (cross-entropy from logits; squared error for regression;
        for tagging the mean over labelled word pieces only) and its metrics."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(DEFAULT_LEARNING_RATE)
        self._own_loss = isinstance(loss, str) and loss == "auto"
        if self._own_loss:
            loss = self.default_loss()
            if self.default_loss_weights is not None:
                kwargs.setdefault("loss_weights", self.default_loss_weights)
        if metrics == "auto":
            metrics = self.default_metrics()
            if self.default_weighted_metrics():
                kwargs.setdefault("weighted_metrics", self.default_weighted_metrics())
        if self.outputs_logits:
            _warn_if_expects_probabilities(loss, type(self).__name__)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    # Whether a model with its own `update_loss` (the tagger) uses it: compiled
    # with loss="auto"; a loss given to `compile` is used as given.
    _own_loss = True

    def uses_update_loss(self) -> bool:
        return hasattr(self, "update_loss") and self._own_loss

    def compile_from_config(self, config: dict) -> None:
        """`keras.models.load_model` recompiles with the saved settings (Keras
        skips that for models that override `compile`, hence this)."""
        config = keras.saving.deserialize_keras_object(config)
        UpdateStep.compile(self, **config)
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    # Whether y and the sample weights have a token axis (a tagger's), cut
    # with the inputs' padding in `train_step` / `test_step`.
    token_level_targets = False

    # Whether the steps may run the encoder with the padding packed out of its
    # per-token layers (keras_bert.models.unpadded): where the loss reads real
    # positions only. Not a span extractor's: its softmax spans every position.
    removes_padding = True

    def apply_update(self, data: Any) -> None:
        # The whole update's batch is cut to its longest row; each micro-batch
        # then runs with the padding packed out (`step_outputs`).
        super().apply_update(self.trimmed(data))

    def test_step(self, data: Any) -> Any:
        # Keras' test step, on the batch cut to its longest row and with the
        # padding packed out (`step_outputs`).
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(self.trimmed(data))
        y_pred = self.step_outputs(x, y, sample_weight, training=False)
        loss = self.compute_loss(x, y, y_pred, sample_weight, training=False)
        # Each replica's loss is its share of the global one (as Keras' own step).
        num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
        self._loss_tracker.update_state(
            loss * num_replicas, sample_weight=tf.shape(tf.nest.flatten(x)[0])[0]
        )
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def static_shapes(self) -> bool:
        """XLA and TPUs need static shapes: no trimming, no packing there. The
        model's own strategy, not the current one: `trimmed` also runs in a
        dataset's map (`ExactResume`), outside every strategy's scope."""
        return bool(self.jit_compile) or isinstance(
            self.distribute_strategy, tf.distribute.TPUStrategy
        )

    def step_outputs(
        self, x: Any, y: Any = None, sample_weight: Any = None, *, training: bool
    ) -> Any:
        """The model on one batch of its train / test / predict step, with the
        arguments `step_arguments` gives."""
        return self(x, training=training, **self.step_arguments(x, y, sample_weight))

    def step_arguments(self, x: Any, y: Any = None, sample_weight: Any = None) -> dict[str, Any]:
        """The call arguments of this model's steps on a batch: where the model
        allows it, the encoder's per-token layers skip the padding
        (`remove_padding=True`, `keras_bert.models.unpadded`) and its last block
        runs where the step reads it (`read_positions`). Arguments of each call,
        so replica threads and traces never share them."""
        if not self.removes_padding or self.static_shapes() or _across_workers():
            return {}
        read_positions = self.read_positions(x, y, sample_weight)
        if read_positions is None:
            return {"remove_padding": True}
        return {"remove_padding": True, "read_positions": read_positions}

    def read_positions(self, x: Any, y: Any = None, sample_weight: Any = None) -> tf.Tensor | None:
        """(B, T), nonzero where this step reads the encoder's last layer
        (`step_arguments`), or None: everywhere. For models whose outputs come
        from some positions only (a classifier's [CLS])."""
        return None

    def trimmed(self, data: Any) -> Any:
        """One batch (x[, y[, sample_weight]]) with the padding past its longest
        row cut (`keras_bert.models.batch_trimming`): Keras hands batches of
        in-memory arrays at their full width. Kept where shapes must be static
        (XLA, TPUs)."""
        if self.static_shapes():
            return data
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        return keras.utils.pack_x_y_sample_weight(
            *trim_features_batch(x, y, sample_weight, token_level_targets=self.token_level_targets)
        )

    def fit(
        self, x: Any = None, y: Any = None, *args: Any, **kwargs: Any
    ) -> keras.callbacks.History:
        """Keras' fit (same arguments), text tokenized first. In-memory arrays
        (ids or tokenized text) are batched by `dataset_options.array_batches`
        with Keras' semantics (batch size, per-epoch shuffle, validation_split,
        validation arrays, sample and class weights), its pipeline without
        autotuning: `fit` then ends when its last step does."""
        # Keras' own signature (UpdateStep's `fit` passes everything through).
        call = inspect.signature(keras.Model.fit).bind(self, x, y, *args, **kwargs)
        given = call.arguments
        given["x"], given["y"], given["sample_weight"] = self.preprocess_inputs(
            given.get("x"), given.get("y"), given.get("sample_weight")
        )
        if given.get("validation_data") is not None:
            given["validation_data"] = self.validation_features(given["validation_data"])
        # A callback that resumes the run at its exact step
        # (`keras_bert.callbacks.ExactResume`) orders the batches itself.
        resume = next((c for c in given.get("callbacks") or () if hasattr(c, "resume_fit")), None)
        if not _fit_arrays_as_datasets(given, self, resume):
            return _nothing_left_to_fit(self, given.get("callbacks"))
        given.pop("self")
        return super().fit(**given)

    def evaluate(self, x: Any = None, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        """Keras' evaluate, text tokenized first; arrays batched as `fit` batches them."""
        call = inspect.signature(super().evaluate).bind(x, y, *args, **kwargs)
        given = call.arguments
        given["x"], given["y"], given["sample_weight"] = self.preprocess_inputs(
            given.get("x"), given.get("y"), given.get("sample_weight")
        )
        if are_arrays(given["x"], given["y"], given["sample_weight"]):
            given["x"] = array_batches(
                given["x"],
                given.pop("y"),
                given.pop("sample_weight"),
                batch_size=default_batch_size(
                    given["x"], given.pop("batch_size", None), given.get("steps")
                ),
            )
        return super().evaluate(*call.args, **call.kwargs)

    def predict(self, x: Any, batch_size: int | None = None, *args: Any, **kwargs: Any) -> Any:
        """Keras' predict: the model's outputs (logits), whether `x` holds the
        three id features or raw text (tokenized as `fit` tokenizes it: in
        memory, or batch by batch in a `tf.data.Dataset`). The task's answers
        come from its named helpers (`predict_labels`, `predict_entities`, ...)."""
        call = inspect.signature(super().predict).bind(x, batch_size, *args, **kwargs)
        given = call.arguments
        given["x"] = self.preprocess_inputs(given["x"], None, None)[0]
        if are_arrays(given["x"]):  # in order, the last batch partial
            given["x"] = array_batches(
                given["x"],
                batch_size=default_batch_size(
                    given["x"], given.pop("batch_size", None), given.get("steps")
                ),
            )
        return super().predict(*call.args, **call.kwargs)

    # === Text wherever Keras takes inputs ===

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The model's call, on the three id inputs or on text (what `predict`
        takes: texts, pairs, a string tensor), tokenized first
        (`text_features`): the same outputs as `predict`, and differentiable
        under a `tf.GradientTape` for a training loop of one's own."""
        if args:
            args = (self.read_features(self.text_features(args[0])), *args[1:])
        elif "inputs" in kwargs:
            kwargs["inputs"] = self.read_features(self.text_features(kwargs["inputs"]))
        return super().__call__(*args, **kwargs)

    def read_features(self, x: Any) -> Any:
        """BERT's id features without those this model's encoder does not read
        (a ModernBertEncoder reads no segment ids): the preprocessor's, a
        dataset's or a user's features reach every encoder the same way."""
        read = getattr(self.encoder, "input_features", features.ENCODER_INPUTS)
        unread = set(features.ENCODER_INPUTS) - set(read)
        if not unread or not isinstance(x, Mapping):
            return x
        return {name: value for name, value in x.items() if name not in unread}

    def train_on_batch(
        self,
        x: Any,
        y: Any = None,
        sample_weight: Any = None,
        class_weight: Any = None,
        return_dict: bool = False,
    ) -> Any:
        """Keras' train_on_batch, text (and labels) preprocessed as `fit` does."""
        x, y, sample_weight = self.preprocess_inputs(x, y, sample_weight)
        return super().train_on_batch(
            x, y, sample_weight=sample_weight, class_weight=class_weight, return_dict=return_dict
        )

    def test_on_batch(
        self, x: Any, y: Any = None, sample_weight: Any = None, return_dict: bool = False
    ) -> Any:
        """Keras' test_on_batch, text (and labels) preprocessed as `evaluate` does."""
        x, y, sample_weight = self.preprocess_inputs(x, y, sample_weight)
        return super().test_on_batch(x, y, sample_weight=sample_weight, return_dict=return_dict)

    def predict_on_batch(self, x: Any) -> Any:
        """Keras' predict_on_batch, text tokenized as `predict` tokenizes it."""
        return super().predict_on_batch(self.preprocess_inputs(x)[0])

    # === LoRA (keras_bert.models.lora) ===

    def enable_lora(self, rank: int, alpha: float | None = None) -> None:
        """Low-rank adapters (rank `rank`, scale `alpha / rank`, alpha defaulting
        to the rank) on the encoder's attention and feed-forward projections;
        the rest of the encoder is frozen, the head stays trainable. Call it
        before `compile`. `keras_bert.models.lora` says what is adapted and why."""
        lora.enable_lora(self, rank, alpha)

    @property
    def lora_rank(self) -> int | None:
        return lora.lora_rank(self)

    def save_lora_weights(self, path: str) -> str:
        """Writes only the adapters and the head (`.npz`), for `load_lora_weights`."""
        return lora.save_adapters(self, path)

    def load_lora_weights(self, path: str) -> None:
        """Loads `save_lora_weights`' file onto this model, built from the same
        base checkpoint (LoRA is enabled at the file's rank if need be)."""
        lora.load_adapters(self, path)

    def merge_lora(self):
        """A copy of this model without adapters, their product folded into the
        kernels (same outputs): what `export_saved_model` exports."""
        return lora.merged_copy(self)

    # === Shared ===

    def require_preprocessor(self) -> BertPreprocessor:
        if self.preprocessor is None:
            raise ValueError(
                f"this {type(self).__name__} has no preprocessor, so it takes "
                "input_ids / input_mask / segment_ids, not text: build it with "
                "`preprocessor=BertPreprocessor(...)` or `from_pretrained`"
            )
        return self.preprocessor

    def preprocess_inputs(
        self, x: Any, y: Any = None, sample_weight: Any = None
    ) -> tuple[Any, Any, Any]:
        """What `fit`, `evaluate`, `predict` and the `*_on_batch` methods do to
        their data first, public for a loop of one's own: text (and labels)
        -> `(features, targets, sample_weight)`, the features the three id
        inputs (NumPy, tokenized as `fit` tokenizes them), the targets as the
        loss takes them (class names as indices, a tagger's tags on each
        word's first piece), the sample weights where the task has them (a
        tagger's: 1 on first pieces) times `sample_weight`. Ids pass through
        unchanged; a `tf.data.Dataset` of text comes back mapped (tokenized
        batch by batch in its pipeline)."""
        if isinstance(x, tf.data.Dataset):
            if self.preprocessor is None or not self.is_text_spec(_x_spec(x.element_spec)):
                return x, y, sample_weight
            return x.map(self._map_element, num_parallel_calls=tf.data.AUTOTUNE), y, sample_weight
        x = check_texts(x)  # the one boundary: bad rows named before any tracing
        if self.is_text(x):
            self.require_preprocessor()  # text for a model that takes ids: say how to add one
        else:
            refuse_rows_that_are_not_text(x)  # [None], [0]: rows named, not Keras' KeyError
            check_features(x, type(self).__name__, self.text_forms)
        if self.preprocessor is None or not self.is_text(x):
            return x, y, sample_weight
        check_one_label_per_text(y, _num_rows(x))
        features, targets, weights = self.encode_text(x, y)
        if sample_weight is not None:
            weights = sample_weight if weights is None else weights * _column(sample_weight)
        return features, targets, weights

    def text_features(self, x: Any) -> Any:
        """`x` as the model's call takes it: text -> the three id inputs (in
        memory tokenized as `predict` tokenizes it; string tensors, eager or
        inside a `tf.function`, in the graph: `map_text_batch`); anything
        else unchanged."""
        if isinstance(x, keras.KerasTensor):
            return x
        if self.preprocessor is None:
            if self.is_text(x):
                self.require_preprocessor()  # says how to add one
            return x
        if _holds_tensors(x):
            if not self.is_text(x):
                return x
            if tf.executing_eagerly() and not self.maps_text_in_graph:
                return self.preprocess_inputs(_python_texts(x))[0]
            return self.map_text_batch(x)[0]
        if isinstance(x, Mapping) and not self.is_text(x):
            return x  # the id features (or what Keras says is wrong with them)
        return self.preprocess_inputs(x)[0]

    # Whether `map_text_batch` tokenizes a batch of text in the graph (a span
    # extractor's windows come from run_squad's Python conversion only).
    maps_text_in_graph = True

    def validation_features(self, validation_data: Any) -> Any:
        if isinstance(validation_data, tf.data.Dataset):
            return self.preprocess_inputs(validation_data, None, None)[0]
        x, y, *weight = validation_data
        x, y, weight = self.preprocess_inputs(x, y, weight[0] if weight else None)
        return (x, y) if weight is None else (x, y, weight)

    def _map_element(self, *element):
        x, y, weight = keras.utils.unpack_x_y_sample_weight(
            element[0] if len(element) == 1 else element
        )
        features, targets, weights = self.map_text_batch(x, y)
        if weight is not None:
            weights = weight if weights is None else weights * _column(weight)
        return keras.utils.pack_x_y_sample_weight(features, targets, weights)

    # === Config ===

    def get_config(self) -> dict:
        return {**super().get_config(), **self.preprocessor_config()}

    def preprocessor_config(self) -> dict:
        if self.preprocessor is None:
            return {}
        return {"preprocessor": keras.saving.serialize_keras_object(self.preprocessor)}


def _across_workers() -> bool:
    """Under MultiWorkerMirroredStrategy the embeddings' sparse gradients are
    all-gathered between workers, which needs one shape on every worker: packed
    rows (each worker's real tokens) differ, padded batches (cut to the global
    batch's longest row) do not."""
    return isinstance(tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy)


def _fit_arrays_as_datasets(given: dict, model: keras.Model, resume: Any = None) -> bool:
    """Keras fit's bound arguments `given`, in-memory training and validation
    arrays replaced by `array_batches` datasets with Keras' array semantics,
    or by `resume`'s batches from its restored step on. False: `resume`'s run
    has nothing left to train."""
    x, y, sample_weight = given.get("x"), given.get("y"), given.get("sample_weight")
    batch_size = given.get("batch_size")
    validation_data = given.get("validation_data")
    if resume is not None or are_arrays(x, y, sample_weight):
        split = given.pop("validation_split", 0.0)
        if split and validation_data is None:  # Keras: the last rows, before shuffling
            (x, y, sample_weight), validation_data = split_validation(x, y, sample_weight, split)
        class_weight = given.pop("class_weight", None)
        if class_weight is not None:
            sample_weight = class_weights_per_row(y, sample_weight, class_weight)
    if resume is not None:
        resumed = resume.resume_fit(
            model, {**given, "x": x, "y": y, "sample_weight": sample_weight}, given["callbacks"]
        )
        if resumed is None:
            return False
        given.clear()
        given.update(resumed)
    elif are_arrays(x, y, sample_weight):
        given["x"] = array_batches(
            x,
            y,
            sample_weight,
            shuffle=given.pop("shuffle", True),
            batch_size=default_batch_size(
                x, given.pop("batch_size", None), given.get("steps_per_epoch")
            ),
        )
        given["shuffle"] = False  # done above (Keras warns of a shuffle it cannot do)
        given.pop("y", None)
        given.pop("sample_weight", None)
    if validation_data is not None and not isinstance(validation_data, tf.data.Dataset):
        val_x, val_y, val_weight = keras.utils.unpack_x_y_sample_weight(validation_data)
        if are_arrays(val_x, val_y, val_weight):
            # Keras' batch size for validation: validation_batch_size or batch_size.
            validation_data = array_batches(
                val_x,
                val_y,
                val_weight,
                batch_size=default_batch_size(
                    val_x,
                    given.pop("validation_batch_size", None) or batch_size,
                    given.get("validation_steps"),
                ),
            )
    if validation_data is not None:
        given["validation_data"] = validation_data
    return True


def _nothing_left_to_fit(model: keras.Model, callbacks: Any) -> keras.callbacks.History:
    """A resumed run found finished (or stopped early): no update, but the
    callbacks' ends (the best model taken back, logs closed)."""
    history = keras.callbacks.History()
    callback_list = keras.callbacks.CallbackList(
        [*(callbacks or ()), history], model=model, add_history=False
    )
    callback_list.on_train_begin()
    callback_list.on_train_end()
    return history


# Keras losses that read probabilities unless told `from_logits=True`: their
# names as strings, as functions and (without underscores, lowercased) as classes.
_PROBABILITY_LOSSES = (
    "sparse_categorical_crossentropy",
    "categorical_crossentropy",
    "binary_crossentropy",
    "categorical_focal_crossentropy",
    "binary_focal_crossentropy",
)


def _loss_key(name: str) -> str:
    return name.replace("_", "").lower()


def _warn_if_expects_probabilities(loss: Any, model_name: str) -> None:
    """Keras' cross-entropies default to `from_logits=False`; on a model that
    outputs logits they train, silently, on the wrong values."""
    if isinstance(loss, Mapping):
        losses = list(loss.values())
    else:
        losses = list(loss) if isinstance(loss, (list, tuple)) else [loss]
    for one in losses:
        if isinstance(one, str):
            name, from_logits = one, False
        elif isinstance(one, keras.losses.Loss):
            name = type(one).__name__
            from_logits = bool(one.get_config().get("from_logits", True))
        elif callable(one):  # keras.losses.sparse_categorical_crossentropy and friends
            name, from_logits = getattr(one, "__name__", ""), False
        else:
            continue
        if _loss_key(name) in {_loss_key(n) for n in _PROBABILITY_LOSSES} and not from_logits:
            warnings.warn(
                f"{model_name} outputs logits, but the loss {one!r} expects probabilities "
                "(Keras' from_logits=False default): pass from_logits=True, or leave "
                "loss='auto' for the task's own loss",
                UserWarning,
                stacklevel=3,
            )


def _holds_tensors(x: Any) -> bool:
    """A tf.Tensor, or a dict / tuple of them (text pairs as tensors)."""
    if isinstance(x, Mapping):
        return bool(x) and all(isinstance(v, tf.Tensor) for v in x.values())
    if isinstance(x, tuple):
        return bool(x) and all(isinstance(v, tf.Tensor) for v in x)
    return isinstance(x, tf.Tensor)


def _python_texts(x: Any) -> Any:
    """Eager string tensors (alone, in a dict or a tuple) -> lists of Python strings."""
    if isinstance(x, Mapping):
        return {name: _python_texts(value) for name, value in x.items()}
    if isinstance(x, tuple):
        return tuple(_python_texts(value) for value in x)
    return [row.decode("utf-8", "replace") for row in np.asarray(x.numpy()).reshape(-1)]


def _x_spec(element_spec):
    if isinstance(element_spec, tuple):
        return element_spec[0]
    return element_spec


def _column(weights):
    """(B,) sample weights broadcast over a token axis (B, T)."""
    weights = weights if hasattr(weights, "ndim") else np.asarray(weights)
    return weights[:, None] if weights.ndim == 1 else weights


def batches(x: Any, batch_size: int) -> Any:
    """Rows of in-memory text (a list, an array, a (text, text_pair) tuple or a
    {"text", "text_pair"} dict) in slices of `batch_size`."""
    size = _num_rows(x)
    for start in range(0, size, batch_size):
        yield _slice(x, start, start + batch_size)


def _num_rows(x):
    if isinstance(x, Mapping):
        return _num_rows(next(iter(x.values())))
    if isinstance(x, tuple):
        return _num_rows(x[0])
    if isinstance(x, (str, bytes)):
        return 1
    return len(x)


def _slice(x, start, stop):
    if isinstance(x, Mapping):
        return {name: _slice(value, start, stop) for name, value in x.items()}
    if isinstance(x, tuple):
        return tuple(_slice(part, start, stop) for part in x)
    if isinstance(x, (str, bytes)):
        return [x]
    return x[start:stop]
