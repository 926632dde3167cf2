"""BertPreprocessor: one or two text segments -> BERT's three inputs, in the graph.

A Keras layer, so it lives inside a task model (saved with it in `.keras`,
carried into the exported SavedModel) and also maps over a `tf.data.Dataset`:

    preprocessor = BertPreprocessor("vocab.txt", seq_length=128)  # or the token list
    preprocessor(["a sentence"])                       # single sentences
    preprocessor((["a question"], ["an answer"]))      # pairs, as a tuple
    preprocessor({"text": [...], "text_pair": [...]})  # pairs, by name
    dataset.map(lambda x, y: (preprocessor(x), y))

It carries its vocabulary (saved as an asset of the `.keras` file, as
keras-hub's tokenizers are, so configs and error messages stay small), its
casing and its sequence length. Packing is the original's: `[CLS] A [SEP]`
or `[CLS] A [SEP] B [SEP]`, over-long pairs trimmed one piece at a time from
the longer segment (`BertTokenizer.pack`), so the ids equal those of
`keras_bert.datasets.text_classification.encode_texts` and of the exported
models' `serving_default`.

Legend for shape comments: B = batch, T = sequence length.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.preprocessing.text_ops import clean_utf8
from keras_bert.text.tokenizer import BertTokenizer, text_tensor

TEXT = "text"
TEXT_PAIR = "text_pair"
# The vocabulary's file among the layer's assets in a `.keras` file.
VOCAB_ASSET = "vocabulary.txt"


def as_text_batch(value: Any, name: str = TEXT) -> tf.Tensor:
    """Python strings, a NumPy array or a string tensor -> a (B,) string tensor;
    a single string becomes a batch of one. Other inputs: a TypeError naming `name`."""
    if isinstance(value, (str, bytes)):
        value = [value]
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "OU":
        value = value.tolist()
    if isinstance(value, (list, tuple)) and all(isinstance(row, (str, bytes)) for row in value):
        value = text_tensor(value)  # lone surrogates as the original treats them
    tensor = tf.convert_to_tensor(value) if not isinstance(value, tf.Tensor) else value
    if tensor.dtype != tf.string:
        raise TypeError(f"`{name}` must hold strings, got {tensor.dtype.name} values")
    if tensor.shape.rank == 2 and tensor.shape[1] == 1:
        tensor = tensor[:, 0]  # a column of a table
    if tensor.shape.rank != 1:
        raise ValueError(f"`{name}` must be a batch of strings (B,), got shape {tensor.shape}")
    return tensor


def config_sharing_preprocessor(model: keras.Model) -> dict:
    """`model.get_config()` with the model's preprocessor itself in place of its
    config, for a copy in this process (`type(model).from_config(...)`): the
    config carries no vocabulary, and sharing the layer is safe (no weights)."""
    config = model.get_config()
    if getattr(model, "preprocessor", None) is not None:
        config["preprocessor"] = model.preprocessor
    return config


def _is_pair_list(inputs: Any) -> bool:
    """[(text, text_pair), ...]: pairs row by row, as a list of tuples."""
    return (
        isinstance(inputs, list)
        and len(inputs) > 0
        and isinstance(inputs[0], tuple)
        and len(inputs[0]) == 2
        and isinstance(inputs[0][0], (str, bytes))
    )


def split_segments(inputs: Any) -> tuple[Any, Any | None]:
    """The layer's accepted inputs -> (text, text_pair or None)."""
    if _is_pair_list(inputs):
        if any(not isinstance(row, tuple) or len(row) != 2 for row in inputs):
            row = next(i for i, r in enumerate(inputs) if not isinstance(r, tuple) or len(r) != 2)
            raise ValueError(
                f"text pairs as a list of tuples: row {row} is not a "
                f"(text, text_pair) tuple: {inputs[row]!r:.80}"
            )
        return [row[0] for row in inputs], [row[1] for row in inputs]
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - {TEXT, TEXT_PAIR})
        if TEXT not in inputs or unknown:
            raise ValueError(
                f"text inputs as a dict take the keys {TEXT!r} and optionally "
                f"{TEXT_PAIR!r}; got {sorted(inputs)}"
            )
        return inputs[TEXT], inputs.get(TEXT_PAIR)
    if isinstance(inputs, tuple):
        if len(inputs) != 2:
            raise ValueError(
                f"text inputs as a tuple are (text, text_pair); got {len(inputs)} items"
            )
        return inputs
    return inputs, None


def check_same_rows(text: tf.Tensor, text_pair: tf.Tensor) -> tf.Operation | None:
    """One `text_pair` per `text`: a ValueError now where the sizes are known,
    else an assertion in the graph, naming both inputs either way."""
    rows, pair_rows = text.shape[0], text_pair.shape[0]
    message = f"one `{TEXT_PAIR}` per `{TEXT}`"
    if rows is not None and pair_rows is not None:
        if rows != pair_rows:
            raise ValueError(f"{message}: got {rows} texts and {pair_rows} pairs")
        return None
    return tf.debugging.assert_equal(
        tf.shape(text)[0],
        tf.shape(text_pair)[0],
        message=f"{message}: the two have different sizes",
    )


def is_text(inputs: Any) -> bool:
    """Whether `inputs` (what a user hands to fit / predict) is raw text rather
    than features: strings, a (text, text_pair) tuple or a {"text": ...} dict."""
    if isinstance(inputs, Mapping):
        return TEXT in inputs
    if isinstance(inputs, tuple) and len(inputs) == 2:
        return all(is_text(part) for part in inputs)
    if isinstance(inputs, (str, bytes)):
        return True
    if isinstance(inputs, (tf.Tensor, np.ndarray)):
        return inputs.dtype == tf.string or inputs.dtype.kind in "OSU"
    if isinstance(inputs, (list, tuple)):
        return len(inputs) > 0 and (isinstance(inputs[0], (str, bytes)) or _is_pair_list(inputs))
    return False


def refuse_windows_of_pairs(x: Any) -> None:
    """Windows cut single texts; for pairs, one line saying what to do."""
    if text_pairs_given(x):
        raise ValueError(
            "window_stride reads single texts longer than the sequence, and these "
            "are text pairs: join each pair into one text to read it in windows, "
            "or leave window_stride out (each pair is then cut to the sequence)"
        )


def text_pairs_given(x: Any) -> bool | None:
    """Whether text `x` (what `fit` / `predict` take: in memory, or a
    `tf.data.Dataset` of text) holds pairs; None when `x` is not text (ids)."""
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        # A tuple element is Keras' (x, y[, sample_weight]): pairs come as a dict.
        spec = spec[0] if isinstance(spec, tuple) else spec
        if not is_text_spec(spec):
            return None
        return isinstance(spec, Mapping) and TEXT_PAIR in spec
    if not is_text(x):
        return None
    try:
        return split_segments(x)[1] is not None
    except ValueError:  # malformed: the preprocessor names what is wrong
        return None


def is_text_spec(spec: Any) -> bool:
    """Whether a dataset's element spec (its `x` part) describes raw text."""
    if isinstance(spec, Mapping):
        return TEXT in spec
    if isinstance(spec, tuple):
        return len(spec) == 2 and all(is_text_spec(part) for part in spec)
    return isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPreprocessor(keras.layers.Layer):
    """Text (one segment or a pair) -> `input_ids`, `input_mask`, `segment_ids`.

    Args:
      vocabulary: the word pieces, a list (`vocabulary[id]`), or a vocab.txt path.
      lowercase: True for uncased checkpoints (lowercase and strip accents).
      seq_length: pieces per sequence, `[CLS]` and `[SEP]`s included.
      max_chars_per_word: longer words become `[UNK]` (200, as the original).
      strip_accents, special_tokens: `BertTokenizer`'s (HuggingFace's
        settings; `from_pretrained` reads them from tokenizer_config.json).

    Output: a dict of int32 (B, seq_length) tensors.
    """

    def __init__(
        self,
        vocabulary: Sequence[str] | str | None = None,
        lowercase: bool = True,
        seq_length: int = 128,
        max_chars_per_word: int = 200,
        strip_accents: bool | None = None,
        special_tokens: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(seq_length, int) or seq_length < 3:
            raise ValueError(
                f"seq_length must be an integer >= 3 ([CLS], [SEP] and one piece), "
                f"got {seq_length!r}"
            )
        self.lowercase = bool(lowercase)
        self.seq_length = seq_length
        self.max_chars_per_word = max_chars_per_word
        self.strip_accents = strip_accents
        self.special_tokens = tuple(special_tokens)
        # None until `set_vocabulary`: a config alone (no vocabulary in it) gives
        # a layer that `keras.models.load_model` completes from its assets.
        self._tokenizer: BertTokenizer | None = None
        if vocabulary is not None:
            self.set_vocabulary(vocabulary)
        # Strings in: no float casting, plain Python lists allowed.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    @classmethod
    def from_pretrained(
        cls,
        path: Any,
        *,
        seq_length: int = 128,
        lowercase: bool | None = None,
        vocab_file: str | None = None,
        **kwargs: Any,
    ) -> BertPreprocessor:
        """The preprocessor of a pretrained checkpoint: its vocabulary and casing
        (`path`: anything `keras_bert.checkpoints.resolve` reads, or what it
        returned; `lowercase=` that contradicts the checkpoint fails, naming both)."""
        from keras_bert.checkpoints.source import (
            PretrainedSource,
            resolve,
            tokenizer_options,
            tokenizer_settings,
        )

        source = path if isinstance(path, PretrainedSource) else resolve(path)
        if seq_length > source.config.max_position_embeddings:
            raise ValueError(
                f"seq_length {seq_length} exceeds the {source.path} encoder's "
                f"{source.config.max_position_embeddings} positions"
            )
        vocab_file, lowercase = tokenizer_settings(source, vocab_file, lowercase)
        return cls(
            vocab_file,
            lowercase=lowercase,
            seq_length=seq_length,
            **{**tokenizer_options(source), **kwargs},
        )

    from_preset = from_pretrained

    @classmethod
    def from_tokenizer(
        cls, tokenizer: BertTokenizer, seq_length: int = 128, **kwargs: Any
    ) -> BertPreprocessor:
        """A preprocessor around `tokenizer` itself: its vocabulary and
        settings, and what it has already traced (a command that counted its
        texts' unknown pieces with it does not trace it a second time)."""
        preprocessor = cls(
            lowercase=tokenizer.lowercase,
            seq_length=seq_length,
            max_chars_per_word=tokenizer.max_chars_per_word,
            strip_accents=tokenizer.strip_accents,
            special_tokens=tokenizer.special_tokens,
            **kwargs,
        )
        preprocessor._tokenizer = tokenizer
        return preprocessor

    def set_vocabulary(self, vocabulary: Sequence[str] | str) -> None:
        """The word pieces (a list, `vocabulary[id]`, or a vocab.txt path)."""
        self._tokenizer = BertTokenizer(
            vocabulary,
            lowercase=self.lowercase,
            max_chars_per_word=self.max_chars_per_word,
            strip_accents=self.strip_accents,
            special_tokens=self.special_tokens,
        )

    @property
    def tokenizer(self) -> BertTokenizer:
        if self._tokenizer is None:
            raise ValueError(
                f"BertPreprocessor {self.name!r} has no vocabulary: it was built "
                "from a config alone; call set_vocabulary(...), or load the whole "
                "model with keras.models.load_model, which reads it from the "
                "file's assets"
            )
        return self._tokenizer

    @property
    def vocabulary(self) -> list[str]:
        return self.tokenizer.vocab

    @property
    def has_vocabulary(self) -> bool:
        """False for a preprocessor built from its config alone, until
        `set_vocabulary` (or `keras.models.load_model`'s assets) gives it one."""
        return self._tokenizer is not None

    def call(self, inputs: Any) -> dict[str, tf.Tensor]:
        text, text_pair = split_segments(inputs)
        ids_a = self.tokenizer.tokenize(clean_utf8(as_text_batch(text, TEXT)))  # (B, P)
        if text_pair is None:
            return self.tokenizer.pack(ids_a, seq_length=self.seq_length)
        text, text_pair = as_text_batch(text, TEXT), as_text_batch(text_pair, TEXT_PAIR)
        check = check_same_rows(text, text_pair)
        with tf.control_dependencies([check] if check is not None else []):
            ids_b = self.tokenizer.tokenize(clean_utf8(text_pair))
        return self.tokenizer.pack(ids_a, ids_b, seq_length=self.seq_length)  # (B, T) each

    def windows(self, text: Any, stride: int) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        """Single texts longer than the sequence -> overlapping windows, as
        run_squad cuts contexts: `seq_length - 2` pieces each, a window
        starting every `stride` pieces until one reaches the text's end.

        Returns the windows' features (N, T), texts in order, and the number
        of windows of each text (B,) (1 for a text that fits, or is empty)."""
        if not isinstance(stride, int) or isinstance(stride, bool) or stride < 1:
            raise ValueError(f"stride must be a positive integer, got {stride!r}")
        refuse_windows_of_pairs(text)
        ids = self.tokenizer.tokenize(clean_utf8(as_text_batch(text, TEXT)))  # (B, P)
        room = self.seq_length - 2
        length = ids.row_lengths()  # (B,)
        count = 1 + (tf.maximum(length - room, 0) + stride - 1) // stride  # (B,)
        text_of = tf.repeat(tf.range(tf.size(length, out_type=tf.int64)), count)  # (N,)
        start = tf.ragged.range(count).flat_values * stride  # (N,) in the text
        end = tf.minimum(start + room, tf.gather(length, text_of))
        first = tf.gather(ids.row_starts(), text_of)
        pieces = tf.gather(ids.flat_values, tf.ragged.range(first + start, first + end))
        return self.tokenizer.pack(pieces, seq_length=self.seq_length), count

    def encode(self, inputs: Any, chunk_size: int = 1024) -> dict[str, np.ndarray]:
        """In-memory text -> NumPy features (N, seq_length), tokenized once in
        chunks: what `fit` on a list of strings trains on, epoch after epoch."""
        text, text_pair = split_segments(inputs)
        text = as_text_batch(text, TEXT)
        if text_pair is not None:
            text_pair = as_text_batch(text_pair, TEXT_PAIR)
            check_same_rows(text, text_pair)
        parts = []
        for start in range(0, max(int(text.shape[0]), 1), chunk_size):
            chunk = text[start : start + chunk_size]
            pair = None if text_pair is None else text_pair[start : start + chunk_size]
            parts.append(
                {
                    name: value.numpy()
                    for name, value in self(chunk if pair is None else (chunk, pair)).items()
                }
            )
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    def compute_output_spec(self, inputs: Any) -> dict[str, keras.KerasTensor]:
        return {
            name: keras.KerasTensor((None, self.seq_length), dtype="int32")
            for name in ("input_ids", "input_mask", "segment_ids")
        }

    def get_config(self) -> dict:
        # No vocabulary: it is an asset (`save_assets`), not 30,000 config strings.
        return {
            **super().get_config(),
            "lowercase": self.lowercase,
            "seq_length": self.seq_length,
            "max_chars_per_word": self.max_chars_per_word,
            "strip_accents": self.strip_accents,
            "special_tokens": list(self.special_tokens),
        }

    def save_assets(self, dir_path: str) -> None:
        with open(os.path.join(dir_path, VOCAB_ASSET), "w", encoding="utf-8") as f:
            f.writelines(f"{token}\n" for token in self.vocabulary)

    def load_assets(self, dir_path: str) -> None:
        path = os.path.join(dir_path, VOCAB_ASSET)
        if os.path.exists(path):
            self.set_vocabulary(path)
        elif self._tokenizer is None:
            # `.keras` files written before the vocabulary became an asset
            # carry it in the config instead, and have a tokenizer by now.
            raise ValueError(
                f"BertPreprocessor {self.name!r}: the saved model has no "
                f"{VOCAB_ASSET} among its assets, nor a vocabulary in its config"
            )
