"""tf.data readers that feed the models: pretraining TFRecords and task datasets.

Elements are dicts keyed by the original BERT feature names (see features.py).
"""

import tensorflow as tf

from keras_bert import features


def _decode(serialized, spec, source):
    parsed = tf.io.parse_single_example(serialized, spec)
    # tf.Example only stores int64, but TPUs want int32, so cast after parsing.
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in parsed.items()}


def list_files(file_pattern):
    """Comma-separated file patterns (local or gs://) -> sorted list of files."""
    files = []
    for pattern in str(file_pattern).split(","):
        matched = tf.io.gfile.glob(pattern.strip())
        if not matched:
            raise FileNotFoundError(f"no files match {pattern.strip()!r}")
        files.extend(matched)
    return sorted(set(files))


def pretraining_dataset(file_pattern, seq_length, max_predictions_per_seq, batch_size,
                        is_training=True, with_next_sentence=True, input_context=None,
                        shuffle_buffer=10000, cycle_length=8, compression_type=None, seed=None):
    """Batches of pre-masked pretraining examples from TFRecord shards.

    Each worker of a `tf.distribute` strategy reads its own files
    (`input_context`), and `batch_size` is then the per-replica batch.
    Batches always have the full size (`drop_remainder`) because TPUs need
    static shapes.
    """
    files = list_files(file_pattern)
    spec = features.pretraining_feature_spec(seq_length, max_predictions_per_seq, with_next_sentence)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed).repeat()
    dataset = dataset.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression_type),
        cycle_length=min(cycle_length, len(files)), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not is_training or seed is not None)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)
    dataset = dataset.map(lambda record: _decode(record, spec, file_pattern),
                          num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
