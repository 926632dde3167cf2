"""Reading pretraining TFRecords: dynamic masking in tf.data, sharding, broken files."""

import os

import numpy as np
import pytest
import tensorflow as tf
from pretraining_reference import MAX_PREDICTIONS, MAX_SEQ_LENGTH, mask_actions, read_records

from keras_bert.assets import AUSTEN_DIR
from keras_bert.pretraining_data import PretrainingOptions, create_pretraining_data
from keras_bert.pretraining_data.inputs import pretraining_dataset
from keras_bert.text import corpus


@pytest.fixture(scope="module")
def vocab_file(minilm_path):
    return os.path.join(minilm_path, "vocab.txt")


@pytest.fixture(scope="module")
def unmasked(vocab_file, tmp_path_factory):
    folder = tmp_path_factory.mktemp("unmasked")
    text = str(folder / "persuasion.txt")
    corpus.prepare_corpus("books", [os.path.join(AUSTEN_DIR, "persuasion.txt")], text)
    summary = create_pretraining_data(
        text,
        str(folder / "train"),
        vocab_file,
        PretrainingOptions(dupe_factor=1, mask=False),
        num_shards=2,
        num_workers=1,
    )
    return summary.output_files


def _all_batches(dataset):
    batches = [{k: v.numpy() for k, v in b.items()} for b in dataset]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def _restored(records):
    """The unmasked input_ids: predictions put back in place."""
    ids = records["input_ids"].copy()
    for n in range(len(ids)):
        k = int(records["masked_lm_weights"][n].sum())
        ids[n, records["masked_lm_positions"][n, :k]] = records["masked_lm_ids"][n, :k]
    return {row.tobytes() for row in ids}


def _dynamic(files, vocab_file, **kwargs):
    return pretraining_dataset(
        ",".join(files),
        MAX_SEQ_LENGTH,
        MAX_PREDICTIONS,
        batch_size=64,
        is_training=False,
        dynamic_masking=True,
        vocab_file=vocab_file,
        **kwargs,
    )


@pytest.fixture(scope="module")
def dynamic_dataset(unmasked, vocab_file):
    return _dynamic(unmasked, vocab_file, seed=5)


@pytest.fixture(scope="module")
def dynamic_records(dynamic_dataset):
    return _all_batches(dynamic_dataset)  # the first epoch


def test_dynamic_masks_follow_the_original_rules(unmasked, dynamic_records):
    plain = read_records(unmasked, with_masked_lm=False)
    records = dynamic_records
    count = len(records["input_ids"])
    assert count == len(plain["input_ids"]) // 64 * 64  # drop_remainder
    lengths = records["input_mask"].sum(axis=1)
    predictions = (records["masked_lm_weights"] > 0).sum(axis=1)
    np.testing.assert_array_equal(
        predictions, np.minimum(MAX_PREDICTIONS, np.maximum(1, np.round(lengths * 0.15)))
    )
    masked, kept, randomised = mask_actions(records)
    total = masked + kept + randomised
    assert abs(masked / total - 0.8) <= 0.01 and abs(kept / total - 0.1) <= 0.01
    assert abs(randomised / total - 0.1) <= 0.01
    # Untouched outside the predictions; [CLS] / [SEP] never chosen; sorted; zero padding.
    for n in range(count):
        k = int(predictions[n])
        positions = records["masked_lm_positions"][n, :k]
        assert (np.diff(positions) > 0).all() and not records["masked_lm_positions"][n, k:].any()
        assert not np.isin(records["masked_lm_ids"][n, :k], [101, 102]).any()
    assert _restored(records) <= {r.tobytes() for r in plain["input_ids"].astype(np.int32)}
    assert records["input_ids"].dtype == np.int32  # TPUs want int32


def test_each_epoch_sees_new_masks(dynamic_dataset, dynamic_records):
    second = _all_batches(dynamic_dataset.take(3))  # the start of the second epoch
    first = {k: v[: 3 * 64] for k, v in dynamic_records.items()}
    assert (first["masked_lm_positions"] != second["masked_lm_positions"]).any()
    np.testing.assert_array_equal(first["segment_ids"], second["segment_ids"])
    assert _restored(first) == _restored(second)  # the same records, new masks


@pytest.mark.slow
def test_seeds_reproduce(unmasked, vocab_file, dynamic_records):
    again = _all_batches(_dynamic(unmasked, vocab_file, seed=5).take(3))
    np.testing.assert_array_equal(
        again["masked_lm_positions"], dynamic_records["masked_lm_positions"][: 3 * 64]
    )


@pytest.mark.slow
def test_dynamic_whole_word_masking(unmasked, vocab_file):
    records = _all_batches(_dynamic(unmasked, vocab_file, seed=1, whole_word_mask=True).take(8))
    vocab = [line.rstrip("\n") for line in open(vocab_file, encoding="utf-8")]
    continuation = np.array([t.startswith("##") for t in vocab])
    pieces_seen = 0
    for n in range(len(records["input_ids"])):
        k = int(records["masked_lm_weights"][n].sum())
        chosen = set(records["masked_lm_positions"][n, :k].tolist())
        tokens = records["input_ids"][n].copy()
        tokens[records["masked_lm_positions"][n, :k]] = records["masked_lm_ids"][n, :k]
        length = int(records["input_mask"][n].sum())
        assert 1 <= k <= min(MAX_PREDICTIONS, max(1, round(length * 0.15)))
        for t in range(1, length):
            if continuation[tokens[t]] and tokens[t - 1] not in (101, 102):
                assert (t in chosen) == (t - 1 in chosen)
                pieces_seen += t in chosen
    assert pieces_seen > 10


@pytest.mark.slow
def test_workers_read_different_files(unmasked, vocab_file):
    for worker, path in enumerate(unmasked):  # list_files sorts; shard i of 2 is file i
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker)
        read = _restored(_all_batches(_dynamic(unmasked, vocab_file, input_context=context)))
        in_file = {
            row.tobytes()
            for row in read_records([path], with_masked_lm=False)["input_ids"].astype(np.int32)
        }
        assert read and read <= in_file


@pytest.mark.slow
def test_training_stream_batches_are_full_and_shuffled(unmasked, vocab_file):
    dataset = pretraining_dataset(
        unmasked[0],
        MAX_SEQ_LENGTH,
        MAX_PREDICTIONS,
        batch_size=16,
        is_training=True,
        dynamic_masking=True,
        vocab_file=vocab_file,
        seed=2,
        shuffle_buffer=100,
    )
    batch = next(iter(dataset))
    assert batch["input_ids"].shape == (16, MAX_SEQ_LENGTH)
    assert batch["masked_lm_weights"].dtype == tf.float32
    assert set(batch) == {
        "input_ids",
        "input_mask",
        "segment_ids",
        "masked_lm_positions",
        "masked_lm_ids",
        "masked_lm_weights",
        "next_sentence_labels",
    }


def test_broken_tfrecords_are_named(vocab_file, tmp_path):
    text = str(tmp_path / "emma.txt")
    corpus.prepare_corpus("books", [os.path.join(AUSTEN_DIR, "emma.txt")], text)
    good = create_pretraining_data(
        text,
        str(tmp_path / "good.tfrecord"),
        vocab_file,
        PretrainingOptions(dupe_factor=1),
        num_workers=1,
    ).output_files[0]
    data = open(good, "rb").read()
    truncated = tmp_path / "truncated.tfrecord"
    truncated.write_bytes(data[: len(data) // 2])
    corrupted = tmp_path / "corrupted.tfrecord"
    damaged = bytearray(data)
    damaged[len(data) // 3] ^= 0xFF
    corrupted.write_bytes(bytes(damaged))
    for path in (truncated, corrupted):
        with pytest.raises(tf.errors.InvalidArgumentError, match=str(path)):
            for _ in pretraining_dataset(
                str(path), MAX_SEQ_LENGTH, MAX_PREDICTIONS, 64, is_training=False
            ):
                pass
    assert sum(
        1 for _ in pretraining_dataset(good, MAX_SEQ_LENGTH, MAX_PREDICTIONS, 1, is_training=False)
    ) == len(read_records([good])["input_ids"])
    with pytest.raises(ValueError, match="vocab_file"):
        pretraining_dataset(good, MAX_SEQ_LENGTH, MAX_PREDICTIONS, 8, dynamic_masking=True)
