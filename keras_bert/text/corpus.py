"""Corpus preparation: real text -> the input format of `create-pretraining-data`.

That format is the original BERT's: plain UTF-8 text, one sentence per line, a
blank line between documents (sentence boundaries matter for next-sentence
prediction; document boundaries keep a pair inside one document).

Sources:
* books such as Project Gutenberg texts (`CHAPTER` headings, hard-wrapped
  paragraphs): each chapter is a document; the front matter before the first
  chapter and volume headings are dropped;
* a directory (or glob) of plain text files: each file is a document,
  paragraphs are separated by blank lines;
* Wikipedia: TFDS `wikipedia/<date>.<lang>` (each article a document) or the
  output of WikiExtractor on a dump (`<doc ...>` ... `</doc>` or JSON lines).
"""

import json
import os
import re
from typing import Any, Iterable, Iterator, Mapping, Sequence

from keras_bert import safe_output, text_files
from keras_bert.progress import Progress

# === Sentence splitting ===
#
# A rule-based splitter in the spirit of Punkt: a sentence ends at ".", "!" or
# "?" (and closing quotes / brackets after it) followed by whitespace and a word
# that starts like a sentence (a capital, a digit or an opening quote). A period
# after a known abbreviation or a single letter (an initial) does not end one.

ABBREVIATIONS = frozenset(
    """
mr mrs ms messrs mme mlle mm dr drs prof rev revd hon st ste sr jr esq col gen lt capt cmdr
cpt maj sgt adm gov pres sen rep supt insp bros co corp inc ltd no nos vol vols ch chap
sec fig figs eq pp ed eds al etc viz cf vs approx dept est jan feb mar apr jun jul aug sep
sept oct nov dec mon tue tues wed thu thur thurs fri sat sun mt ft ave blvd rd
""".split()
)

_OPENERS = "\"'(\\[\u2018\u201c"
_CLOSERS = "\"')\\]\u2019\u201d"
_BOUNDARY = re.compile(
    r"(?P<end>[.!?]+[" + _CLOSERS + r"]*)\s+(?=[" + _OPENERS + r"_]*[A-Z0-9\u00C0-\u00DE])"
)
_WORD_BEFORE = re.compile(r"([\w.]+)$")


def _is_abbreviation(text_before):
    """Whether the period that ends `text_before` belongs to an abbreviation or initial."""
    match = _WORD_BEFORE.search(text_before)
    if not match:
        return False
    word = match.group(1).strip("._")
    if not word:
        return False
    if word.lower() in ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isalpha():  # an initial: "J. Smith"
        return True
    # Dotted abbreviations: "i.e", "e.g", "U.S", "p.m".
    return bool(re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", word))


def split_sentences(text: str) -> list[str]:
    """One paragraph of text -> its sentences, whitespace normalised."""
    text = " ".join(text.split())
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(text):
        end = match.group("end")
        if end == "." and _is_abbreviation(text[start : match.start()]):
            continue
        sentence = text[start : match.end("end")].strip()
        if sentence:
            sentences.append(sentence)
        start = match.end()
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def paragraphs(lines: Iterable[str]) -> Iterator[str]:
    """Hard-wrapped lines -> paragraphs (a blank line separates paragraphs)."""
    current = []
    for line in lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            yield " ".join(current)
            current = []
    if current:
        yield " ".join(current)


# === Sources ===

_CHAPTER = re.compile(r"^\s*(CHAPTER|Chapter)\s+([IVXLCDM]+|\d+)\b.*$")
_VOLUME = re.compile(r"^\s*(VOLUME|Volume|BOOK|Book|PART|Part)\s+([IVXLCDM]+|\d+|[A-Z]+)\.?\s*$")
_THE_END = re.compile(r"^\s*(THE END|FINIS|Finis|The End)\.?\s*$")


def book_documents(text: str) -> list[list[str]]:
    """A book with `CHAPTER` headings -> documents (chapters) of sentences.

    Front matter before the first chapter, volume headings and everything after
    "THE END" / "FINIS" are dropped. A book without chapter headings is one
    document.
    """
    lines = text.splitlines()
    if not any(_CHAPTER.match(line) for line in lines):
        document = text_document(text)
        return [document] if document else []
    documents, chapter, in_chapters = [], None, False
    for line in lines:
        if _CHAPTER.match(line):
            if chapter:
                documents.append(chapter)
            chapter, in_chapters = [], True
            continue
        if not in_chapters or _VOLUME.match(line):
            continue
        if _THE_END.match(line):
            break
        chapter.append(line)
    if chapter:
        documents.append(chapter)
    return [d for d in (_sentences_of(chapter) for chapter in documents) if d]


def text_document(text: str) -> list[str]:
    """Plain text (paragraphs separated by blank lines) -> one document of sentences."""
    return _sentences_of(text.splitlines())


def _sentences_of(lines):
    return [s for paragraph in paragraphs(lines) for s in split_sentences(paragraph)]


def wikipedia_documents(articles: Iterable[Mapping[str, Any]]) -> Iterator[list[str]]:
    """Wikipedia articles (dicts with "text", as TFDS `wikipedia/*` gives) -> documents.

    Each line of an article is a paragraph; section headings (a line without
    sentence-final punctuation and under 80 characters) are dropped, as BERT's
    preprocessing kept only text passages.
    """
    for article in articles:
        text = article["text"]
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        document = []
        for line in text.split("\n"):
            line = line.strip()
            if not line or (len(line) < 80 and not line.endswith((".", "!", "?", '"'))):
                continue
            document.extend(split_sentences(line))
        if document:
            yield document


def tfds_wikipedia_documents(
    name: str = "wikipedia/20230601.en", split: str = "train", data_dir: str | None = None
) -> Iterator[list[str]]:
    """Articles of a TFDS Wikipedia dataset -> documents (streamed)."""
    import tensorflow_datasets as tfds

    dataset = tfds.load(name, split=split, data_dir=data_dir, shuffle_files=False)
    return wikipedia_documents(tfds.as_numpy(dataset))


_DOC_START = re.compile(r"^<doc\b[^>]*>\s*$")


def wikiextractor_documents(path: str) -> Iterator[list[str]]:
    """WikiExtractor output on a Wikipedia dump (`<doc>` blocks or --json lines) -> documents.

    The first line of a `<doc>` block is the article title and is dropped.
    """
    with text_files.open_binary(path) as f:
        text_files.check_encoding(f.read(text_files.HEAD_BYTES), path)
    # utf-8-sig: a byte-order mark is dropped; bytes that are not UTF-8 are
    # replaced, as the original's convert_to_unicode does for a dump.
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        first = f.readline()
        f.seek(0)
        if first.lstrip().startswith("{"):
            yield from wikipedia_documents(json.loads(line) for line in f if line.strip())
            return
        lines, inside = [], False
        for line in f:
            if _DOC_START.match(line):
                lines, inside = [], True
            elif line.strip() == "</doc>":
                inside = False
                yield from wikipedia_documents([{"text": "\n".join(lines[1:])}])
            elif inside:
                lines.append(line.rstrip("\n"))


# === Writing ===


def write_documents(documents: Iterable[Sequence[str]], output_file: str) -> tuple[int, int]:
    """Documents of sentences -> one sentence per line, a blank line between documents.

    Returns (documents, sentences) written. Writes to a temporary name and
    renames it when complete.
    """
    if os.path.isdir(output_file):
        raise IsADirectoryError(f"{output_file} is a directory; give the output a file name")
    directory = os.path.dirname(output_file)
    if directory and not os.path.isdir(directory):
        raise FileNotFoundError(f"output directory does not exist: {directory} (for {output_file})")
    num_documents = num_sentences = 0
    with safe_output.open_replacing(output_file) as f:
        for document in documents:
            sentences = [" ".join(s.split()) for s in document if s.strip()]
            if not sentences:
                continue
            if num_documents:
                f.write("\n")
            f.write("\n".join(sentences) + "\n")
            num_documents += 1
            num_sentences += len(sentences)
        if not num_documents:
            raise ValueError(
                f"the input holds no text (empty files?); nothing written to {output_file}"
            )
    return num_documents, num_sentences


def _read_text(path):
    return text_files.read_text(path)


def _input_files(inputs):
    import glob

    files = []
    for pattern in inputs:
        if os.path.isdir(pattern):
            matched = sorted(
                os.path.join(pattern, name)
                for name in os.listdir(pattern)
                if os.path.isfile(os.path.join(pattern, name))
            )
        else:
            matched = sorted(glob.glob(pattern))
        if not matched:
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        files.extend(matched)
    return files


SOURCES = ("books", "text", "tfds", "wikiextractor")


LONG_SENTENCE = 5_000  # characters; longer lines mean the sentence splitter found no ends


def warn(message: str) -> None:
    import sys

    print(f"warning: {message}", file=sys.stderr, flush=True)


def _warn_long(path, documents):
    """Passes `documents` through, warning once per file about huge sentences."""
    warned = False
    for document in documents:
        longest = max((len(s) for s in document), default=0)
        if longest > LONG_SENTENCE and not warned:
            warn(
                f"{path}: a {longest:,}-character sentence (no sentence-ending "
                "punctuation found?); create-pretraining-data cuts every sentence to "
                "max_seq_length pieces, so most of that text will not be seen"
            )
            warned = True
        yield document


def prepare_corpus(
    source: str,
    inputs: Sequence[str],
    output_file: str,
    tfds_split: str = "train",
    tfds_data_dir: str | None = None,
) -> tuple[int, int]:
    """Writes the documents of `inputs` in the pretraining input format.

    Args:
      source: "books" (chapters are documents), "text" (each file is a
        document), "tfds" (inputs: TFDS names such as `wikipedia/20230601.en`)
        or "wikiextractor" (WikiExtractor output files).
      inputs: files, directories or globs (or TFDS names).
    Returns (documents, sentences) written.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if source != "tfds":
        safe_output.check_not_input(output_file, _input_files(inputs), "the output file")

    def documents():
        if source == "tfds":
            for name in inputs:
                yield from tfds_wikipedia_documents(name, tfds_split, tfds_data_dir)
            return
        paths = _input_files(inputs)
        with Progress(len(paths), "files", detail=f"preparing {source}") as bar:
            for path in paths:
                yield from file_documents(path)
                bar.advance()

    def file_documents(path):
        if source == "books":
            text = _read_text(path)
            if text.strip() and not any(_CHAPTER.match(line) for line in text.splitlines()):
                warn(
                    f"{path}: no CHAPTER headings, so the whole book is one document "
                    "(--source text reads a file as one document without this warning)"
                )
            yield from _warn_long(path, book_documents(text))
        elif source == "text":
            document = text_document(_read_text(path))
            if document:
                yield from _warn_long(path, [document])
        else:
            yield from wikiextractor_documents(path)

    return write_documents(documents(), output_file)
