"""Small synthetic pretraining TFRecords (random ids, the exact feature spec) for tests.

Every example is a valid pretraining instance: [CLS] A [SEP] B [SEP] then
padding, masked positions inside the real tokens, and padded predictions
(weight 0) at the end when fewer than `max_predictions_per_seq` are masked.
"""

import numpy as np
import tensorflow as tf

from keras_bert import features

CLS, SEP, MASK = 2, 3, 4
FIRST_WORD_ID = 5


def random_instance(rng, vocab_size, seq_length, max_predictions_per_seq, full_predictions=False):
    length = int(rng.integers(seq_length // 2, seq_length + 1))
    split = int(rng.integers(2, length - 2))
    ids = rng.integers(FIRST_WORD_ID, vocab_size, size=length)
    ids[0], ids[split], ids[length - 1] = CLS, SEP, SEP
    segments = np.zeros(length, np.int64)
    segments[split + 1 :] = 1
    candidates = [i for i in range(1, length - 1) if i != split]
    count = (
        max_predictions_per_seq
        if full_predictions
        else int(rng.integers(1, max_predictions_per_seq + 1))
    )
    positions = np.sort(rng.choice(candidates, size=count, replace=False))
    masked_ids = ids[positions].copy()
    ids[positions] = MASK

    def pad(values, size, fill=0):
        return list(values) + [fill] * (size - len(values))

    return {
        "input_ids": pad(ids, seq_length),
        "input_mask": pad([1] * length, seq_length),
        "segment_ids": pad(segments, seq_length),
        "masked_lm_positions": pad(positions, max_predictions_per_seq),
        "masked_lm_ids": pad(masked_ids, max_predictions_per_seq),
        "masked_lm_weights": pad([1.0] * count, max_predictions_per_seq, 0.0),
        "next_sentence_labels": [int(rng.integers(0, 2))],
    }


def write_records(
    path,
    num_examples,
    vocab_size=32,
    seq_length=16,
    max_predictions_per_seq=4,
    seed=0,
    full_predictions=False,
):
    """Writes `num_examples` random instances to the TFRecord file `path`;
    `full_predictions` masks `max_predictions_per_seq` tokens in every one."""
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(num_examples):
            instance = random_instance(
                rng, vocab_size, seq_length, max_predictions_per_seq, full_predictions
            )
            feature = {
                name: (
                    features.float_feature(values)
                    if name == "masked_lm_weights"
                    else features.int64_feature(values)
                )
                for name, values in instance.items()
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    return str(path)
