"""Tagging in the graph: whitespace words -> first-piece features, and per-word
tags -> conlleval entities with character offsets.

The text is split into words at whitespace as the original BERT tokenizer
splits it, `whitespace_tokenize(_clean_text(text))` (NUL, U+FFFD and control
characters deleted), the way CoNLL-style training data is written. The spans
come from the tokenizer's `whitespace_spans`, so the tagger cleans text where
every task does. Each word (its exact text in the input, from its first to
its last kept character) is tokenized and tagged on its first word piece, as
in training (`keras_bert.datasets.tagging`). Words are packed
in order while they fit in `seq_length - 2` pieces; the words after the first
one that does not fit are not seen by the model and get the tag `O`.
Entities are the tag chunks by conlleval's rules (BIO, IOBES, bare IO labels),
as `keras_bert.datasets.metrics.get_entities`.

`BertTokenClassifier.predict` on text and the exported tagger's signatures
both run `WordTagger.tag_words`.

Legend for shape comments: B = batch, W = words, E = entities, P = word
pieces, T = sequence length, K = tags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import tensorflow as tf

from keras_bert.preprocessing.text_ops import char_offsets, clean_utf8, surface_text
from keras_bert.preprocessing.traced import traced_pack, traced_tokenizer, traced_whitespace_spans

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer

OUTSIDE = "O"
# Chunk prefixes as integer codes for the in-graph conlleval rules.
_O, _B, _I, _E, _S = range(5)


def split_tag(tag: str) -> tuple[str, str]:
    """conlleval's reading of a tag: (prefix, entity type); a bare `PER` is `I-PER`."""
    if tag in (OUTSIDE, ""):
        return OUTSIDE, ""
    prefix, _, entity = tag.partition("-")
    if prefix not in ("B", "I", "E", "S") or not entity:
        return "I", tag
    return prefix, entity


class WordTagger:
    """The tagger's pre- and post-processing around a model call.

    Args:
      tokenizer: the model's `BertTokenizer`.
      seq_length: pieces per sequence.
      label_names: the tag names, index-aligned with the logits.
    """

    def __init__(
        self, tokenizer: BertTokenizer, seq_length: int, label_names: Sequence[str]
    ) -> None:
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.tokenize_with_offsets = traced_tokenizer(tokenizer)
        self.label_names = [str(name) for name in label_names]
        split = [split_tag(name) for name in self.label_names]
        self.entity_types = sorted({entity for _, entity in split if entity})
        codes = {"O": _O, "B": _B, "I": _I, "E": _E, "S": _S}
        self._prefix_codes = [codes[prefix] for prefix, _ in split]
        # Type 0 is "no entity"; entity types count from 1.
        self._type_codes = [self.entity_types.index(e) + 1 if e else 0 for _, e in split]

    # === Words -> features ===

    def words_and_features(
        self, text: tf.Tensor
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor, tf.Tensor, dict[str, tf.Tensor]]:
        """(B,) text -> words with byte spans (B, W), each word's first-piece
        position or -1 (B, W) dense, and the packed features."""
        starts, ends = traced_whitespace_spans(self.tokenizer)(text)  # (B, W)
        # Each word cut from its own row by broadcasting the text (B, 1) over
        # the padded spans (B, W): gathering the text once per word instead
        # copied the whole text per word, memory quadratic in its length
        # (20,000 words of a 100 KB text took 1.7 GB).
        words = tf.RaggedTensor.from_tensor(
            surface_text(text, starts.to_tensor(), ends.to_tensor()),
            lengths=starts.row_lengths(),
        )  # (B, W)
        ids, _, _ = self.tokenize_with_offsets(words.flat_values)  # (all words, P)
        counts = words.with_flat_values(ids.row_lengths()).to_tensor()  # (B, W) pieces per word
        # Words in order while they fit between [CLS] and [SEP].
        total = tf.math.cumsum(counts, axis=1)  # (B, W)
        fits = tf.logical_and(total <= self.seq_length - 2, counts > 0)  # (B, W)
        first = tf.where(fits, 1 + total - counts, -1)  # (B, W): after [CLS] and earlier words
        fits = tf.RaggedTensor.from_tensor(fits, lengths=words.row_lengths())
        kept = tf.RaggedTensor.from_row_lengths(
            tf.ragged.boolean_mask(ids, fits.flat_values),
            tf.reduce_sum(tf.cast(fits, tf.int64), axis=1),
        )  # (B, kept words, P)
        features = traced_pack(self.tokenizer, self.seq_length)(kept.merge_dims(1, 2))
        return words, starts, ends, first, features

    # === Logits -> tags and entities ===

    def tag_words(
        self, text: tf.Tensor, run_model: Callable[[dict], tf.Tensor]
    ) -> dict[str, tf.Tensor]:
        """(B,) text -> per-word tokens, tags and offsets, and the entities;
        `run_model` maps the features to the tagger's logits (B, T, K)."""
        text = clean_utf8(text)
        words, starts, ends, first, features = self.words_and_features(text)
        logits = run_model(features)  # (B, T, K)
        predicted = tf.argmax(
            tf.gather(logits, tf.maximum(first, 0), batch_dims=1), axis=-1, output_type=tf.int64
        )  # (B, W)
        # Index K is "O": words the model did not see, and padding.
        index = tf.where(first >= 0, predicted, len(self.label_names))  # (B, W)
        real = tf.sequence_mask(words.row_lengths(), tf.shape(index)[1])  # (B, W)
        names = tf.constant(self.label_names + [OUTSIDE])
        outputs = {
            "tokens": words.to_tensor(""),
            "tags": tf.where(real, tf.gather(names, index), ""),
            "token_start": char_offsets(text, starts).to_tensor(-1),
            "token_end": char_offsets(text, ends).to_tensor(-1),
            "num_tokens": words.row_lengths(),
        }
        outputs.update(self.entities(text, index, starts.to_tensor(), ends.to_tensor()))
        return outputs

    def entities(
        self, text: tf.Tensor, index: tf.Tensor, word_starts: tf.Tensor, word_ends: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """conlleval chunks of (B, W) tag indices -> padded entity outputs (B, E)."""
        prefixes = tf.constant(self._prefix_codes + [_O])
        types = tf.constant(self._type_codes + [0])
        batch = tf.shape(index)[0]
        # A final "O" closes the last chunk.
        index = tf.concat([index, tf.fill([batch, 1], tf.cast(len(self.label_names), tf.int64))], 1)
        prefix, kind = tf.gather(prefixes, index), tf.gather(types, index)  # (B, W + 1)
        prev_prefix = tf.concat([tf.fill([batch, 1], _O), prefix[:, :-1]], axis=1)
        prev_kind = tf.concat([tf.zeros([batch, 1], tf.int32), kind[:, :-1]], axis=1)

        def among(codes, values):
            return tf.reduce_any(tf.stack([codes == v for v in values]), axis=0)

        new_type = kind != prev_kind
        ends = (
            among(prev_prefix, (_E, _S))  # a chunk ends at the word before
            | (among(prev_prefix, (_B, _I)) & among(prefix, (_B, _S, _O)))
            | ((prev_prefix != _O) & new_type)
        )
        begins = (
            among(prefix, (_B, _S))
            | (among(prev_prefix, (_E, _S, _O)) & among(prefix, (_E, _I)))
            | ((prefix != _O) & new_type)
        )
        positions = tf.broadcast_to(
            tf.range(tf.shape(index, out_type=tf.int64)[1]), tf.shape(index, out_type=tf.int64)
        )
        first = tf.ragged.boolean_mask(positions, begins)  # (B, E) word indices
        last = tf.ragged.boolean_mask(positions, ends) - 1  # (B, E)
        real = tf.sequence_mask(first.row_lengths(), tf.shape(first.to_tensor())[1])  # (B, E)
        first, last = first.to_tensor(0), last.to_tensor(0)
        byte_start = tf.gather(word_starts, first, batch_dims=1)  # (B, E)
        byte_end = tf.gather(word_ends, last, batch_dims=1)
        entity_types = tf.constant([""] + self.entity_types)
        return {
            "entity_type": tf.where(
                real, tf.gather(entity_types, tf.gather(kind, first, batch_dims=1)), ""
            ),
            "entity_start": tf.where(real, char_offsets(text, byte_start), -1),
            "entity_end": tf.where(real, char_offsets(text, byte_end), -1),
            "entity_text": tf.where(real, surface_text(text, byte_start, byte_end), ""),
            "num_entities": tf.reduce_sum(tf.cast(real, tf.int64), axis=1),
        }


def whitespace_words(tokenizer: BertTokenizer, texts: Sequence[str]) -> list[list[str]]:
    """Python texts -> each one's words, as `WordTagger` splits them in the
    graph (the same spans), for training and scoring on text."""
    if len(texts) == 0:
        return []
    from keras_bert.text.tokenizer import text_tensor

    text = clean_utf8(text_tensor(texts))
    starts, ends = traced_whitespace_spans(tokenizer)(text)
    return [
        [row[start:end].decode("utf-8") for start, end in zip(row_starts, row_ends)]
        for row, row_starts, row_ends in zip(text.numpy(), starts.numpy(), ends.numpy())
    ]


def tag_names(num_labels: int, label_names: Sequence[str] | None) -> list[str]:
    """The tagger's tag names: its own, else "0", "1", ..."""
    if label_names is None:
        return [str(i) for i in range(num_labels)]
    if len(label_names) != num_labels:
        raise ValueError(f"{len(label_names)} label_names for a tagger of {num_labels} tags")
    return [str(name) for name in label_names]
