"""BertPreprocessor: one or two text segments -> BERT's three inputs, in the graph.

A Keras layer, so it lives inside a task model (saved with it in `.keras`,
carried into the exported SavedModel) and also maps over a `tf.data.Dataset`:

    preprocessor = BertPreprocessor("vocab.txt", seq_length=128)  # or the token list
    preprocessor(["a sentence"])                       # single sentences
    preprocessor((["a question"], ["an answer"]))      # pairs, as a tuple
    preprocessor({"text": [...], "text_pair": [...]})  # pairs, by name
    dataset.map(lambda x, y: (preprocessor(x), y))

It carries its vocabulary (in its config: a `.keras` file is self-contained),
its casing and its sequence length. Packing is the original's: `[CLS] A [SEP]`
or `[CLS] A [SEP] B [SEP]`, over-long pairs trimmed one piece at a time from
the longer segment (`BertTokenizer.pack`), so the ids equal those of
`keras_bert.tasks.text_classification.encode_texts` and of the exported
models' `serving_default`.

Legend for shape comments: B = batch, T = sequence length.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.preprocessing.text_ops import clean_utf8
from keras_bert.text.tokenizer import BertTokenizer

TEXT = "text"
TEXT_PAIR = "text_pair"


def as_text_batch(value: Any, name: str = TEXT) -> tf.Tensor:
    """Python strings, a NumPy array or a string tensor -> a (B,) string tensor;
    a single string becomes a batch of one. Other inputs: a TypeError naming `name`."""
    if isinstance(value, (str, bytes)):
        value = [value]
    tensor = tf.convert_to_tensor(value) if not isinstance(value, tf.Tensor) else value
    if tensor.dtype != tf.string:
        raise TypeError(f"`{name}` must hold strings, got {tensor.dtype.name} values")
    if tensor.shape.rank == 2 and tensor.shape[1] == 1:
        tensor = tensor[:, 0]  # a column of a table
    if tensor.shape.rank != 1:
        raise ValueError(f"`{name}` must be a batch of strings (B,), got shape {tensor.shape}")
    return tensor


def split_segments(inputs: Any) -> tuple[Any, Any | None]:
    """The layer's accepted inputs -> (text, text_pair or None)."""
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - {TEXT, TEXT_PAIR})
        if TEXT not in inputs or unknown:
            raise ValueError(f"text inputs as a dict take the keys {TEXT!r} and optionally "
                             f"{TEXT_PAIR!r}; got {sorted(inputs)}")
        return inputs[TEXT], inputs.get(TEXT_PAIR)
    if isinstance(inputs, tuple):
        if len(inputs) != 2:
            raise ValueError(f"text inputs as a tuple are (text, text_pair); got {len(inputs)} "
                             "items")
        return inputs
    return inputs, None


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
        return len(inputs) > 0 and isinstance(inputs[0], (str, bytes))
    return False


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

    Output: a dict of int32 (B, seq_length) tensors.
    """

    def __init__(self, vocabulary: Sequence[str] | str, lowercase: bool = True,
                 seq_length: int = 128, max_chars_per_word: int = 200, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(seq_length, int) or seq_length < 3:
            raise ValueError(f"seq_length must be an integer >= 3 ([CLS], [SEP] and one piece), "
                             f"got {seq_length!r}")
        self.tokenizer = BertTokenizer(vocabulary, lowercase=lowercase,
                                       max_chars_per_word=max_chars_per_word)
        self.lowercase = bool(lowercase)
        self.seq_length = seq_length
        self.max_chars_per_word = max_chars_per_word
        # Strings in: no float casting, plain Python lists allowed.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    @property
    def vocabulary(self) -> list[str]:
        return self.tokenizer.vocab

    def call(self, inputs: Any) -> dict[str, tf.Tensor]:
        text, text_pair = split_segments(inputs)
        ids_a = self.tokenizer.tokenize(clean_utf8(as_text_batch(text, TEXT)))  # (B, P)
        if text_pair is None:
            return self.tokenizer.pack(ids_a, seq_length=self.seq_length)
        ids_b = self.tokenizer.tokenize(clean_utf8(as_text_batch(text_pair, TEXT_PAIR)))
        return self.tokenizer.pack(ids_a, ids_b, seq_length=self.seq_length)  # (B, T) each

    def windows(self, text: Any, stride: int) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        """Single texts longer than the sequence -> overlapping windows, as
        run_squad cuts contexts: `seq_length - 2` pieces each, a window
        starting every `stride` pieces until one reaches the text's end.

        Returns the windows' features (N, T), texts in order, and the number
        of windows of each text (B,) (1 for a text that fits, or is empty)."""
        if not isinstance(stride, int) or stride < 1:
            raise ValueError(f"stride must be a positive integer, got {stride!r}")
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
            if text_pair.shape[0] != text.shape[0]:
                raise ValueError(f"one `{TEXT_PAIR}` per `{TEXT}`: got {text.shape[0]} texts "
                                 f"and {text_pair.shape[0]} pairs")
        parts = []
        for start in range(0, max(int(text.shape[0]), 1), chunk_size):
            chunk = text[start:start + chunk_size]
            pair = None if text_pair is None else text_pair[start:start + chunk_size]
            parts.append({name: value.numpy() for name, value in
                          self(chunk if pair is None else (chunk, pair)).items()})
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    def compute_output_spec(self, inputs: Any) -> dict[str, keras.KerasTensor]:
        return {name: keras.KerasTensor((None, self.seq_length), dtype="int32")
                for name in ("input_ids", "input_mask", "segment_ids")}

    def get_config(self) -> dict:
        return {**super().get_config(), "vocabulary": list(self.vocabulary),
                "lowercase": self.lowercase, "seq_length": self.seq_length,
                "max_chars_per_word": self.max_chars_per_word}
