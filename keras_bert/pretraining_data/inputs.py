"""tf.data readers that feed the models: pretraining TFRecords and task datasets.

Elements are dicts keyed by the original BERT feature names (see features.py).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Mapping

import tensorflow as tf

from keras_bert import features
from keras_bert.errors import UserError

_PARTIAL = re.compile(r"\.partial-\d+(\.[^.]+)?$")


def _decode(serialized, spec, source):
    parsed = tf.io.parse_single_example(serialized, spec)
    # tf.Example only stores int64, but TPUs want int32, so cast after parsing.
    return {
        name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
        for name, value in parsed.items()
    }


def list_files(file_pattern: str) -> list[str]:
    """Comma-separated file patterns (local or gs://) -> sorted list of files."""
    files = []
    for pattern in str(file_pattern).split(","):
        matched = tf.io.gfile.glob(pattern.strip())
        # A glob's match may be an unfinished write (`NAME.partial-PID`, see
        # safe_output.temporary_sibling): never records to train on.
        partial = [name for name in matched if _PARTIAL.search(os.path.basename(name))]
        if partial and partial != [pattern.strip()]:
            matched = [name for name in matched if name not in partial]
            print(
                f"warning: {pattern.strip()}: skipping {len(partial)} unfinished write(s) "
                f"({', '.join(partial[:3])}{' ...' if len(partial) > 3 else ''})",
                file=sys.stderr,
                flush=True,
            )
        if not matched:
            raise FileNotFoundError(f"no files match {pattern.strip()!r}")
        files.extend(matched)
    return sorted(set(files))


def check_tfrecord_framing(path: str) -> None:
    """Walks the record headers of an uncompressed local TFRecord file (a seek
    per record, no payload read) and raises ValueError naming the file if it
    is truncated or not a TFRecord file. Remote (gs://) files are left to
    `_read_tfrecords`' check at read time."""
    import struct

    if "://" in path:
        return
    size = os.path.getsize(path)
    position = 0
    with open(path, "rb") as f:
        while position < size:
            header = f.read(8)
            if len(header) < 8:
                length = None
            else:
                (length,) = struct.unpack("<Q", header)
            # 8 bytes length + 4 CRC of it, the payload, 4 CRC of the payload.
            if length is None or position + 16 + length > size:
                raise ValueError(
                    f"{path}: corrupted or truncated TFRecord file (the record at "
                    f"byte {position} runs past the file's {size} bytes); "
                    "write it again with create-pretraining-data"
                )
            position += 16 + length
            f.seek(position)


def check_pretraining_records(
    file_pattern: str,
    seq_length: int,
    max_predictions_per_seq: int,
    with_next_sentence: bool = True,
    field: str = "train_files",
) -> list[str]:
    """Reads the first record of every file of `file_pattern` and compares its
    features with the run's settings, so that a mismatch is one message naming
    the file and the setting instead of a parse error from inside training."""
    files = list_files(file_pattern)
    for path in files:
        check_tfrecord_framing(path)
    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.OpError:
            raise ValueError(f"{field}: {path} is not a TFRecord file") from None
        if first is None:
            raise ValueError(f"{field}: {path} holds no records")
        try:
            example = tf.train.Example.FromString(first.numpy()).features.feature
        except Exception:  # protobuf's DecodeError
            raise ValueError(f"{field}: {path} does not hold tf.train.Example records") from None
        lengths = {
            name: len(getattr(feature, feature.WhichOneof("kind")).value)
            for name, feature in example.items()
            if feature.WhichOneof("kind")
        }
        hint = "set the config field to the records' value, or write records to match"
        for name in features.ENCODER_INPUTS:
            if name not in lengths:
                raise ValueError(
                    f"{field}: {path} has no feature {name!r}: not pretraining records"
                )
            if lengths[name] != seq_length:
                raise ValueError(
                    f"{field}: {path} holds records of length {lengths[name]}, "
                    f"the config's seq_length is {seq_length}; {hint}"
                )
        if "masked_lm_positions" not in lengths:
            raise ValueError(
                f"{field}: {path} holds unmasked records (create-pretraining-data "
                "--no-mask), which need dynamic masking"
            )
        if lengths["masked_lm_positions"] != max_predictions_per_seq:
            raise ValueError(
                f"{field}: {path} holds records of "
                f"{lengths['masked_lm_positions']} predictions, the config's "
                f"max_predictions_per_seq is {max_predictions_per_seq}; {hint}"
            )
        has_labels = features.NEXT_SENTENCE_LABELS in lengths
        if with_next_sentence and not has_labels:
            raise ValueError(
                f"{field}: {path} has no next_sentence_labels (written with "
                "--objective none); set the config's objective to none"
            )
    return files


# The assertion `_read_tfrecords` fails with: its message names the file.
CORRUPTED = "corrupted or truncated TFRecord file:"


def find_corrupted_record(
    path: str, compression_type: str | None = None, batch: int = 1024
) -> tuple[int, str] | None:
    """(record index, TensorFlow's words) of the first record of `path` that
    fails to read (a checksum that does not match: a flipped or overwritten
    byte), or None if every record reads. Reads the file: for the error path
    only."""

    def records(skip=0):
        return tf.data.TFRecordDataset(path, compression_type=compression_type).skip(skip)

    good = 0
    try:
        for lengths in records().map(tf.strings.length).batch(batch):
            good += int(lengths.shape[0])
        return None
    except (tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
        error = e
    # The bad record is in the batch after `good`: one record at a time there.
    try:
        for _ in records(good):
            good += 1
    except (tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
        error = e
    # TensorFlow's words ("corrupted record at 273"), without its op names.
    words = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", str(error.message)).strip()
    return good, (words.splitlines() or [type(error).__name__])[0].strip()


def corrupted_records_error(
    error: BaseException, sources: Mapping[str, str | None], compression_type: str | None = None
) -> UserError | None:
    """A TFRecord read error from inside training (`_read_tfrecords`' failed
    check, or TensorFlow's DataLossError, which names no file) as one error
    naming the file, the record and what to do; None for any other error.
    `sources`: config field -> its file patterns (train_files, eval_files)."""
    message = str(getattr(error, "message", error))
    ours = CORRUPTED in message
    if not (ours or isinstance(error, tf.errors.DataLossError)):
        return None
    for field, pattern in sources.items():
        if not pattern:
            continue
        for path in list_files(pattern):
            if ours and f"[{path}]" not in message:
                continue
            found = find_corrupted_record(path, compression_type)
            if found is None and not ours:
                continue
            what = (
                f"record {found[0]} (counted from 0) fails its checksum, a changed or lost "
                f"byte (TensorFlow: {found[1]})"
                if found is not None
                else "it ends inside a record (truncated)"
            )
            return UserError(
                f"{field}: {path}: corrupted TFRecord file: {what}; the checkpoints written "
                f"so far are kept. Write the file again (keras-bert create-pretraining-data) "
                f"or leave it out of {field}, then rerun to resume"
            )
    return None


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
        consumed += tf.where(
            is_end, tf.constant(0, tf.int64), tf.cast(tf.strings.length(record), tf.int64) + 16
        )
        check = tf.debugging.Assert(
            tf.logical_or(tf.logical_not(is_end), tf.equal(consumed, size)),
            [CORRUPTED, path, "read", consumed, "of", size, "bytes"],
        )
        with tf.control_dependencies([check]):
            return consumed, (tf.identity(record), is_end)

    return (
        stream.scan(tf.constant(0, tf.int64), tf.autograph.experimental.do_not_convert(count))
        .filter(lambda record, is_end: tf.logical_not(is_end))
        .map(lambda record, is_end: record)
    )


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
            tf.range(len(files)), seed=tf.stack([tf.constant(seed, tf.int64), e])
        )
        return tf.data.Dataset.from_tensor_slices(
            (tf.gather(paths, order), tf.gather(sizes, order))
        )

    return tf.data.Dataset.counter().flat_map(epoch)


def pretraining_dataset(
    file_pattern: str,
    seq_length: int,
    max_predictions_per_seq: int,
    batch_size: int,
    is_training: bool = True,
    with_next_sentence: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    shuffle_buffer: int = 10000,
    cycle_length: int = 8,
    compression_type: str | None = None,
    seed: int | None = None,
    dynamic_masking: bool = False,
    masked_lm_prob: float = 0.15,
    whole_word_mask: bool = False,
    vocab_file: str | None = None,
    vocab_size: int | None = None,
    cls_id: int = 101,
    sep_id: int = 102,
    mask_id: int = 103,
    mask_token_rate: float = 0.8,
    random_token_rate: float = 0.1,
    keep_token_rate: float = 0.1,
) -> tf.data.Dataset:
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
    or `vocab_size` and the special ids; `mask_token_rate`, `random_token_rate`
    and `keep_token_rate` are the masking mix (the original's 0.8 / 0.1 / 0.1).
    """
    files = list_files(file_pattern)
    spec = features.pretraining_feature_spec(
        seq_length, max_predictions_per_seq, with_next_sentence, with_masked_lm=not dynamic_masking
    )
    if dynamic_masking:
        from keras_bert.pretraining_data.dynamic_masking import MaskingVocab, mask_batch

        if vocab_file is not None:
            vocab = MaskingVocab.from_vocab_file(vocab_file)
        elif vocab_size is not None and not whole_word_mask:
            vocab = MaskingVocab(vocab_size, cls_id, sep_id, mask_id)
        else:
            raise ValueError(
                "dynamic masking needs vocab_file (or vocab_size without whole_word_mask)"
            )
    if input_context is not None and input_context.num_input_pipelines > 1:
        # Worker i reads files i, i + n, ... (Dataset.shard's rule).
        files = files[input_context.input_pipeline_id :: input_context.num_input_pipelines]
        if not files:
            raise ValueError(
                f"{file_pattern}: fewer files than the "
                f"{input_context.num_input_pipelines} workers reading them"
            )
    sizes = [tf.io.gfile.stat(path).length for path in files]
    if is_training:
        dataset = _shuffled_epochs(files, sizes, seed)
    else:
        dataset = tf.data.Dataset.from_tensor_slices((files, tf.constant(sizes, tf.int64)))
    dataset = dataset.interleave(
        lambda path, size: _read_tfrecords(path, size, compression_type),
        cycle_length=min(cycle_length, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not is_training or seed is not None,
    )
    if is_training:
        # The stream is endless, so reshuffling only matters for a new
        # iterator, which must replay the same order (see _shuffled_epochs).
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=seed is None)
    dataset = dataset.map(
        lambda record: _decode(record, spec, file_pattern), num_parallel_calls=tf.data.AUTOTUNE
    )
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if dynamic_masking:
        # One seed per batch; new seeds on every pass over the data, so each
        # epoch sees new masks (reproducible when `seed` is given).
        # A training stream is endless: its epochs already get new seeds, and a
        # new iterator replays the same masks.
        seeds = tf.data.Dataset.random(
            seed=seed, rerandomize_each_iteration=not is_training or seed is None
        ).batch(2)
        # No Python control flow depends on tensors here: skipping AutoGraph's
        # conversion of the tensorflow-text code saves seconds of tracing.
        dataset = tf.data.Dataset.zip((dataset, seeds)).map(
            tf.autograph.experimental.do_not_convert(
                lambda batch, batch_seed: mask_batch(
                    batch,
                    batch_seed,
                    vocab,
                    max_predictions_per_seq,
                    masked_lm_prob,
                    whole_word_mask,
                    mask_token_rate,
                    random_token_rate,
                    keep_token_rate,
                )
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=seed is not None or None,
        )
    return dataset.prefetch(tf.data.AUTOTUNE)
