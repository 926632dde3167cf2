"""`keras-bert encode`: sentence embeddings (mean-pooled, L2-normalised encoder
outputs: a `BertSentenceEncoder`'s) of a checkpoint, or of a random encoder of
a preset size."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from keras_bert.checkpoints.source import resolve, tokenizer_options, tokenizer_settings
from keras_bert.config import BertConfig
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.sentence_encoder import BertSentenceEncoder
from keras_bert.preprocessing.preprocessor import BertPreprocessor


def encode_sentences(
    sentences: Sequence[str],
    init_checkpoint: str | None = None,
    vocab_file: str | None = None,
    preset: str = "tiny",
    seq_length: int = 128,
    lowercase: bool | None = None,
) -> Iterator[tuple[str, list[str], np.ndarray]]:
    """Yields (sentence, word pieces, embedding) for each sentence.

    `lowercase=None`: the checkpoint's casing (`tokenizer_settings`)."""
    source = resolve(init_checkpoint) if init_checkpoint else None
    # Decided before the weights load: a contradiction fails at once.
    vocab_file, lowercase = tokenizer_settings(source, vocab_file, lowercase)
    preprocessor = BertPreprocessor(
        vocab_file, lowercase=lowercase, seq_length=seq_length, **tokenizer_options(source)
    )
    if source is not None:
        encoder = BertEncoder.from_pretrained(source)
    else:
        encoder = BertEncoder(BertConfig.preset(preset))
    if seq_length > encoder.config.max_position_embeddings:
        raise ValueError(
            f"seq_length {seq_length} exceeds the encoder's "
            f"{encoder.config.max_position_embeddings} positions; use at most that"
        )
    model = BertSentenceEncoder(encoder, "mean", normalize=True, preprocessor=preprocessor)
    embeddings = model.encode(list(sentences))
    tokenizer = preprocessor.tokenizer
    for sentence, ids, embedding in zip(
        sentences, tokenizer.tokenize(sentences).to_list(), embeddings
    ):
        yield sentence, [tokenizer.vocab[i] for i in ids], np.asarray(embedding)
