"""What every exported serving graph shares: input cleaning, one traced
tokenizer call, character offsets and the base `tf.Module`.

Only TensorFlow and tensorflow-text ops end up in the graphs built here, so the
SavedModel runs where neither `keras` nor `keras_bert` is installed (TensorFlow
Serving, a plain `tf.saved_model.load`).

Legend for shape comments: B = batch, P = word pieces, T = sequence length,
H = hidden size.
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any, Callable, Mapping

import tensorflow as tf

from keras_bert import features

if TYPE_CHECKING:
    import keras

    from keras_bert.config import BertConfig
    from keras_bert.text.tokenizer import BertTokenizer

TEXT_SPEC = tf.TensorSpec([None], tf.string)
IDS_SPECS = {name: tf.TensorSpec([None, None], tf.int32, name=name)
             for name in features.ENCODER_INPUTS}


def clean_utf8(text: tf.Tensor) -> tf.Tensor:
    """(B,) bytes -> valid UTF-8: each invalid sequence becomes one U+FFFD, as
    Python's `bytes.decode("utf-8", errors="replace")` does. The tokenizer then
    drops U+FFFD like any deleted character; offsets index the cleaned text,
    which equals the input whenever the input was valid UTF-8."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)


def char_offsets(text: tf.Tensor, byte_offsets: tf.Tensor | tf.RaggedTensor
                 ) -> tf.Tensor | tf.RaggedTensor:
    """(B,) valid UTF-8 text, byte offsets into it, (B,) or (B, N), dense or
    ragged -> the same offsets in Unicode characters (what Python's `str` indexes).

    One sorted list of every character's global byte position and a binary
    search: no per-offset copy of the text (a 100,000-character text with
    20,000 words stays cheap)."""
    if isinstance(byte_offsets, tf.RaggedTensor):
        return byte_offsets.with_flat_values(char_offsets_by_row(
            byte_offsets.value_rowids(), byte_offsets.flat_values, text))
    return char_offsets_by_row(tf.range(tf.size(text, out_type=tf.int64)), byte_offsets, text)


def char_offsets_by_row(rows: tf.Tensor, byte_offsets: tf.Tensor, text: tf.Tensor) -> tf.Tensor:
    """byte offsets (N, ...) into `text[rows]` -> character offsets (N, ...)."""
    shape = tf.shape(byte_offsets)
    flat = tf.reshape(tf.cast(byte_offsets, tf.int64), [-1])
    rows = tf.reshape(tf.broadcast_to(tf.reshape(rows, tf.concat(
        [tf.shape(rows), tf.ones_like(shape[1:])], 0)), shape), [-1])
    _, char_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8", errors="replace")
    byte_base = tf.math.cumsum(tf.cast(tf.strings.length(text), tf.int64), exclusive=True)  # (B,)
    global_starts = char_starts.flat_values + tf.gather(byte_base, char_starts.value_rowids())
    before = tf.searchsorted(global_starts, tf.gather(byte_base, rows) + flat,
                             side="left", out_type=tf.int64)
    return tf.reshape(before - tf.gather(char_starts.row_starts(), rows), shape)


def surface_text(text: tf.Tensor, byte_starts: tf.Tensor, byte_ends: tf.Tensor) -> tf.Tensor:
    """(B,) text, (B,) or (B, N) dense byte spans -> the exact bytes of each span.
    Broadcasting `text` (rather than gathering it) copies only the spans."""
    if byte_starts.shape.rank == 2:
        text = text[:, tf.newaxis]
    return tf.strings.substr(text, byte_starts, byte_ends - byte_starts, unit="BYTE")


def check_same_batch(name_a: str, a: tf.Tensor, name_b: str, b: tf.Tensor,
                     allow_empty_b: bool = False) -> tf.Operation | None:
    """Raises InvalidArgumentError (a clear message, not a shape error deep
    inside the graph) when two string inputs have different batch sizes."""
    size_a, size_b = tf.size(a), tf.size(b)
    ok = tf.equal(size_a, size_b)
    if allow_empty_b:
        ok = tf.logical_or(ok, tf.equal(size_b, 0))
    expected = f"one `{name_b}` per `{name_a}`" + (" (or none)" if allow_empty_b else "")
    return tf.debugging.Assert(ok, [f"{expected}; got {name_a} batch", size_a,
                                    f"and {name_b} batch", size_b])


def signature(*specs: tf.TensorSpec) -> Callable[[Callable], Callable]:
    """`tf.function` with an input signature and without AutoGraph: the serving
    code has no Python control flow on tensors, and converting the tokenizer and
    every Keras layer would triple the export time.

    A loaded SavedModel does not check its inputs against the signature's
    shapes, so a (B, 1) or scalar `text` would fail deep in the graph
    ("Can't concatenate scalars"): every input first goes through EnsureShape,
    whose error names the input and the shape it expects."""
    def decorate(function):
        @functools.wraps(function)
        def checked(*args):
            return function(*(tf.ensure_shape(arg, spec.shape, name=f"check_{name}")
                              for arg, spec, name in zip(args, specs, _arg_names(function))))
        return tf.function(checked, input_signature=list(specs), autograph=False)
    return decorate


def _arg_names(function):
    import inspect
    return [name for name in inspect.signature(function).parameters if name != "self"]


_TRACED_TOKENIZERS = weakref.WeakKeyDictionary()
_TRACED_PACKS = weakref.WeakKeyDictionary()


def traced_tokenizer(tokenizer: BertTokenizer) -> Callable:
    """`tokenizer.tokenize_with_offsets` after `clean_utf8`, as one `tf.function`
    per tokenizer: every signature (and every export with this tokenizer) calls
    the same trace, and tracing the tokenizer is most of the export time.
    (B,) strings -> ragged (B, P) ids, byte starts and ends in the cleaned text."""
    if tokenizer not in _TRACED_TOKENIZERS:
        owner = weakref.ref(tokenizer)  # the cache must not keep its key alive
        _TRACED_TOKENIZERS[tokenizer] = signature(TEXT_SPEC)(
            lambda text: owner().tokenize_with_offsets(clean_utf8(text)))
    return _TRACED_TOKENIZERS[tokenizer]


def traced_pack(tokenizer: BertTokenizer, seq_length: int, pair: bool = False,
                padding: str = "max_length", length_multiple: int = 1
                ) -> Callable[..., dict[str, tf.Tensor]]:
    """`tokenizer.pack` of ragged ids, one `tf.function` per tokenizer, length,
    arity and padding, shared like `traced_tokenizer`. Returns f(ids_a[, ids_b])
    -> {input_ids, input_mask, segment_ids} int32 (B, T) (see `pack` for T)."""
    owner = weakref.ref(tokenizer)
    cache = _TRACED_PACKS.setdefault(tokenizer, {})
    key = (seq_length, pair, padding, length_multiple)
    if key not in cache:
        options = {"seq_length": seq_length, "padding": padding,
                   "length_multiple": length_multiple}
        if pair:
            def pack(ids_a, ids_b):
                return owner().pack(ids_a, ids_b, **options)
        else:
            def pack(ids_a):
                return owner().pack(ids_a, **options)
        cache[key] = tf.function(pack, autograph=False, reduce_retracing=True)
    return cache[key]


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

    def __init__(self, model: keras.Model, tokenizer: BertTokenizer, seq_length: int) -> None:
        max_positions = model_config(model).max_position_embeddings
        if not 3 <= seq_length <= max_positions:
            raise ValueError(f"seq_length must be in [3, {max_positions}] (the encoder's "
                             f"max_position_embeddings), got {seq_length}")
        self.model = model
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.tokenize_with_offsets = traced_tokenizer(tokenizer)
        # Likewise one trace of the Keras model for all signatures.
        self._traced_model = signature(*IDS_SPECS.values())(self._run_model)

    def pack_function(self, pair: bool = False) -> Callable[..., dict[str, tf.Tensor]]:
        """`traced_pack` with this export's length and padding."""
        return traced_pack(self.tokenizer, self.seq_length, pair, self.padding,
                           self.length_multiple)

    def run_model(self, features: Mapping[str, tf.Tensor]) -> tf.Tensor | dict[str, tf.Tensor]:
        """Inference-mode call on {input_ids, input_mask, segment_ids}; float16 /
        bfloat16 outputs come back as float32."""
        return self._traced_model(features["input_ids"], features["input_mask"],
                                  features["segment_ids"])

    def checked_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor, segment_ids: tf.Tensor
                    ) -> dict[str, tf.Tensor]:
        """`serve_ids`' inputs as a features dict, after checks that name what is
        wrong (equal shapes, at most max_position_embeddings long, ids inside
        the vocabulary, segments and mask 0 or 1) instead of a shape or gather
        error inside the model, or silently wrong logits for negative ids."""
        config = model_config(self.model)
        shape = tf.shape(input_ids)
        checks = [
            tf.debugging.Assert(tf.reduce_all(tf.equal(shape, tf.shape(input_mask)))
                                & tf.reduce_all(tf.equal(shape, tf.shape(segment_ids))),
                                ["input_ids, input_mask and segment_ids must have one shape; "
                                 "got", shape, tf.shape(input_mask), tf.shape(segment_ids)]),
            tf.debugging.Assert(shape[1] <= config.max_position_embeddings,
                                [f"sequences may be at most {config.max_position_embeddings} "
                                 "ids long (max_position_embeddings); got", shape[1]]),
        ]
        for name, value, size in (("input_ids", input_ids, config.vocab_size),
                                  ("segment_ids", segment_ids, config.type_vocab_size),
                                  ("input_mask", input_mask, 2)):
            checks.append(tf.debugging.Assert(
                tf.reduce_all((value >= 0) & (value < size)),
                [f"{name} must lie in [0, {size}); got min", tf.reduce_min(value), "max",
                 tf.reduce_max(value)]))
        with tf.control_dependencies(checks):
            return {"input_ids": tf.identity(input_ids), "input_mask": tf.identity(input_mask),
                    "segment_ids": tf.identity(segment_ids)}

    def _run_model(self, input_ids, input_mask, segment_ids):
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "segment_ids": segment_ids}, training=False)
        return tf.nest.map_structure(lambda t: tf.cast(t, tf.float32), outputs)

    def metadata(self) -> dict[str, Any]:
        """JSON-able facts written to `assets/keras_bert_export.json`."""
        return {"task": self.task, "seq_length": self.seq_length, "padding": self.padding,
                "length_multiple": self.length_multiple,
                "lowercase": self.tokenizer.lowercase,
                "max_chars_per_word": self.tokenizer.max_chars_per_word}

    def signatures(self) -> dict[str, Callable]:
        raise NotImplementedError


def model_config(model: keras.Model) -> BertConfig:
    """The BertConfig of a task model (`.encoder.config`) or of an encoder."""
    encoder = getattr(model, "encoder", model)
    config = getattr(encoder, "config", None)
    if config is None:
        raise ValueError(f"{type(model).__name__} is neither a BertEncoder nor a task model "
                         "with an `.encoder`: cannot export it")
    return config
