"""Our instances against the original algorithm on the six Austen novels (slow).

The reference numbers come from running Model Garden's copy of the original
`create_instances_from_document` on the same tokenized documents in this test
(its masking is skipped there: it does not change how pairs are made).
"""

import os

import numpy as np
import pytest
from pretraining_reference import original_instances, read_records

from keras_bert.assets import AUSTEN_DIR
from keras_bert.pretraining_data import PretrainingOptions, create, create_pretraining_data, reading
from keras_bert.text import corpus

pytestmark = [pytest.mark.slow, pytest.mark.proof]


@pytest.fixture(scope="module")
def austen(minilm_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("austen")
    text = str(folder / "austen.txt")
    corpus.prepare_corpus("books", [AUSTEN_DIR], text)
    vocab_file = os.path.join(minilm_path, "vocab.txt")
    return text, vocab_file, folder


def _tokenized_documents(text, vocab_file):
    """The corpus as the original holds it: documents of sentences of word-piece strings."""
    tokenizer, tokenize = create._cached_tokenizer(vocab_file, True, create._file_key(vocab_file))
    documents = []
    for block in reading.iter_blocks(reading.read_documents([text])):
        block = reading.tokenize_block(0, block, tokenize)
        splits, docs = block.sentence_splits, block.document_splits
        for d in range(block.num_documents):
            documents.append(
                [
                    [tokenizer.vocab[i] for i in block.token_ids[splits[s] : splits[s + 1]]]
                    for s in range(docs[d], docs[d + 1])
                ]
            )
    return documents, tokenizer.vocab


def test_pairs_match_the_original_on_austen(austen, monkeypatch):
    from official.nlp.data import create_pretraining_data as original

    text, vocab_file, folder = austen
    dupe_factor = 10
    documents, vocab = _tokenized_documents(text, vocab_file)
    monkeypatch.setattr(
        original, "create_masked_lm_predictions", lambda tokens, *args: (tokens, [], [])
    )
    theirs = original_instances(documents, vocab, dupe_factor)
    their_not_next = np.mean([i.is_random_next for i in theirs])
    their_lengths = np.array([len(i.tokens) for i in theirs])

    summary = create_pretraining_data(
        text, str(folder / "ours.tfrecord"), vocab_file, PretrainingOptions(dupe_factor=dupe_factor)
    )
    records = read_records(summary.output_files)
    our_not_next = records["next_sentence_labels"].mean()
    our_lengths = records["input_mask"].sum(axis=1)

    assert abs(our_not_next - their_not_next) <= 0.01, (our_not_next, their_not_next)
    assert abs(len(our_lengths) / len(theirs) - 1) <= 0.05, (len(our_lengths), len(theirs))
    assert abs(our_lengths.mean() / their_lengths.mean() - 1) <= 0.02
    # Short sequences (short_seq_prob): the same share of instances under 64 tokens.
    assert abs((our_lengths < 64).mean() - (their_lengths < 64).mean()) <= 0.02
