"""Helpers for the pretraining-data tests: read our TFRecords, run the original.

The reference is Model Garden's copy of google-research/bert's
`create_pretraining_data.py` (`official.nlp.data.create_pretraining_data`).
"""

import random

import numpy as np
import tensorflow as tf

MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20


def read_records(
    files,
    seq_length=MAX_SEQ_LENGTH,
    max_predictions=MAX_PREDICTIONS,
    with_next_sentence=True,
    with_masked_lm=True,
):
    """All records of `files` as a dict of NumPy arrays (N, ...)."""
    from keras_bert import features

    spec = features.pretraining_feature_spec(
        seq_length, max_predictions, with_next_sentence, with_masked_lm=with_masked_lm
    )
    columns = {name: [] for name in spec}
    for batch in tf.data.TFRecordDataset(files).batch(4096):
        parsed = tf.io.parse_example(batch, spec)
        for name in spec:
            columns[name].append(parsed[name].numpy())
    return {name: np.concatenate(values) for name, values in columns.items()}


def original_documents(corpus_file, vocab_file):
    """The corpus tokenized by the original FullTokenizer, as the original reads it."""
    from official.nlp.tools import tokenization

    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    documents = [[]]
    with open(corpus_file, "rb") as f:
        for line in f:
            line = tokenization.convert_to_unicode(line).strip()
            if not line:
                documents.append([])
            tokens = tokenizer.tokenize(line)
            if tokens:
                documents[-1].append(tokens)
    return [d for d in documents if d], list(tokenizer.vocab.keys())


def original_instances(
    documents,
    vocab_words,
    dupe_factor,
    seed=12345,
    max_seq_length=MAX_SEQ_LENGTH,
    masked_lm_prob=0.15,
    do_whole_word_mask=False,
    max_predictions=MAX_PREDICTIONS,
):
    """The original's `create_training_instances` loop on tokenized documents."""
    from official.nlp.data import create_pretraining_data as original

    rng = random.Random(seed)
    documents = list(documents)
    rng.shuffle(documents)
    instances = []
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            instances.extend(
                original.create_instances_from_document(
                    documents,
                    index,
                    max_seq_length,
                    0.1,
                    masked_lm_prob,
                    max_predictions,
                    vocab_words,
                    rng,
                    do_whole_word_mask,
                )
            )
    return instances


def mask_actions(records):
    """Counts of predictions replaced by [MASK], kept, and replaced by another token."""
    weights = records["masked_lm_weights"] > 0
    at_positions = np.take_along_axis(records["input_ids"], records["masked_lm_positions"], axis=1)
    masked = (at_positions == 103) & weights
    kept = (at_positions == records["masked_lm_ids"]) & weights & ~masked
    return int(masked.sum()), int(kept.sum()), int((weights & ~masked & ~kept).sum())
