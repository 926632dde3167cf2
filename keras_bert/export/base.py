"""What every exported serving graph shares: one traced tokenizer call, one
traced model call, checked signatures and the base `tf.Module` (the string ops
are `keras_bert.preprocessing.text_ops`, shared with the preprocessors).

Only TensorFlow and tensorflow-text ops end up in the graphs built here, so the
SavedModel runs where neither `keras` nor `keras_bert` is installed (TensorFlow
Serving, a plain `tf.saved_model.load`).

Legend for shape comments: B = batch, P = word pieces, T = sequence length,
H = hidden size.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Mapping

import tensorflow as tf

from keras_bert import features
from keras_bert.preprocessing.traced import traced_pack, traced_tokenizer  # noqa: F401

if TYPE_CHECKING:
    import keras

    from keras_bert.config import BertConfig
    from keras_bert.text.tokenizer import BertTokenizer

IDS_SPECS = {
    name: tf.TensorSpec([None, None], tf.int32, name=name) for name in features.ENCODER_INPUTS
}


def signature(*specs: tf.TensorSpec, jit_compile: bool = False) -> Callable[[Callable], Callable]:
    """`tf.function` with an input signature and without AutoGraph: the serving
    code has no Python control flow on tensors, and converting the tokenizer and
    every Keras layer would triple the export time. `jit_compile`: compiled
    with XLA, once per input shape the server meets.

    A loaded SavedModel does not check its inputs against the signature's
    shapes, so a (B, 1) or scalar `text` would fail deep in the graph
    ("Can't concatenate scalars"): every input first goes through EnsureShape,
    whose error names the input and the shape it expects."""

    def decorate(function):
        @functools.wraps(function)
        def checked(*args):
            return function(
                *(
                    tf.ensure_shape(arg, spec.shape, name=f"check_{name}")
                    for arg, spec, name in zip(args, specs, _arg_names(function))
                )
            )

        return tf.function(
            checked, input_signature=list(specs), autograph=False, jit_compile=jit_compile or None
        )

    return decorate


def _arg_names(function):
    import inspect

    return [name for name in inspect.signature(function).parameters if name != "self"]


class TaskServing:
    """A Keras task model, the in-graph tokenizer and the signatures over them.

    Subclasses implement `signatures()` (name -> signature function).
    `export.export_saved_model` saves them on a root object that tracks only the
    model's variables and the assets: walking the Keras layer objects
    themselves would cost more than the whole rest of the export.
    """

    task = None
    # How the string signatures pad (`BertTokenizer.pack`): set by
    # `export_saved_model` where the task allows "longest" (`PADDINGS`).
    PADDINGS = ("max_length",)
    padding = "max_length"
    length_multiple = 1
    # `export_saved_model(jit_compile=True)`: the model part of every signature
    # compiled with XLA (the string ops around it have no XLA kernels).
    jit_compile = False
    # `export_saved_model(remove_padding=True)`: the per-token layers skip the
    # padding (keras_bert.models.unpadded), traced into every signature.
    remove_padding = False

    def __init__(self, model: keras.Model, tokenizer: BertTokenizer, seq_length: int) -> None:
        max_positions = model_config(model).max_position_embeddings
        if not 3 <= seq_length <= max_positions:
            raise ValueError(
                f"seq_length must be in [3, {max_positions}] (the encoder's "
                f"max_position_embeddings), got {seq_length}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.tokenize_with_offsets = traced_tokenizer(tokenizer)

    @functools.cached_property
    def _traced_model(self) -> Callable[..., Any]:
        """Likewise one trace of the Keras model for all signatures."""
        return signature(*IDS_SPECS.values(), jit_compile=self.jit_compile)(self._run_model)

    def pack_function(self, pair: bool = False) -> Callable[..., dict[str, tf.Tensor]]:
        """`traced_pack` with this export's length and padding."""
        return traced_pack(
            self.tokenizer, self.seq_length, pair, self.padding, self.length_multiple
        )

    def run_model(self, features: Mapping[str, tf.Tensor]) -> tf.Tensor | dict[str, tf.Tensor]:
        """Inference-mode call on {input_ids, input_mask, segment_ids}; float16 /
        bfloat16 outputs come back as float32."""
        return self._traced_model(
            features["input_ids"], features["input_mask"], features["segment_ids"]
        )

    def ids_signature(self, answer: Callable[[dict[str, tf.Tensor]], Any]) -> Callable:
        """`serve_ids`: the three id tensors, checked (`checked_ids`), -> `answer(features)`."""

        @signature(*IDS_SPECS.values())
        def serve_ids(input_ids, input_mask, segment_ids):
            return answer(self.checked_ids(input_ids, input_mask, segment_ids))

        return serve_ids

    def checked_ids(
        self, input_ids: tf.Tensor, input_mask: tf.Tensor, segment_ids: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """`serve_ids`' inputs as a features dict, after checks that name what is
        wrong (equal shapes, at most max_position_embeddings long, ids inside
        the vocabulary, segments and mask 0 or 1, at least one id and one
        real token per sequence) instead of a shape or gather
        error inside the model, or silently wrong logits for negative ids."""
        config = model_config(self.model)
        shape = tf.shape(input_ids)
        checks = [
            tf.debugging.Assert(
                tf.reduce_all(tf.equal(shape, tf.shape(input_mask)))
                & tf.reduce_all(tf.equal(shape, tf.shape(segment_ids))),
                [
                    "input_ids, input_mask and segment_ids must have one shape; got",
                    shape,
                    tf.shape(input_mask),
                    tf.shape(segment_ids),
                ],
            ),
            tf.debugging.Assert(
                shape[1] <= config.max_position_embeddings,
                [
                    f"sequences may be at most {config.max_position_embeddings} "
                    "ids long (max_position_embeddings); got",
                    shape[1],
                ],
            ),
            # A sequence needs its [CLS] at least (what a classifier's pooler reads);
            # a row of no real token has no answer (the padded and the unpadded
            # model would give two different ones).
            tf.debugging.Assert(
                shape[1] >= 1,
                ["input_ids must hold at least one id per sequence ([CLS]); got width", shape[1]],
            ),
            tf.debugging.Assert(
                tf.reduce_all(tf.reduce_any(tf.not_equal(input_mask, 0), axis=1)),
                [
                    "input_mask must mark at least one real token (1) in every "
                    "sequence; rows without:",
                    tf.where(tf.reduce_all(tf.equal(input_mask, 0), axis=1))[:, 0],
                ],
            ),
        ]
        ranges = [("input_ids", input_ids, config.vocab_size), ("input_mask", input_mask, 2)]
        if hasattr(config, "type_vocab_size"):  # a ModernBERT reads no segment ids
            ranges.append(("segment_ids", segment_ids, config.type_vocab_size))
        for name, value, size in ranges:
            checks.append(
                tf.debugging.Assert(
                    tf.reduce_all((value >= 0) & (value < size)),
                    [
                        f"{name} must lie in [0, {size}); got min",
                        tf.reduce_min(value),
                        "max",
                        tf.reduce_max(value),
                    ],
                )
            )
        with tf.control_dependencies(checks):
            return {
                "input_ids": tf.identity(input_ids),
                "input_mask": tf.identity(input_mask),
                "segment_ids": tf.identity(segment_ids),
            }

    def _run_model(self, input_ids, input_mask, segment_ids):
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        # Packed, the last block runs only where the answer is read (a classifier's
        # [CLS]: `TextTask.read_positions`): arguments of this one call.
        arguments: dict[str, Any] = {}
        if self.remove_padding:
            arguments["remove_padding"] = True
            read_positions = getattr(self.model, "read_positions", lambda features: None)
            if (positions := read_positions(features)) is not None:
                arguments["read_positions"] = positions
        outputs = self.model_outputs(features, **arguments)
        return tf.nest.map_structure(lambda t: tf.cast(t, tf.float32), outputs)

    def model_outputs(self, features: Mapping[str, tf.Tensor], **arguments: Any) -> Any:
        """The model's inference-mode outputs on `features` (a classifier's
        logits, before any activation); `arguments`: the call's
        `remove_padding` / `read_positions`."""
        return self.model(features, training=False, **arguments)

    def metadata(self) -> dict[str, Any]:
        """JSON-able facts written to `assets/keras_bert_export.json`."""
        return {
            "task": self.task,
            "seq_length": self.seq_length,
            "padding": self.padding,
            "length_multiple": self.length_multiple,
            "jit_compile": self.jit_compile,
            "remove_padding": self.remove_padding,
            "lowercase": self.tokenizer.lowercase,
            "max_chars_per_word": self.tokenizer.max_chars_per_word,
            "precision": model_precision(self.model),
            "strip_accents": self.tokenizer.strip_accents,
            "special_tokens": list(self.tokenizer.special_tokens),
        }

    def signatures(self) -> dict[str, Callable]:
        raise NotImplementedError


def model_precision(model: keras.Model) -> str:
    """The dtype policy the encoder computes in (float32, mixed_bfloat16, ...)."""
    encoder = getattr(model, "encoder", model)
    layer = getattr(encoder, "token_embedding", encoder)
    return layer.dtype_policy.name


def model_config(model: keras.Model) -> BertConfig:
    """The BertConfig of a task model (`.encoder.config`) or of an encoder."""
    encoder = getattr(model, "encoder", model)
    config = getattr(encoder, "config", None)
    if config is None:
        raise ValueError(
            f"{type(model).__name__} is neither a BertEncoder nor a task model "
            "with an `.encoder`: cannot export it"
        )
    return config
