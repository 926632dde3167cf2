"""One answer-text rule for SQuAD answers, from files (`datasets.squad.postprocess`)
and from text in the graph (`SpanFinder.answer`, behind
`BertSpanExtractor.predict_answers` and the exports): the span of the context
with each run of run_squad.py's whitespace as one space, `start` / `end` the
exact characters' offsets."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertTokenizer
from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets import squad
from keras_bert.preprocessing.squad import SpanFinder

SEQ_LENGTH = 48
QUESTION = "Which place?"

# (context, first word, last word, the answer both entry points give)
CASES = [
    ("New  York\tcity\nnow here.", "York", "now", "York city now"),
    ("We met in  New\r\n\r\nYork today.", "New", "York", "New York"),
    ("It was  far\u202f\u202faway there.", "far", "away", "far away"),
    ("A tab\tinside stays one space.", "tab", "inside", "tab inside"),
    ("Nothing to change here at all.", "change", "at", "change here at"),
]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB_FILE, lowercase=True)


def logits_at(input_ids, segment_ids, first_id, last_id):
    """Start logits high at the context's piece `first_id`, end logits at `last_id`."""
    context = segment_ids == 1
    start = np.where(context & (input_ids == first_id), 10.0, 0.0).astype(np.float32)
    end = np.where(context & (input_ids == last_id), 10.0, 0.0).astype(np.float32)
    return start, end


def piece_id(tokenizer, word):
    (pieces,) = tokenizer.tokenize(tf.constant([word])).to_list()
    assert len(pieces) == 1, (word, pieces)
    return pieces[0]


@pytest.mark.parametrize("context, first, last, expected", CASES)
def test_files_and_text_give_the_same_answer(tokenizer, context, first, last, expected):
    first_id, last_id = piece_id(tokenizer, first), piece_id(tokenizer, last)

    # From a SQuAD file: run_squad.py's features and post-processing.
    data = [
        {
            "title": "t",
            "paragraphs": [{"context": context, "qas": [{"id": "q", "question": QUESTION}]}],
        }
    ]
    examples = squad.read_squad_examples(data, is_training=False)
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=SEQ_LENGTH, max_query_length=16
    )
    arrays = squad.feature_arrays(features)
    start, end = logits_at(arrays["input_ids"], arrays["segment_ids"], first_id, last_id)
    predictions, _, nbest = squad.postprocess(examples, features, start, end)
    from_file = predictions["q"]
    best = nbest["q"][0]

    # From text, in the graph.
    def run_model(window_features):
        s, e = logits_at(
            window_features["input_ids"].numpy(),
            window_features["segment_ids"].numpy(),
            first_id,
            last_id,
        )
        return {"start_logits": tf.constant(s), "end_logits": tf.constant(e)}

    finder = SpanFinder(tokenizer, SEQ_LENGTH, max_query_length=16)
    found = finder.answer(tf.constant([QUESTION]), tf.constant([context]), run_model, n_best=2)
    from_text = found["answer"].numpy()[0].decode("utf-8")
    begin, stop = int(found["start"][0]), int(found["end"][0])

    assert from_file == from_text == expected
    assert found["n_best_answer"].numpy()[0, 0].decode("utf-8") == expected
    # The offsets keep the context's own characters, the same from both.
    assert (best["char_start"], best["char_end"]) == (begin, stop)
    assert squad.answer_text(context[begin:stop]) == expected
    assert context[begin:stop].split() == expected.split()


def test_the_rule_in_python_and_in_the_graph():
    spans = ["a  b", "a\t\tb\nc", "a\r\n b", "a\u202fb", "a\u00a0b", " lead and trail ", ""]
    in_graph = tf.strings.regex_replace(tf.constant(spans), squad.ANSWER_WHITESPACE, " ")
    assert [t.decode("utf-8") for t in in_graph.numpy()] == [squad.answer_text(s) for s in spans]
    # run_squad.py's whitespace only: a no-break space stays inside its doc token.
    assert squad.answer_text("a\u00a0b") == "a\u00a0b"
