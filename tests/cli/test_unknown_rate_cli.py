"""The [UNK] line (and its warning) of `create-pretraining-data`, `vocab` and
`finetune`: a vocabulary that cannot spell the text says so (Greek
text with an English vocabulary went through in silence)."""

from keras_bert import cli
from keras_bert.assets import VOCAB_FILE

from harness import run_command

GREEK = [
    "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα.",
    "Είναι προικισμένοι με λογική και συνείδηση, και οφείλουν να συμπεριφέρονται "
    "μεταξύ τους με πνεύμα αδελφοσύνης.",
]
ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "A lazy dog sleeps all day.",
    "The fox runs away from the farm.",
    "The farmer looks for the fox.",
]


def unknown_lines(text):
    return [line for line in text.splitlines() if line.startswith("[UNK]: ")]


def test_create_pretraining_data_reports_and_warns(tmp_path, capsys):
    corpus = tmp_path / "greek.txt"
    corpus.write_text("\n".join(GREEK) + "\n\n" + "\n".join(GREEK) + "\n", encoding="utf-8")
    argv = [
        "create-pretraining-data",
        "--input-file",
        str(corpus),
        "--vocab-file",
        VOCAB_FILE,
        "--max-seq-length",
        "32",
        "--max-predictions-per-seq",
        "5",
        "--dupe-factor",
        "1",
        "--num-workers",
        "1",
        "--quiet",
    ]
    assert (
        cli.main(argv + ["--output-file", str(tmp_path / "a.tfrecord"), "--no-do-lower-case"]) == 0
    )
    out, err = capsys.readouterr()
    [line] = unknown_lines(out)
    assert line.endswith("in the input text")
    assert "% of the word pieces are [UNK]" in err and VOCAB_FILE in err
    # Lowercased, the vocabulary has every Greek letter: no [UNK], but letter by letter.
    assert cli.main(argv + ["--output-file", str(tmp_path / "b.tfrecord")]) == 0
    out, err = capsys.readouterr()
    assert unknown_lines(out)[0].startswith("[UNK]: 0 of ")
    assert "letter by letter" in err


def test_vocab_reports_the_learned_vocabulary_on_its_corpus(tmp_path, capsys):
    corpus = tmp_path / "english.txt"
    corpus.write_text("\n".join(ENGLISH * 20) + "\n", encoding="utf-8")
    assert (
        run_command(
            "vocab --input {input} --vocab-size 200 --output {output}",
            input=corpus,
            output=tmp_path / "vocab.txt",
        )
        == 0
    )
    out, err = capsys.readouterr()
    [line] = unknown_lines(out)
    assert line.startswith("[UNK]: 0 of ") and line.endswith("in the input text")
    assert "warning" not in err


def test_finetune_reports_its_training_texts(tmp_path, capsys):
    rows = [f"{text}\t{label}" for text, label in zip(GREEK * 2, ["a", "b", "b", "a"])]
    (tmp_path / "train.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert (
        run_command(
            "finetune --task classify --train {train} --output-dir "
            "{output_dir} --vocab-file {vocab_file} --seq-length 8 "
            "--batch-size 2 --epochs 1 --no-tensorboard",
            train=tmp_path / "train.tsv",
            output_dir=tmp_path / "model",
            vocab_file=VOCAB_FILE,
        )
        == 0
    )
    out, err = capsys.readouterr()
    [line] = unknown_lines(out)
    assert line.endswith("in the training texts")
    assert "letter by letter" in err and VOCAB_FILE in err
