"""Bad input to the `keras-bert` commands: every case is one clear
line on stderr (the file, line or field named, what to do), a non-zero exit
code and nothing half-written; or the right behaviour, tested below the table.

To add a case: one row in BAD_INPUTS. `{name}` in an argument is a path from
the `paths` fixture; `absent` names the paths that must not exist afterwards.
"""

import glob
import io
import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import cli, features

from harness import pretrain_fields, run_command, small_config

TINY_MODEL = small_config(vocab_size=32, num_hidden_layers=1, max_position_embeddings=32).to_dict()


def write_pretraining_records(path, count=8, seq_length=16, predictions=4, next_sentence=True):
    """Records of the original layout with these lengths (ids valid for TINY_MODEL)."""
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            values = {
                "input_ids": rng.integers(5, 32, seq_length),
                "input_mask": np.ones(seq_length, np.int64),
                "segment_ids": np.zeros(seq_length, np.int64),
                "masked_lm_positions": np.arange(1, predictions + 1),
                "masked_lm_ids": rng.integers(5, 32, predictions),
            }
            feature = {name: features.int64_feature(v) for name, v in values.items()}
            feature["masked_lm_weights"] = features.float_feature([1.0] * predictions)
            if next_sentence:
                feature["next_sentence_labels"] = features.int64_feature([0])
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


@pytest.fixture
def paths(tmp_path, tiny_vocab_file):
    """Every file the table refers to, by name."""
    p = {"tmp": str(tmp_path), "vocab": tiny_vocab_file}
    (tmp_path / "dir").mkdir()
    p["dir"] = str(tmp_path / "dir")
    (tmp_path / "empty.txt").write_text("")
    p["empty"] = str(tmp_path / "empty.txt")
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 64)
    p["binary"] = str(tmp_path / "binary.bin")
    (tmp_path / "zeros.bin").write_bytes(bytes(4096))
    p["zeros"] = str(tmp_path / "zeros.bin")
    (tmp_path / "garbage.bin").write_bytes(b"\x13\x37 not a checkpoint")
    p["garbage"] = str(tmp_path / "garbage.bin")
    (tmp_path / "text.txt").write_text("The quick brown fox.\nThe lazy dog.\n\nA fox.\n")
    p["text"] = str(tmp_path / "text.txt")
    (tmp_path / "train.tsv").write_text("text\tlabel\nthe fox\tpos\n \tneg\nthe dog\tneg\n")
    p["empty_cells"] = str(tmp_path / "train.tsv")
    # Tables in the encodings Windows tools write.
    table = "text\tlabel\nthe fox\tpos\nthe café\tneg\n"
    (tmp_path / "utf16.tsv").write_bytes(table.encode("utf-16"))
    (tmp_path / "latin1.tsv").write_bytes(table.encode("latin-1"))
    (tmp_path / "huge.tsv").write_text("text\tlabel\nthe fox\t0.5\nthe dog\t1e39\n")
    for name in ("utf16", "latin1", "huge"):
        p[name] = str(tmp_path / f"{name}.tsv")
    # Sentence pairs to train on (3 columns), single texts to score on (2 columns).
    (tmp_path / "pairs.tsv").write_text(
        "sentence1\tsentence2\tlabel\nthe fox\tthe dog\tpos\na fox\ta dog\tneg\n"
    )
    p["pairs"] = str(tmp_path / "pairs.tsv")
    (tmp_path / "single.tsv").write_text("sentence\tlabel\nthe fox\tpos\na dog\tneg\n")
    p["single"] = str(tmp_path / "single.tsv")
    # A HuggingFace folder whose config.json was cut short.
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text('{"hidden_size": 16, "num_hid')
    (tmp_path / "hf" / "model.safetensors").write_bytes(b"")
    p["hf"] = str(tmp_path / "hf")
    # A finished fine-tuning output.
    (tmp_path / "finished").mkdir()
    (tmp_path / "finished" / "model.keras").write_bytes(b"a finished model")
    p["finished"] = str(tmp_path / "finished")
    # Pretraining records and a tiny recipe for 16-long, 4-prediction NSP records.
    write_pretraining_records(tmp_path / "long.tfrecord", seq_length=32)
    write_pretraining_records(tmp_path / "none.tfrecord", next_sentence=False)
    write_pretraining_records(tmp_path / "predictions.tfrecord", predictions=8)
    write_pretraining_records(tmp_path / "good.tfrecord")
    data = (tmp_path / "good.tfrecord").read_bytes()
    (tmp_path / "truncated.tfrecord").write_bytes(data[: len(data) - 10])
    (tmp_path / "random.tfrecord").write_bytes(np.random.default_rng(1).bytes(3000))
    # One byte changed inside the second record's payload: the framing is intact,
    # the record's checksum is not.
    flipped = bytearray(data)
    second = 16 + int.from_bytes(data[:8], "little")
    flipped[second + 12 + int.from_bytes(data[second : second + 8], "little") // 2] ^= 0xFF
    (tmp_path / "flipped.tfrecord").write_bytes(bytes(flipped))
    for name in ("long", "none", "predictions", "good", "truncated", "random", "flipped"):
        p[name] = str(tmp_path / f"{name}.tfrecord")
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY_MODEL))
    recipe = pretrain_fields(
        model=str(tmp_path / "bert_config.json"),
        batch_size=4,
        train_steps=2,
        warmup_steps=0,
        checkpoint_every=2,
        log_every=1,
        model_dir=str(tmp_path / "run"),
    )
    (tmp_path / "recipe.json").write_text(json.dumps(recipe))
    p["recipe"] = str(tmp_path / "recipe.json")
    return p


FINETUNE = [
    "finetune",
    "--task",
    "classify",
    "--train",
    "{empty_cells}",
    "--output-dir",
    "{tmp}/out",
    "--no-tensorboard",
]
PRETRAIN = ["pretrain", "--config", "{recipe}", "--set"]

BAD_INPUTS = [
    # (case, argv, message on stderr (a regular expression), paths that must not exist)
    (
        "finetune --epochs 0",
        FINETUNE + ["--epochs", "0"],
        r"argument --epochs: must be > 0, got 0",
        ["{tmp}/out"],
    ),
    (
        "finetune --seq-length 0",
        FINETUNE + ["--seq-length", "0"],
        r"argument --seq-length: must be >= 3 and <= 512, got 0",
        ["{tmp}/out"],
    ),
    (
        "finetune --batch-size -1",
        FINETUNE + ["--batch-size", "-1"],
        r"argument --batch-size: must be >= 1, got -1",
        ["{tmp}/out"],
    ),
    (
        "finetune, empty text cell",
        FINETUNE,
        r"train.tsv, line 3: empty text in column 'text'; fill it in or remove the row",
        ["{tmp}/out"],
    ),
    (
        "finetune --learning-rate nan",
        FINETUNE + ["--learning-rate", "nan"],
        r"argument --learning-rate: must be a finite number, got nan",
        ["{tmp}/out"],
    ),
    (
        "finetune, learning_rate inf in --set",
        FINETUNE + ["--set", "learning_rate=inf"],
        r"config field learning_rate must be a finite number, got inf",
        ["{tmp}/out"],
    ),
    (
        "finetune, weight_decay nan in --set",
        FINETUNE + ["--set", "weight_decay=nan"],
        r"config field weight_decay must be a finite number, got nan",
        ["{tmp}/out"],
    ),
    (
        "finetune, a UTF-16 table",
        FINETUNE[:4] + ["{utf16}"] + FINETUNE[5:],
        r"utf16.tsv: UTF-16 text, not UTF-8; save it as UTF-8 \(e.g. iconv -f UTF-16 -t UTF-8",
        ["{tmp}/out"],
    ),
    (
        "finetune, a Latin-1 table",
        FINETUNE[:4] + ["{latin1}"] + FINETUNE[5:],
        r"latin1.tsv, line 3: not valid UTF-8 \(byte 0xe9: Latin-1 / Windows-1252 text",
        ["{tmp}/out"],
    ),
    (
        "finetune --task regress, a label beyond float32",
        ["finetune", "--task", "regress", "--train", "{huge}"] + FINETUNE[5:],
        r"huge.tsv, line 3: label '1e39' is not a finite float32 number",
        ["{tmp}/out"],
    ),
    (
        "finetune, pairs to train on, single texts on dev",
        FINETUNE[:4] + ["{pairs}", "--dev", "{single}"] + FINETUNE[5:],
        r"single.tsv has one text column but the training data .*pairs.tsv has two text "
        r"columns \(sentence pairs\): give both the same text columns",
        ["{tmp}/out"],
    ),
    (
        "finetune, single texts to train on, pairs on dev",
        FINETUNE[:4] + ["{single}", "--dev", "{pairs}"] + FINETUNE[5:],
        r"pairs.tsv has two text columns \(sentence pairs\) but the training data "
        r".*single.tsv has one text column",
        ["{tmp}/out"],
    ),
    (
        "finetune into a finished output",
        FINETUNE[:-3] + ["--output-dir", "{finished}"],
        r"finished already holds a fine-tuned model .*; pass --overwrite to replace it",
        [],
    ),
    (
        "encode --seq-length 0",
        ["encode", "a", "--seq-length", "0"],
        r"argument --seq-length: must be >= 3 and <= 512, got 0",
        [],
    ),
    (
        "encode --seq-length 1000",
        ["encode", "a", "--seq-length", "1000"],
        r"argument --seq-length: must be >= 3 and <= 512, got 1000",
        [],
    ),
    (
        "encode --init-checkpoint garbage.bin",
        ["encode", "a", "--init-checkpoint", "{garbage}"],
        r"garbage.bin: not a checkpoint; give a HuggingFace folder",
        [],
    ),
    (
        "convert, truncated config.json",
        ["convert", "--checkpoint", "{hf}", "--output", "{tmp}/out.keras"],
        r"hf/config.json: not valid JSON .*fetch the file again",
        ["{tmp}/out.keras"],
    ),
    (
        "tokenize --vocab-file DIR",
        ["tokenize", "--vocab-file", "{dir}"],
        r"argument --vocab-file: .*dir is a directory; give a file",
        [],
    ),
    (
        "vocab --input DIR",
        ["vocab", "--input", "{dir}", "--vocab-size", "50", "--output", "{tmp}/v.txt"],
        r"argument --input: .*dir is a directory; give a file",
        ["{tmp}/v.txt"],
    ),
    (
        "vocab --num-unused -3",
        [
            "vocab",
            "--input",
            "{text}",
            "--vocab-size",
            "50",
            "--num-unused",
            "-3",
            "--output",
            "{tmp}/v.txt",
        ],
        r"argument --num-unused: must be >= 0, got -3",
        ["{tmp}/v.txt"],
    ),
    (
        "vocab on binary input",
        ["vocab", "--input", "{binary}", "--vocab-size", "300", "--output", "{tmp}/v.txt"],
        r"binary.bin, line 2: not valid UTF-8 \(byte 0x80: Latin-1 / Windows-1252 text, or "
        r"binary data\? convert the text to UTF-8",
        ["{tmp}/v.txt"],
    ),
    (
        "vocab on NUL bytes",
        ["vocab", "--input", "{zeros}", "--vocab-size", "300", "--output", "{tmp}/v.txt"],
        r"zeros.bin: binary data \(4096 NUL bytes in the first 4096\), not text",
        ["{tmp}/v.txt"],
    ),
    (
        "vocab on UTF-16 text",
        ["vocab", "--input", "{utf16}", "--vocab-size", "300", "--output", "{tmp}/v.txt"],
        r"utf16.tsv: UTF-16 text, not UTF-8; save it as UTF-8",
        ["{tmp}/v.txt"],
    ),
    (
        "create-pretraining-data on UTF-16 text",
        [
            "create-pretraining-data",
            "--input-file",
            "{utf16}",
            "--output-file",
            "{tmp}/r.tfrecord",
            "--vocab-file",
            "{vocab}",
            "--num-workers",
            "1",
            "--quiet",
        ],
        r"utf16.tsv: UTF-16 text, not UTF-8; save it as UTF-8",
        ["{tmp}/r.tfrecord"],
    ),
    (
        "prepare-corpus on an empty file",
        ["prepare-corpus", "{empty}", "--output-file", "{tmp}/c.txt"],
        r"the input holds no text \(empty files\?\); nothing written",
        ["{tmp}/c.txt"],
    ),
    (
        "prepare-corpus --output-file DIR",
        ["prepare-corpus", "{text}", "--output-file", "{dir}"],
        r"argument --output-file: .*dir is a directory; give a file name",
        [],
    ),
    (
        "create-pretraining-data, predictions > sequence",
        [
            "create-pretraining-data",
            "--input-file",
            "{text}",
            "--output-file",
            "{tmp}/r.tfrecord",
            "--vocab-file",
            "{vocab}",
            "--max-seq-length",
            "32",
            "--max-predictions-per-seq",
            "100",
            "--num-workers",
            "1",
            "--quiet",
        ],
        r"max_predictions_per_seq 100 exceeds the 29 maskable tokens of max_seq_length 32",
        ["{tmp}/r.tfrecord"],
    ),
    (
        "pretrain, records longer than seq_length",
        PRETRAIN + ["train_files={long}"],
        r"train_files: .*long.tfrecord holds records of length 32, the config's seq_length is 16",
        ["{tmp}/run"],
    ),
    (
        "pretrain, NSP config on --objective none records",
        PRETRAIN + ["train_files={none}"],
        r"none.tfrecord has no next_sentence_labels .*set the config's objective to none",
        ["{tmp}/run"],
    ),
    (
        "pretrain, records of other predictions",
        PRETRAIN + ["train_files={predictions}"],
        r"predictions.tfrecord holds records of 8 predictions, the config's "
        r"max_predictions_per_seq is 4",
        ["{tmp}/run"],
    ),
    (
        "pretrain, eval records of another length",
        PRETRAIN + ["train_files={good}", "--set", "eval_files={long}"],
        r"eval_files: .*long.tfrecord holds records of length 32",
        ["{tmp}/run"],
    ),
    (
        "pretrain, random bytes",
        PRETRAIN + ["train_files={random}"],
        r"random.tfrecord: corrupted or truncated TFRecord file",
        ["{tmp}/run"],
    ),
    (
        "pretrain, truncated shard",
        PRETRAIN + ["train_files={truncated}"],
        r"truncated.tfrecord: corrupted or truncated TFRecord file \(the record at byte \d+ runs "
        r"past the file's \d+ bytes\)",
        ["{tmp}/run"],
    ),
    (
        "pretrain, learning_rate nan",
        PRETRAIN + ["train_files={good}", "--set", "learning_rate=nan"],
        r"config field learning_rate must be a finite number, got nan",
        ["{tmp}/run"],
    ),
    (
        "pretrain, a changed byte inside a record",
        PRETRAIN + ["train_files={flipped}"],
        r"train_files: .*flipped.tfrecord: corrupted TFRecord file: record 1 \(counted from 0\) "
        r"fails its checksum.*; the checkpoints written so far are kept",
        ["{tmp}/run"],
    ),
    (
        "pretrain, seq_length past the positions",
        PRETRAIN + ["train_files={good}", "--set", "seq_length=64"],
        r"bert_config.json: max_position_embeddings 32 < the config's seq_length 64",
        ["{tmp}/run"],
    ),
]


def run_cli(argv, capsys):
    """(exit code, stderr) of `keras-bert ARGV` run in this process."""
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse refuses bad arguments this way
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "case, argv, message, absent", BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS]
)
def test_bad_input_is_one_clear_line(case, argv, message, absent, paths, capsys):
    code, err = run_cli([a.format(**paths) for a in argv], capsys)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip() and "error" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.search(message, lines[0]), lines[0]
    for path in absent:
        assert not os.path.exists(path.format(**paths)), path
    # Nor a temporary output (keras_bert.safe_output's DIR/NAME.partial-PID) or a lock.
    assert not glob.glob(os.path.join(paths["tmp"], "**", "*.partial-*"), recursive=True)
    assert not glob.glob(os.path.join(paths["tmp"], "**", "*.lock"), recursive=True)


# === The right behaviour ===


def test_tokenize_names_an_invalid_utf8_line_and_goes_on(paths, capsys, monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(b"the fox\nthe \xff dog\nlazy dog\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert cli.main(["tokenize", "--vocab-file", paths["vocab"]]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == ["the fox", "", "lazy dog"]
    assert out.err.strip() == "keras-bert tokenize: stdin line 2: not valid UTF-8, skipped"


def test_vocab_size_is_a_hard_limit(tmp_path, capsys):
    # 400 distinct characters: kept whole (alone and as ##c) they would be 800 tokens.
    alphabet = [chr(0x4E00 + i) for i in range(400)]
    text = "\n".join(" ".join(alphabet[i:] + alphabet[:i]) for i in range(0, 400, 7))
    (tmp_path / "chars.txt").write_text(text + "\n", encoding="utf-8")
    assert (
        run_command(
            "vocab --input {input} --vocab-size 300 --output {output}",
            input=tmp_path / "chars.txt",
            output=tmp_path / "vocab.txt",
        )
        == 0
    )
    vocab = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert 250 < len(vocab) <= 300
    assert "wrote {} tokens".format(len(vocab)) in capsys.readouterr().out


def test_prepare_corpus_warns_about_books_without_chapters(tmp_path, capsys):
    (tmp_path / "book.txt").write_text("a paragraph without sentence ends " * 300 + "\n")
    assert (
        run_command(
            "prepare-corpus {value} --output-file {output_file}",
            value=tmp_path / "book.txt",
            output_file=tmp_path / "corpus.txt",
        )
        == 0
    )
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"warning: {tmp_path / 'book.txt'}: no CHAPTER headings, so the whole "
        "book is one document (--source text reads a file as one document "
        "without this warning)"
    )
    assert err[1].startswith(f"warning: {tmp_path / 'book.txt'}: a 10,199-character sentence")
    assert len((tmp_path / "corpus.txt").read_text().splitlines()) == 1


def test_finetune_keeps_a_finished_model_unless_overwrite(paths, tmp_path, capsys):
    (tmp_path / "good.tsv").write_text(
        "text\tlabel\nthe fox\tpos\nthe dog\tneg\na lazy fox\tpos\nthe brown dog\tneg\n"
    )
    run = [
        "finetune",
        "--task",
        "classify",
        "--train",
        str(tmp_path / "good.tsv"),
        "--output-dir",
        str(tmp_path / "model"),
        "--vocab-file",
        paths["vocab"],
        "--seq-length",
        "8",
        "--batch-size",
        "2",
        "--epochs",
        "1",
        "--no-tensorboard",
    ]
    assert cli.main(run) == 0
    model = tmp_path / "model" / "model.keras"
    first = model.read_bytes()
    code, err = run_cli(run[:2] + ["regress"] + run[3:], capsys)
    assert code == 2 and "already holds a fine-tuned model" in err
    assert model.read_bytes() == first
    assert cli.main(run + ["--overwrite", "--seed", "1"]) == 0
    assert model.read_bytes() != first
    # A classifier evaluated on a CoNLL file: the reader's error, then what this model reads.
    (tmp_path / "tags.conll").write_text("EU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\n")
    code, err = run_cli(
        [
            "evaluate",
            "--model-dir",
            str(tmp_path / "model"),
            "--data",
            str(tmp_path / "tags.conll"),
        ],
        capsys,
    )
    assert code == 2
    assert err.strip().endswith(
        f"(the model in {tmp_path / 'model'} was fine-tuned with --task classify, which reads "
        "a TSV/CSV/JSONL table of text column(s) and a label column, or GLUE)"
    ), err


# Slow (three runs); the fast suite's test_training.py reruns a finished run as a no-op.
@pytest.mark.slow
def test_pretrain_rerun_of_a_finished_run_is_a_no_op(paths, tmp_path, capsys):
    run = ["pretrain", "--config", paths["recipe"], "--set", f"train_files={paths['good']}"]
    assert cli.main(run) == 0
    results = tmp_path / "run" / "eval_results.json"
    saved = results.read_text()
    assert json.loads(saved)["step"] == 2 and json.loads(saved)["masked_lm_loss"] > 1
    capsys.readouterr()
    assert cli.main(run) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'run'}: already finished at step 2 (train_steps 2); nothing to do" in out
    assert results.read_text() == saved
    # Raising train_steps trains on from the checkpoint.
    assert cli.main(run + ["--set", "train_steps=4"]) == 0
    assert json.loads(results.read_text())["step"] == 4


def test_a_torn_last_log_line_does_not_block_resume(paths, tmp_path, capsys):
    run = [
        "pretrain",
        "--config",
        paths["recipe"],
        "--set",
        f"train_files={paths['good']}",
        "--set",
        "train_steps=4",
    ]
    assert cli.main(run) == 0
    log = tmp_path / "run" / "train_log.jsonl"
    records = log.read_text().splitlines()
    assert [json.loads(r)["step"] for r in records] == [1, 2, 3, 4]
    # Killed at step 3 while writing its record: the index points at ckpt-2.
    (tmp_path / "run" / "checkpoints" / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n'
    )
    (tmp_path / "run" / "eval_results.json").unlink()
    log.write_text("\n".join(records[:3]) + "\n" + records[3][:25])
    capsys.readouterr()
    assert cli.main(run) == 0
    assert f"{log}, line 4: not a complete record" in capsys.readouterr().out
    resumed = log.read_text().splitlines()
    assert [json.loads(r)["step"] for r in resumed] == [1, 2, 3, 4]
    assert resumed[:2] == records[:2]


# === Runs that go wrong midway ===


def one_error_line(code, err):
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_pretraining_whose_loss_turns_nan_stops_and_keeps_the_last_good_checkpoint(
    paths, tmp_path, capsys
):
    run = ["pretrain", "--config", paths["recipe"], "--set", f"train_files={paths['good']}"]
    # A learning rate of 1e9 is finite: the loss, not the config, shows it.
    argv = run + ["--set", "learning_rate=1e9", "--set", "train_steps=20"]
    line = one_error_line(*run_cli(argv, capsys))
    found = re.search(
        r"error: step (\d+): the training (\w+) is (nan|inf|-inf) \(not a finite number\), "
        r"so training stopped at learning rate [\d.e+]+; the last checkpoint, (\S+), is kept",
        line,
    )
    assert found, line
    step, kept = int(found.group(1)), found.group(4)
    # The newest checkpoint, of a step before the broken one.
    assert tf.train.latest_checkpoint(str(tmp_path / "run" / "checkpoints")) == kept
    assert int(kept.rsplit("-", 1)[1]) < step
    weights = tf.train.load_checkpoint(kept)
    for name in weights.get_variable_to_shape_map():
        value = weights.get_tensor(name)
        if np.issubdtype(np.asarray(value).dtype, np.floating):
            assert np.isfinite(value).all(), name
    assert not (tmp_path / "run" / "export").exists()
    assert not (tmp_path / "run" / "eval_results.json").exists()


def test_finetuning_whose_loss_turns_nan_stops_with_one_line(paths, tmp_path, capsys):
    (tmp_path / "good.tsv").write_text(
        "text\tlabel\nthe fox\tpos\nthe dog\tneg\na lazy fox\tpos\nthe brown dog\tneg\n"
    )
    argv = (
        ["finetune", "--task", "classify", "--train", str(tmp_path / "good.tsv")]
        + ["--output-dir", str(tmp_path / "model"), "--vocab-file", paths["vocab"]]
        + ["--seq-length", "8", "--batch-size", "2", "--epochs", "10", "--no-tensorboard"]
        + ["--learning-rate", "1e9", "--set", "clipnorm=null"]
    )
    line = one_error_line(*run_cli(argv, capsys))
    assert re.search(r"error: step \d+: the training loss is (nan|inf)", line), line
    assert not (tmp_path / "model" / "model.keras").exists()


def test_a_task_model_refuses_a_non_finite_optimizer_setting():
    import keras

    from keras_bert import BertEncoder
    from keras_bert.models.classifier import BertClassifier
    from keras_bert.training.optimization import create_adamw

    from harness import tiny_config

    model = BertClassifier(BertEncoder(tiny_config()), num_classes=2)
    with pytest.raises(ValueError, match=r"optimizer Adam: learning_rate is nan, not a finite"):
        model.compile(optimizer=keras.optimizers.Adam(float("nan")))
    schedule = create_adamw(float("inf"), 10, 1, weight_decay=0.01, clipnorm=1.0)
    with pytest.raises(ValueError, match=r"learning_rate.peak_learning_rate is inf"):
        model.compile(optimizer=schedule)
    model.compile(optimizer=keras.optimizers.Adam(5e-5))  # a finite one is fine


def test_pretraining_resumes_from_the_newest_readable_checkpoint(paths, tmp_path, capsys):
    run = ["pretrain", "--config", paths["recipe"], "--set", f"train_files={paths['good']}"]
    run += ["--set", "train_steps=8"]
    assert cli.main(run) == 0
    checkpoints = tmp_path / "run" / "checkpoints"
    results = tmp_path / "run" / "eval_results.json"
    # The newest checkpoint cut short (a full disk, a copy cut off), the run not finished.
    data = checkpoints / "ckpt-8.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:100])
    results.unlink()
    capsys.readouterr()
    assert cli.main(run) == 0
    out, err = capsys.readouterr()
    assert (
        f"warning: skipping checkpoint {checkpoints / 'ckpt-8'}: cannot be read, truncated or "
        "corrupted (Read less bytes than requested); trying the one before" in err
    ), err
    assert f"resuming from {checkpoints / 'ckpt-6'} at step 6" in out
    assert json.loads(results.read_text())["step"] == 8
    assert (checkpoints / "ckpt-8.data-00000-of-00001.unreadable").exists()
    assert tf.train.load_checkpoint(str(checkpoints / "ckpt-8")) is not None  # written anew
    # The newest index file removed by hand.
    (checkpoints / "ckpt-8.index").unlink()
    results.unlink()
    assert cli.main(run) == 0
    out, err = capsys.readouterr()
    assert (
        f"skipping checkpoint {checkpoints / 'ckpt-8'}: its index file ckpt-8.index is missing"
        in err
    )
    assert f"resuming from {checkpoints / 'ckpt-6'} at step 6" in out
    # No checkpoint readable: an error, not a silent fresh start.
    for index in checkpoints.glob("ckpt-*.index"):
        index.unlink()
    results.unlink()
    line = one_error_line(*run_cli(run, capsys))
    assert re.search(r"checkpoints: none of its \d+ checkpoint\(s\) can be read", line), line


def test_running_out_of_memory_is_one_line_with_advice(paths, tmp_path, capsys, monkeypatch):
    from keras_bert.datasets import readers

    def allocate(*args, **kwargs):
        raise MemoryError(
            "Unable to allocate 12.0 GiB for an array with shape (100000, 32768) and data type "
            "float32"
        )

    monkeypatch.setattr(readers, "read_texts_and_labels", allocate)
    line = one_error_line(*run_cli([a.format(**paths) for a in FINETUNE], capsys))
    assert line == (
        "keras-bert finetune: error: out of memory (Unable to allocate 12.0 GiB for an array "
        "with shape (100000, 32768) and data type float32): lower the batch size "
        "(--batch-size, or batch_size in a recipe; gradient_accumulation_steps keeps the "
        "effective batch) or the sequence length (--seq-length / seq_length), or free memory"
    )
    assert not os.path.exists(os.path.join(paths["tmp"], "out"))


def test_byte_order_marks_are_not_part_of_the_text(paths, tmp_path, capsys):
    """A table and a vocabulary saved "UTF-8 with BOM" (Windows editors,
    Excel's CSV UTF-8) read as without it: the header is `label`, the
    vocabulary's first token `[PAD]`."""
    bom = "\ufeff"
    (tmp_path / "train.tsv").write_text(
        bom + "label\ttext\npos\tthe fox\nneg\tthe dog\npos\ta lazy fox\nneg\tthe brown dog\n",
        encoding="utf-8",
    )
    (tmp_path / "dev.jsonl").write_text(
        bom + '{"text": "the fox", "label": "pos"}\n{"text": "the dog", "label": "neg"}\n',
        encoding="utf-8",
    )
    with open(paths["vocab"], encoding="utf-8") as f:
        vocab = f.read()
    (tmp_path / "bom_vocab.txt").write_text(bom + vocab, encoding="utf-8")
    argv = (
        ["finetune", "--task", "classify", "--train", str(tmp_path / "train.tsv")]
        + ["--dev", str(tmp_path / "dev.jsonl"), "--output-dir", str(tmp_path / "model")]
        + ["--vocab-file", str(tmp_path / "bom_vocab.txt"), "--seq-length", "8"]
        + ["--batch-size", "2", "--epochs", "1", "--no-tensorboard"]
    )
    code, err = run_cli(argv, capsys)
    assert code == 0, err
    saved = json.loads((tmp_path / "model" / "finetune_config.json").read_text())
    assert saved["label_names"] == ["neg", "pos"]
    from keras_bert.text.tokenizer import load_vocabulary

    assert load_vocabulary(str(tmp_path / "bom_vocab.txt")) == vocab.splitlines()
