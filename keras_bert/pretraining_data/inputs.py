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


def _read_tfrecords(path, size, compression_type):
    """Records of one file; a corrupted or truncated file fails with an error naming it.

    TFRecordDataset's own DataLossError does not say which file is broken, so
    uncompressed files are read with errors ignored and the bytes consumed
    (record + 16 bytes of framing each) checked against the file's size.
    """
    records = tf.data.TFRecordDataset(path, compression_type=compression_type)
    if compression_type:
        return records
    records = records.ignore_errors()
    end = tf.data.Dataset.from_tensors(tf.constant(b"")).map(lambda r: (r, True))
    stream = records.map(lambda r: (r, False)).concatenate(end)

    def count(consumed, element):
        record, is_end = element
        consumed += tf.where(is_end, tf.constant(0, tf.int64),
                             tf.cast(tf.strings.length(record), tf.int64) + 16)
        check = tf.debugging.Assert(
            tf.logical_or(tf.logical_not(is_end), tf.equal(consumed, size)),
            ["corrupted or truncated TFRecord file:", path, "read", consumed, "of", size,
             "bytes"])
        with tf.control_dependencies([check]):
            return consumed, (tf.identity(record), is_end)

    return (stream.scan(tf.constant(0, tf.int64), tf.autograph.experimental.do_not_convert(count))
            .filter(lambda record, is_end: tf.logical_not(is_end))
            .map(lambda record, is_end: record))


def _shuffled_epochs(files, sizes, seed):
    """A dataset of (path, size) pairs, in a new order every epoch, endlessly.

    With a `seed`, every iterator over it yields the same sequence: Keras's
    `fit` under a tf.distribute strategy opens (and drops) one iterator to
    build the model before training, and with a stateful shuffle the training
    iterator would then read another order than one device does. So epoch `e`
    is the stateless permutation keyed by (seed, e).
    """
    paths = tf.constant(files)
    sizes = tf.constant(sizes, tf.int64)
    if seed is None:
        return tf.data.Dataset.from_tensor_slices((paths, sizes)).shuffle(len(files)).repeat()

    def epoch(e):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(len(files)), seed=tf.stack([tf.constant(seed, tf.int64), e]))
        return tf.data.Dataset.from_tensor_slices((tf.gather(paths, order),
                                                   tf.gather(sizes, order)))

    return tf.data.Dataset.counter().flat_map(epoch)


def pretraining_dataset(file_pattern, seq_length, max_predictions_per_seq, batch_size,
                        is_training=True, with_next_sentence=True, input_context=None,
                        shuffle_buffer=10000, cycle_length=8, compression_type=None, seed=None,
                        dynamic_masking=False, masked_lm_prob=0.15, whole_word_mask=False,
                        vocab_file=None, vocab_size=None, cls_id=101, sep_id=102, mask_id=103):
    """Batches of pretraining examples from TFRecord shards.

    Each worker of a `tf.distribute` strategy reads its own files
    (`input_context`), and `batch_size` is then the per-replica batch.
    Batches always have the full size (`drop_remainder`) because TPUs need
    static shapes.

    Static masking (default) reads the masks written by
    `create-pretraining-data`. `dynamic_masking=True` reads unmasked records
    (`create-pretraining-data --no-mask`) and draws new masks inside tf.data
    every time a record is read, with the original's rules
    (`keras_bert.pretraining_data.dynamic_masking`): give `vocab_file` (needed for `whole_word_mask`),
    or `vocab_size` and the special ids.
    """
    files = list_files(file_pattern)
    spec = features.pretraining_feature_spec(seq_length, max_predictions_per_seq, with_next_sentence,
                                             with_masked_lm=not dynamic_masking)
    if dynamic_masking:
        from keras_bert.pretraining_data.dynamic_masking import MaskingVocab, mask_batch
        if vocab_file is not None:
            vocab = MaskingVocab.from_vocab_file(vocab_file)
        elif vocab_size is not None and not whole_word_mask:
            vocab = MaskingVocab(vocab_size, cls_id, sep_id, mask_id)
        else:
            raise ValueError("dynamic masking needs vocab_file (or vocab_size without "
                             "whole_word_mask)")
    if input_context is not None and input_context.num_input_pipelines > 1:
        # Worker i reads files i, i + n, ... (Dataset.shard's rule).
        files = files[input_context.input_pipeline_id::input_context.num_input_pipelines]
        if not files:
            raise ValueError(f"{file_pattern}: fewer files than the "
                             f"{input_context.num_input_pipelines} workers reading them")
    sizes = [tf.io.gfile.stat(path).length for path in files]
    if is_training:
        dataset = _shuffled_epochs(files, sizes, seed)
    else:
        dataset = tf.data.Dataset.from_tensor_slices((files, tf.constant(sizes, tf.int64)))
    dataset = dataset.interleave(
        lambda path, size: _read_tfrecords(path, size, compression_type),
        cycle_length=min(cycle_length, len(files)), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not is_training or seed is not None)
    if is_training:
        # The stream is endless, so reshuffling only matters for a new
        # iterator, which must replay the same order (see _shuffled_epochs).
        dataset = dataset.shuffle(shuffle_buffer, seed=seed,
                                  reshuffle_each_iteration=seed is None)
    dataset = dataset.map(lambda record: _decode(record, spec, file_pattern),
                          num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if dynamic_masking:
        # One seed per batch; new seeds on every pass over the data, so each
        # epoch sees new masks (reproducible when `seed` is given).
        # A training stream is endless: its epochs already get new seeds, and a
        # new iterator replays the same masks.
        seeds = tf.data.Dataset.random(
            seed=seed, rerandomize_each_iteration=not is_training or seed is None).batch(2)
        # No Python control flow depends on tensors here: skipping AutoGraph's
        # conversion of the tensorflow-text code saves seconds of tracing.
        dataset = tf.data.Dataset.zip((dataset, seeds)).map(
            tf.autograph.experimental.do_not_convert(
                lambda batch, batch_seed: mask_batch(
                    batch, batch_seed, vocab, max_predictions_per_seq, masked_lm_prob,
                    whole_word_mask)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None or None)
    return dataset.prefetch(tf.data.AUTOTUNE)
