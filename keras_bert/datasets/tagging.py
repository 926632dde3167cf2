"""Token tagging data: CoNLL-style files and TFDS `conll2003`, converted to
word-piece features labelled on each word's first piece (the paper's choice).

Legend for shapes: N = sentences, T = sequence length.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np
import tensorflow as tf

from keras_bert import text_files

if TYPE_CHECKING:
    from keras_bert.text.tokenizer import BertTokenizer

IGNORED = -1  # label id of pieces that carry no label (weight 0)


@dataclasses.dataclass
class TaggedSentences:
    words: list  # list of lists of words
    tags: list | None  # list of lists of tags (None for unlabelled data)

    def __len__(self):
        return len(self.words)


def read_conll(path: str) -> TaggedSentences:
    """CoNLL-style file: one `word<TAB or space>...<tag>` per line (the tag is the
    last field), a blank line between sentences, `-DOCSTART-` lines skipped."""
    lines = text_files.read_lines(path, missing="data file not found")
    words, tags, sentence_words, sentence_tags = [], [], [], []
    # A CoNLL file has the same columns on every line (word ... tag), and a
    # tag is one word: anything else is not CoNLL (e.g. a TSV of labelled
    # sentences, whose "tags" would be the sentences), refused by line.
    columns = None

    def flush():
        if sentence_words:
            words.append(list(sentence_words))
            tags.append(list(sentence_tags))
            sentence_words.clear()
            sentence_tags.clear()

    for number, line in enumerate(lines, 1):
        if not line.strip():
            flush()
            continue
        if line.startswith("-DOCSTART-"):
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) < 2:
            raise ValueError(f"{path}, line {number}: expected `word<TAB>tag`, got {line!r}")
        if len(fields[-1].split()) > 1:
            raise ValueError(
                f"{path}, line {number}: the tag {fields[-1][:40]!r} has spaces; a CoNLL "
                f"file has one word and its tag per line (a table of labelled texts is "
                f"--task classify's)"
            )
        if columns is None:
            columns = (len(fields), number)
        elif len(fields) != columns[0]:
            raise ValueError(
                f"{path}, line {number}: {len(fields)} columns, line {columns[1]} has "
                f"{columns[0]}; a CoNLL file has one word and its tag per line (a table "
                f"of labelled texts is --task classify's)"
            )
        sentence_words.append(fields[0])
        sentence_tags.append(fields[-1].strip())
    flush()
    if not words:
        raise ValueError(f"{path}: no sentences")
    return TaggedSentences(words, tags)


def read_conll2003_tfds(split: str, data_dir: str | None = None) -> TaggedSentences:
    """TFDS `conll2003` (features `tokens`, `ner`) as `TaggedSentences`, with
    the TFDS tag names."""
    import tensorflow_datasets as tfds

    dataset, info = tfds.load("conll2003", split=split, data_dir=data_dir, with_info=True)
    names = info.features["ner"].feature.names
    words, tags = [], []
    for row in tfds.as_numpy(dataset):
        words.append([w.decode("utf-8") for w in row["tokens"]])
        tags.append([names[int(t)] for t in row["ner"]])
    return TaggedSentences(words, tags)


def tag_vocabulary(tag_lists: Iterable[Iterable[str]]) -> list[str]:
    """`O` first, then the other tags sorted by entity type then prefix."""
    distinct = {tag for tags in tag_lists for tag in tags}
    others = sorted(distinct - {"O"}, key=lambda t: (t.partition("-")[2], t))
    return (["O"] if "O" in distinct else []) + others


def encode_tagged(
    tokenizer: BertTokenizer,
    sentences: TaggedSentences,
    label_names: Sequence[str] | None = None,
    seq_length: int = 128,
    strict: bool = True,
) -> tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray, list[np.ndarray]]:
    """Sentences -> features, label ids and weights on the first piece of each word.

    Each word is tokenized as the original does (it may split further at
    punctuation); the label sits on its first piece, the other pieces get label
    `IGNORED` and weight 0. The sentence is cut before the first word whose
    pieces no longer fit in `seq_length - 2` (that word and every later one
    get no piece, as the exported tagger does); a word with no piece at all
    (only characters the tokenizer drops) is skipped.

    Returns (features dict of int32 (N, T), labels int32 (N, T) or None,
    weights float32 (N, T), first_pieces: per sentence, each word's piece
    position or -1 where the word was cut or vanished). A tag outside
    `label_names` is an error when `strict`, else left unlabelled (dev data
    may hold tags the training data never showed; metrics still count them).
    """
    flat = [w for words in sentences.words for w in words]
    pieces = tokenizer.tokenize(tf.constant(flat or [""])).to_list() if flat else []
    index = {name: i for i, name in enumerate(label_names or [])}
    n = len(sentences)
    input_ids = np.full((n, seq_length), tokenizer.pad_id, np.int32)
    input_mask = np.zeros((n, seq_length), np.int32)
    labels = np.full((n, seq_length), IGNORED, np.int32)
    weights = np.zeros((n, seq_length), np.float32)
    first_pieces = []
    cursor = 0
    for row, words in enumerate(sentences.words):
        ids, positions, full = [tokenizer.cls_id], [], False
        for k, word in enumerate(words):
            word_pieces = pieces[cursor + k]
            full = full or len(ids) + len(word_pieces) > seq_length - 1
            if full or not word_pieces:
                positions.append(-1)
                continue
            positions.append(len(ids))
            ids.extend(word_pieces)
        cursor += len(words)
        ids.append(tokenizer.sep_id)
        input_ids[row, : len(ids)] = ids
        input_mask[row, : len(ids)] = 1
        first_pieces.append(np.asarray(positions, np.int32))
        if label_names is not None and sentences.tags is not None:
            for position, tag in zip(positions, sentences.tags[row]):
                if position < 0:
                    continue
                # A tag is a name of label_names or its index (as a classifier's labels).
                is_index = isinstance(tag, (int, np.integer)) and not isinstance(tag, bool)
                if is_index and 0 <= tag < len(label_names):
                    label = int(tag)
                elif not is_index and tag in index:
                    label = index[tag]
                elif not strict:
                    continue
                else:
                    raise ValueError(
                        f"sentence {row}: tag {tag!r} is neither one of {label_names} "
                        f"nor an index below {len(label_names)}"
                    )
                labels[row, position] = label
                weights[row, position] = 1.0
    features = {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": np.zeros_like(input_ids),
    }
    return features, (labels if label_names is not None else None), weights, first_pieces


def decode_tags(
    predicted_ids: np.ndarray,
    first_pieces: Sequence[np.ndarray],
    label_names: Sequence[str],
    fill: str = "O",
) -> list[list[str]]:
    """(N, T) predicted label ids -> per sentence, one tag per word (`fill` for
    words that had no piece in the sequence)."""
    tags = []
    for row, positions in enumerate(first_pieces):
        tags.append([label_names[predicted_ids[row, p]] if p >= 0 else fill for p in positions])
    return tags
