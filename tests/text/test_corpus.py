"""prepare-corpus: sentence splitting, books, text folders, Wikipedia sources."""

import os
import re

import pytest

from keras_bert.assets import AUSTEN_DIR
from keras_bert.text import corpus


def test_abbreviations_and_quotes_do_not_end_sentences():
    text = (
        'Mr. Woodhouse was ill. "Are you sure?" said Mrs. Weston. She smiled... '
        "Then she left! Dr. Perry came at 3 p.m. to see Miss Bates. St. James's was full; "
        "J. Knightley agreed."
    )
    assert corpus.split_sentences(text) == [
        "Mr. Woodhouse was ill.",
        '"Are you sure?" said Mrs. Weston.',
        "She smiled...",
        "Then she left!",
        "Dr. Perry came at 3 p.m. to see Miss Bates.",
        "St. James's was full; J. Knightley agreed.",
    ]


@pytest.fixture(scope="module")
def austen(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("austen") / "austen.txt")
    documents, sentences = corpus.prepare_corpus("books", [AUSTEN_DIR], path)
    return path, documents, sentences


def test_austen_chapters_are_documents(austen):
    path, documents, sentences = austen
    headings = 0
    for name in os.listdir(AUSTEN_DIR):
        with open(os.path.join(AUSTEN_DIR, name), encoding="utf-8") as f:
            headings += sum(1 for line in f if re.match(r"^(CHAPTER|Chapter) ", line))
    assert documents == headings
    text = open(path, encoding="utf-8").read()
    assert text.count("\n\n") == documents - 1
    lines = [line for line in text.split("\n") if line]
    assert len(lines) == sentences
    # Front matter and headings are gone; hard wrapping is undone.
    assert "By Jane Austen" not in text and "CHAPTER" not in text and "VOLUME" not in text
    assert (
        "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy "
        "disposition" in text
    )


def test_austen_sentences_never_end_at_an_abbreviation(austen):
    path, _, sentences = austen
    lines = [line for line in open(path, encoding="utf-8").read().split("\n") if line]
    ends_at_title = [line for line in lines if re.search(r"\b(Mr|Mrs|Dr|St)\.[\"'_]*$", line)]
    assert ends_at_title == []
    # Titles do appear mid-sentence, thousands of times.
    assert sum(line.count("Mr. ") for line in lines) > 1000
    # Real splitting: most lines are single sentences, not paragraphs.
    assert 25_000 < sentences < 45_000


def test_text_folder_and_wikiextractor(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text(
        "First paragraph, line one\ncontinues here. Second sentence.\n\nNew paragraph.\n",
        encoding="utf-8",
    )
    (folder / "b.txt").write_text("Only one sentence here.\n", encoding="utf-8")
    out = str(tmp_path / "out.txt")
    assert corpus.prepare_corpus("text", [str(folder)], out) == (2, 4)
    assert open(out, encoding="utf-8").read() == (
        "First paragraph, line one continues here.\nSecond sentence.\nNew paragraph.\n\n"
        "Only one sentence here.\n"
    )

    extracted = tmp_path / "wiki_00"
    extracted.write_text(
        '<doc id="1" url="x" title="Anarchism">\nAnarchism\n\nAnarchism is a political '
        'philosophy. It is sceptical of authority.\n</doc>\n<doc id="2" url="y" title="Empty">\n'
        "Empty\n\n</doc>\n",
        encoding="utf-8",
    )
    assert corpus.prepare_corpus("wikiextractor", [str(extracted)], out) == (1, 2)
    assert open(out, encoding="utf-8").read() == (
        "Anarchism is a political philosophy.\nIt is sceptical of authority.\n"
    )


def test_tfds_wikipedia(tmp_path):
    import tensorflow_datasets as tfds

    articles = [
        {
            "title": "A",
            "text": "Heading\nThe first article has text. It has two "
            "sentences about things that happen.",
        },
        {"title": "B", "text": "Second article, one sentence of enough length here."},
    ]

    def as_dataset(self, *args, **kwargs):
        import tensorflow as tf

        return tf.data.Dataset.from_generator(
            lambda: iter(articles),
            output_signature={
                "title": tf.TensorSpec([], tf.string),
                "text": tf.TensorSpec([], tf.string),
            },
        )

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        out = str(tmp_path / "wiki.txt")
        assert corpus.prepare_corpus("tfds", ["wikipedia/20230601.en"], out) == (2, 3)
    assert open(out, encoding="utf-8").read() == (
        "The first article has text.\nIt has two sentences about things that happen.\n\n"
        "Second article, one sentence of enough length here.\n"
    )


def test_cli_prepare_corpus_errors(tmp_path, capsys):
    from keras_bert.cli import main

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbad \xff line\n")
    assert (
        main(
            [
                "prepare-corpus",
                str(bad),
                "--source",
                "text",
                "--output-file",
                str(tmp_path / "o.txt"),
            ]
        )
        == 2
    )
    assert f"{bad}, line 2" in capsys.readouterr().err
    assert (
        main(
            [
                "prepare-corpus",
                str(tmp_path / "none*.txt"),
                "--output-file",
                str(tmp_path / "o.txt"),
            ]
        )
        == 2
    )
    assert "none*.txt" in capsys.readouterr().err
