"""create-pretraining-data: format, masking rules, determinism, bad input.

Statistics are checked against the rules of the original
`create_pretraining_data.py` and, in `test_pretraining_data_original.py`,
against running Model Garden's copy of it.
"""

import os
import random

import numpy as np
import pytest
import tensorflow as tf
from pretraining_reference import MAX_PREDICTIONS, MAX_SEQ_LENGTH, mask_actions, read_records

from keras_bert.assets import AUSTEN_DIR
from keras_bert.pretraining_data import (
    PretrainingOptions,
    create_pretraining_data,
    instances,
    reading,
    records,
    static_masking,
    workers,
)
from keras_bert.text import corpus

BOOKS = ("persuasion.txt", "northangerabbey.txt")


@pytest.fixture(scope="module")
def two_novels(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("corpus") / "two_novels.txt")
    corpus.prepare_corpus("books", [os.path.join(AUSTEN_DIR, b) for b in BOOKS], path)
    return path


@pytest.fixture(scope="module")
def vocab_file(minilm_path):
    return os.path.join(minilm_path, "vocab.txt")


@pytest.fixture(scope="module")
def static_run(two_novels, vocab_file, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("static") / "train.tfrecord")
    options = PretrainingOptions(dupe_factor=1)
    summary = create_pretraining_data(
        two_novels, out, vocab_file, options, num_shards=2, num_workers=2
    )
    return summary, read_records(summary.output_files)


def test_masking_follows_the_original_rules(static_run):
    summary, records = static_run
    lengths = records["input_mask"].sum(axis=1)
    predictions = (records["masked_lm_weights"] > 0).sum(axis=1)
    # create_masked_lm_predictions: min(P, max(1, round(len(tokens) * 0.15))), [CLS]/[SEP] counted.
    expected = np.minimum(MAX_PREDICTIONS, np.maximum(1, np.round(lengths * 0.15)))
    np.testing.assert_array_equal(predictions, expected)
    maskable = lengths - 3
    assert 0.15 <= predictions.sum() / maskable.sum() <= 0.16  # about 15 % of non-special tokens
    masked, kept, randomised = mask_actions(records)
    total = masked + kept + randomised
    assert abs(masked / total - 0.8) <= 0.01
    assert abs(kept / total - 0.1) <= 0.01
    assert abs(randomised / total - 0.1) <= 0.01
    assert summary.masked == total and summary.instances == len(lengths)


def test_specials_positions_and_padding(static_run):
    _, records = static_run
    ids, mask = records["input_ids"], records["input_mask"]
    positions, weights = records["masked_lm_positions"], records["masked_lm_weights"]
    for n in range(len(ids)):
        length = int(mask[n].sum())
        assert mask[n, :length].all() and not mask[n, length:].any()
        assert not ids[n, length:].any() and not records["segment_ids"][n, length:].any()
        count = int(weights[n].sum())
        chosen = positions[n, :count]
        assert (np.diff(chosen) > 0).all(), "positions must be sorted"
        assert not positions[n, count:].any() and not records["masked_lm_ids"][n, count:].any()
        assert not weights[n, count:].any()
        # Never [CLS] or [SEP]: the original tokens at the chosen positions.
        assert not np.isin(records["masked_lm_ids"][n, :count], [101, 102]).any()
        assert ids[n, 0] == 101 and ids[n, length - 1] == 102
        segments = records["segment_ids"][n, :length]
        first_b = int(np.argmax(segments)) if segments.any() else length
        assert ids[n, first_b - 1] == 102 and (segments[first_b:] == 1).all()


def test_whole_word_masking_never_splits_a_word(two_novels, vocab_file, tmp_path):
    options = PretrainingOptions(dupe_factor=1, do_whole_word_mask=True, random_seed=7)
    summary = create_pretraining_data(
        two_novels, str(tmp_path / "wwm.tfrecord"), vocab_file, options, num_workers=1
    )
    records = read_records(summary.output_files)
    vocab = [line.rstrip("\n") for line in open(vocab_file, encoding="utf-8")]
    continuation = np.array([t.startswith("##") for t in vocab])
    words_seen = 0
    for n in range(len(records["input_ids"])):
        count = int(records["masked_lm_weights"][n].sum())
        chosen = set(records["masked_lm_positions"][n, :count].tolist())
        # The original tokens: the input with the predictions put back.
        tokens = records["input_ids"][n].copy()
        tokens[records["masked_lm_positions"][n, :count]] = records["masked_lm_ids"][n, :count]
        length = int(records["input_mask"][n].sum())
        for t in range(1, length):
            if continuation[tokens[t]] and tokens[t - 1] not in (101, 102):
                # A `##` piece is chosen exactly when the piece before it is.
                assert (t in chosen) == (t - 1 in chosen)
                words_seen += t in chosen
        # Whole words: the budget may be undershot, never exceeded.
        assert count <= min(MAX_PREDICTIONS, max(1, round(length * 0.15)))
    assert words_seen > 100


def test_same_bytes_whatever_the_number_of_workers(static_run, two_novels, vocab_file, tmp_path):
    summary, _ = static_run
    runs = [
        create_pretraining_data(
            two_novels,
            str(tmp_path / "one.tfrecord"),
            vocab_file,
            PretrainingOptions(dupe_factor=1),
            num_shards=2,
            num_workers=1,
        )
    ]
    # The command line's way: workers started before TensorFlow, kept running after.
    pool = workers.start_workers(3)
    try:
        runs.append(
            create_pretraining_data(
                two_novels,
                str(tmp_path / "three.tfrecord"),
                vocab_file,
                PretrainingOptions(dupe_factor=1),
                num_shards=2,
                num_workers=3,
                pool=pool,
            )
        )
    finally:
        pool.terminate()
    for again in runs:
        for ours, theirs in zip(summary.output_files, again.output_files):
            with open(ours, "rb") as a, open(theirs, "rb") as b:
                assert a.read() == b.read()


def test_model_garden_loader_reads_our_records(static_run):
    from official.nlp.data import pretrain_dataloader

    summary, records = static_run
    config = pretrain_dataloader.BertPretrainDataConfig(
        input_path=",".join(summary.output_files),
        global_batch_size=4,
        is_training=False,
        seq_length=MAX_SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
    )
    batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
    first = records["input_ids"][:1]
    assert batch["input_word_ids"].shape == (4, MAX_SEQ_LENGTH)
    assert batch["masked_lm_positions"].shape == (4, MAX_PREDICTIONS)
    assert batch["next_sentence_labels"].shape == (4, 1)
    # Record order: shard 0 holds instances 0, 2, 4, ... so its first record is ours.
    np.testing.assert_array_equal(batch["input_word_ids"][:1].numpy(), first)


def test_feature_dtypes_are_the_originals(static_run):
    summary, _ = static_run
    record = next(iter(tf.data.TFRecordDataset(summary.output_files[0])))
    example = tf.train.Example.FromString(record.numpy())
    kinds = {name: feature.WhichOneof("kind") for name, feature in example.features.feature.items()}
    assert kinds == {
        "input_ids": "int64_list",
        "input_mask": "int64_list",
        "segment_ids": "int64_list",
        "masked_lm_positions": "int64_list",
        "masked_lm_ids": "int64_list",
        "masked_lm_weights": "float_list",
        "next_sentence_labels": "int64_list",
    }


def test_example_encoder_equals_tf_train_example():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 250_000, (5, 7))
    ids[0, 0] = 2**40  # beyond the table: the generic varint path
    small = rng.integers(0, 2, (5, 7))
    weights = rng.random((5, 3)).astype(np.float32)
    encoded = records.ExampleEncoder().encode_rows(
        [("input_ids", ids), ("input_mask", small), ("masked_lm_weights", weights)]
    )
    for n, record in enumerate(encoded):
        expected = tf.train.Example(
            features=tf.train.Features(
                feature={
                    "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids[n])),
                    "input_mask": tf.train.Feature(int64_list=tf.train.Int64List(value=small[n])),
                    "masked_lm_weights": tf.train.Feature(
                        float_list=tf.train.FloatList(value=weights[n])
                    ),
                }
            )
        )
        assert tf.train.Example.FromString(record) == expected


def test_example_encoder_rows_of_one_length_and_empty():
    # Multi-byte varints of equal length in every row (one header for all), then none.
    ids = np.full((3, 4), 300)
    ids[1] = [128, 16383, 200, 129]
    record = records.ExampleEncoder().encode_rows([("input_ids", ids)])
    for n, record in enumerate(record):
        expected = tf.train.Example(
            features=tf.train.Features(
                feature={"input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids[n]))}
            )
        )
        assert record == expected.SerializeToString()
    assert records.ExampleEncoder().encode_rows([("input_ids", np.zeros((0, 4), np.int64))]) == []


def test_first_visited_equals_the_stable_order_even_on_equal_keys():
    rng = np.random.default_rng(0)
    for values in (rng.random((200, 16)), rng.choice([0.1, 0.2, 0.3, 2.0], (200, 16))):
        count = rng.integers(0, 9, 200)
        order = np.argsort(values, axis=1, kind="stable")
        expected = np.zeros(values.shape, bool)
        np.put_along_axis(expected, order, np.arange(16) < count[:, np.newaxis], axis=1)
        np.testing.assert_array_equal(static_masking._first_visited(values, count), expected)


def test_truncation_counts_equal_truncate_seq_pair():
    from official.nlp.data.create_pretraining_data import truncate_seq_pair

    rng = random.Random(0)
    for _ in range(300):
        len_a, len_b, limit = rng.randint(1, 200), rng.randint(1, 200), rng.randint(2, 125)
        a, b = list(range(len_a)), list(range(len_b))
        truncate_seq_pair(a, b, limit, rng)
        assert instances._truncate_counts(len_a, len_b, limit) == (len_a - len(a), len_b - len(b))


def _number_corpus(path, documents, sentences_per_document, words_per_sentence, vocab):
    """Documents whose words are distinct whole-word vocabulary entries, in order."""
    words = [t for t in vocab[2000:] if t.isalpha() and t.isascii()]
    index = 0
    with open(path, "w", encoding="utf-8") as f:
        for d in range(documents):
            for _ in range(sentences_per_document):
                f.write(" ".join(words[index : index + words_per_sentence]) + "\n")
                index += words_per_sentence
            f.write("\n")
    return {w: i for i, w in enumerate(words[:index])}


@pytest.mark.parametrize("objective", ["nsp", "sop"])
def test_pair_labels_follow_the_text_order(objective, vocab_file, tmp_path):
    vocab = [line.rstrip("\n") for line in open(vocab_file, encoding="utf-8")]
    order = _number_corpus(str(tmp_path / "c.txt"), 20, 12, 6, vocab)
    token_order = {vocab.index(w): i for w, i in order.items()}
    options = PretrainingOptions(dupe_factor=2, objective=objective, mask=False, max_seq_length=32)
    summary = create_pretraining_data(
        str(tmp_path / "c.txt"), str(tmp_path / "o.tfrecord"), vocab_file, options, num_workers=1
    )
    records = read_records(summary.output_files, seq_length=32, with_masked_lm=False)
    labels = records["next_sentence_labels"][:, 0]
    words_per_document = 12 * 6
    for ids, segments, label in zip(records["input_ids"], records["segment_ids"], labels):
        a = [token_order[t] for t, s in zip(ids, segments) if s == 0 and t in token_order]
        b = [token_order[t] for t, s in zip(ids, segments) if s == 1 and t in token_order]
        same_document = a[0] // words_per_document == b[0] // words_per_document
        if label == 0:  # the actual next segment (truncation may trim either side)
            assert same_document and max(a) < min(b)
        elif objective == "sop" and same_document:  # ALBERT: the two halves swapped
            assert max(b) < min(a)
        else:  # a random next segment, from another document
            assert not same_document
    assert 0.3 < labels.mean() < 0.7


def test_objective_none_packs_full_sentences(two_novels, vocab_file, tmp_path):
    from official.nlp.data import pretrain_dataloader

    options = PretrainingOptions(dupe_factor=1, objective="none", short_seq_prob=0.0)
    summary = create_pretraining_data(
        two_novels, str(tmp_path / "none.tfrecord"), vocab_file, options, num_workers=1
    )
    records = read_records(summary.output_files, with_next_sentence=False)
    lengths = records["input_mask"].sum(axis=1)
    assert not records["segment_ids"].any()
    # Packed with whole sentences: full up to the part of a sentence that did not fit.
    assert lengths.max() == MAX_SEQ_LENGTH and lengths.mean() > 0.8 * MAX_SEQ_LENGTH
    config = pretrain_dataloader.BertPretrainDataConfig(
        input_path=summary.output_files[0],
        global_batch_size=2,
        is_training=False,
        seq_length=MAX_SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        use_next_sentence_label=False,
    )
    batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
    assert "next_sentence_labels" not in batch


# === Bad input ===


def _cli(*args):
    from keras_bert.cli import main

    return main(["create-pretraining-data", *args, "--quiet"])


def test_bad_inputs_give_clear_messages(tmp_path, vocab_file, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = str(tmp_path / "o.tfrecord")
    assert _cli("--input-file", str(empty), "--output-file", out, "--vocab-file", vocab_file) == 2
    assert "no text" in capsys.readouterr().err and not os.path.exists(out)

    text = tmp_path / "t.txt"
    text.write_text("One sentence only.\n")
    assert (
        _cli(
            "--input-file",
            str(text),
            "--output-file",
            out,
            "--vocab-file",
            str(tmp_path / "missing.txt"),
        )
        == 2
    )
    assert "missing.txt" in capsys.readouterr().err
    (tmp_path / "empty_vocab.txt").write_text("")
    assert (
        _cli(
            "--input-file",
            str(text),
            "--output-file",
            out,
            "--vocab-file",
            str(tmp_path / "empty_vocab.txt"),
        )
        == 2
    )
    assert "empty" in capsys.readouterr().err
    assert (
        _cli(
            "--input-file",
            str(text),
            "--output-file",
            str(tmp_path / "no" / "o.tfrecord"),
            "--vocab-file",
            vocab_file,
        )
        == 2
    )
    assert "output directory does not exist" in capsys.readouterr().err
    assert (
        _cli(
            "--input-file",
            str(tmp_path / "nothing*.txt"),
            "--output-file",
            out,
            "--vocab-file",
            vocab_file,
        )
        == 2
    )
    assert "nothing*.txt" in capsys.readouterr().err


def test_odd_documents_are_handled_and_counted(tmp_path, vocab_file, capsys):
    text = tmp_path / "odd.txt"
    long_sentence = " ".join(["remarkable"] * 400)
    text.write_bytes(
        b"A lonely sentence.\n\n"
        + long_sentence.encode()
        + b"\nShort one.\n\n"
        + b"Bad \xff\xfe bytes here.\nAnd more text.\n"
    )
    (tmp_path / "blank.txt").write_text("\n\n")
    out = str(tmp_path / "o.tfrecord")
    assert (
        _cli(
            "--input-file",
            f"{text},{tmp_path / 'blank.txt'}",
            "--output-file",
            out,
            "--vocab-file",
            vocab_file,
            "--dupe-factor",
            "3",
        )
        == 0
    )
    report = capsys.readouterr().out
    assert f"{text}:6" in report  # the line with invalid UTF-8, named
    assert "files without text (skipped): 1" in report
    records = read_records([out])
    assert (records["input_mask"].sum(axis=1) <= MAX_SEQ_LENGTH).all()
    # The one-sentence document always gets a random next segment.
    lonely = [
        n for n, ids in enumerate(records["input_ids"]) if ids[1] == 1037 and ids[2] == 9479
    ]  # "a lonely"
    assert lonely and all(records["next_sentence_labels"][n, 0] == 1 for n in lonely)


def test_interrupted_run_leaves_no_finished_looking_shard(
    two_novels, vocab_file, tmp_path, monkeypatch
):
    out = str(tmp_path / "o.tfrecord")
    options = PretrainingOptions(dupe_factor=1)
    original = workers.process_block

    def fail_on_second_block(block, *args):
        if block.index == 1:
            raise KeyboardInterrupt
        return original(block, *args)

    monkeypatch.setattr(workers, "process_block", fail_on_second_block)
    monkeypatch.setattr(reading, "BLOCK_CHARS", 1 << 18)
    with pytest.raises(KeyboardInterrupt):
        create_pretraining_data(two_novels, out, vocab_file, options, num_shards=2, num_workers=1)
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(workers, "process_block", original)
    first = create_pretraining_data(
        two_novels, out, vocab_file, options, num_shards=2, num_workers=1
    )
    second = create_pretraining_data(
        two_novels, str(tmp_path / "p.tfrecord"), vocab_file, options, num_shards=2, num_workers=2
    )
    for a, b in zip(first.output_files, second.output_files):
        assert open(a, "rb").read() == open(b, "rb").read()
    assert sorted(os.listdir(tmp_path)) == sorted(
        os.path.basename(p) for p in first.output_files + second.output_files
    )


def test_batch_tokenizing_keeps_the_over_long_word_rule(vocab_file):
    # Data making traces the over-long-word rule only for a batch that may need
    # it; the ids must be the tokenizer's either way, the original's [UNK] included.
    from keras_bert.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocab_file)
    tokenize = reading.make_tokenize_fn(tokenizer, batch_size=2)
    plain = ["Captain Wentworth walked.", "Anne smiled, and said nothing."]
    with_long_word = ["x" * 201 + " then the end.", "A short one.", "é" * 150 + "a" * 60]
    for strings in (plain, plain + with_long_word):
        flat, lengths = tokenize(strings)
        expected = tokenizer.tokenize(tf.constant(strings))
        np.testing.assert_array_equal(flat, expected.flat_values.numpy())
        np.testing.assert_array_equal(lengths, expected.row_lengths().numpy())
    flat, lengths = tokenize(with_long_word[:1])
    assert flat[0] == tokenizer.vocab.index("[UNK]") and lengths[0] == 5  # [UNK] then the end .
    _, may_have_long_words = tokenizer.tokenize_unless_long_words(tf.constant(plain))
    assert not may_have_long_words
