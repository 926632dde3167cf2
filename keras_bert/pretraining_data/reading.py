"""Reading the corpus: one sentence per line, a blank line between documents,
in blocks, tokenized in the graph."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import numpy as np

from keras_bert import text_files
from keras_bert.pretraining_data.options import (
    BLOCK_CHARS,
    BLOCK_DOCUMENTS,
    BLOCK_MIN_DOCUMENTS,
    Block,
)

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer


@dataclasses.dataclass
class ReadStats:
    files: int = 0
    bytes_read: int = 0
    lines: int = 0
    invalid_utf8_lines: int = 0
    invalid_utf8_examples: list = dataclasses.field(default_factory=list)  # "file:line"
    empty_files: list = dataclasses.field(default_factory=list)


def read_documents(files: Iterable[str], stats: ReadStats | None = None) -> Iterator[list[str]]:
    """Yields documents, each a list of sentences (stripped, non-empty lines).

    A blank line or the end of a file ends a document. Bytes that are not UTF-8
    are dropped, as the original's `convert_to_unicode(..., "ignore")` does;
    such lines are counted and the first few named in `stats`.
    """
    stats = stats if stats is not None else ReadStats()
    for path in files:
        stats.files += 1
        has_text = False
        document = []
        with text_files.open_binary(path) as f:
            # UTF-16 would come out as NUL-separated letters: refused, naming the file.
            text_files.check_encoding(f.read(text_files.HEAD_BYTES), path)
            f.seek(0)
            for line_number, raw in enumerate(f, 1):
                stats.bytes_read += len(raw)
                stats.lines += 1
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    line = raw.decode("utf-8", "ignore")
                    stats.invalid_utf8_lines += 1
                    if len(stats.invalid_utf8_examples) < 5:
                        stats.invalid_utf8_examples.append(f"{path}:{line_number}")
                if line_number == 1:
                    line = text_files.strip_bom(line)
                line = line.strip()
                if line:
                    document.append(line)
                    has_text = True
                elif document:
                    yield document
                    document = []
        if document:
            yield document
        if not has_text:
            stats.empty_files.append(path)


def iter_blocks(
    documents: Iterable[list[str]],
    block_documents: int | None = None,
    block_chars: int | None = None,
    block_min_documents: int | None = None,
) -> Iterator[list[list[str]]]:
    """Groups documents into blocks; the boundaries depend on the text only."""
    block_documents = block_documents or BLOCK_DOCUMENTS
    block_chars = block_chars or BLOCK_CHARS
    block_min_documents = block_min_documents or BLOCK_MIN_DOCUMENTS
    block, chars = [], 0
    for document in documents:
        block.append(document)
        chars += sum(len(s) for s in document)
        if len(block) >= block_documents or (
            chars >= block_chars and len(block) >= block_min_documents
        ):
            yield block
            block, chars = [], 0
    if block:
        yield block


def make_tokenize_fn(
    tokenizer: BertTokenizer, batch_size: int = 4096
) -> Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]:
    """strings -> (flat int32 ids, per-string lengths), batched through the in-graph tokenizer."""
    import tensorflow as tf

    strings_spec = [tf.TensorSpec([None], tf.string)]

    @tf.function(input_signature=strings_spec, autograph=False)
    def tokenize_common(strings):
        ids, may_have_long_words = tokenizer.tokenize_unless_long_words(strings)
        return ids.flat_values, ids.row_lengths(), may_have_long_words

    # Traced only if some batch may hold a word of over `max_chars_per_word`.
    @tf.function(input_signature=strings_spec, autograph=False)
    def tokenize_exact(strings):
        ids = tokenizer.tokenize(strings)
        return ids.flat_values, ids.row_lengths()

    def run(strings):
        flats, lengths = [], []
        for start in range(0, len(strings), batch_size):
            batch = tf.constant(strings[start : start + batch_size])
            flat, length, may_have_long_words = tokenize_common(batch)
            if may_have_long_words:
                flat, length = tokenize_exact(batch)
            flats.append(flat.numpy())
            lengths.append(length.numpy())
        if not flats:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        return np.concatenate(flats).astype(np.int32), np.concatenate(lengths).astype(np.int64)

    return run


def tokenize_block(
    index: int,
    documents: Sequence[Sequence[str]],
    tokenize_fn: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]],
) -> Block:
    """Documents of strings -> Block; sentences without tokens and then empty documents drop out."""
    sentences = [s for document in documents for s in document]
    token_ids, lengths = tokenize_fn(sentences)
    per_document = np.array([len(d) for d in documents], np.int64)
    keep = lengths > 0
    # Sentences kept per document, then documents that kept any.
    kept_per_document = (
        np.add.reduceat(keep.astype(np.int64), np.concatenate([[0], np.cumsum(per_document)[:-1]]))
        if len(per_document)
        else per_document
    )
    kept_per_document = kept_per_document[kept_per_document > 0]
    return Block(
        index=index,
        token_ids=token_ids,
        sentence_splits=np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64),
        document_splits=np.concatenate([[0], np.cumsum(kept_per_document)]).astype(np.int64),
    )
