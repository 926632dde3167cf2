"""Bad input to the exported signatures: no crash, no hang; a documented result
or a clear error.

Documented results (keras_bert/export*.py): empty / whitespace-only text is an
empty sequence (`[CLS] [SEP]`, no words, no answer); long text is cut to
`seq_length` pieces (pairs by the original longest-first rule; tagger words
after the window get `O`; question answering searches the first `max_windows`
windows); invalid UTF-8 is read as Python's `decode("utf-8", errors="replace")`
reads it; batches may hold 0 rows; mismatched batch sizes raise
InvalidArgumentError naming the inputs.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import SEQ_LENGTH, call, decode, keras_features, keras_model, kinds

from keras_bert.assets import AUSTEN_DIR
from keras_bert.datasets.squad import answer_text

EMPTY = ["", " ", "\t\n  \u3000"]
INVALID = [b"caf\xc3 au \xff lait", b"\xe2\x82", b"ok \xf0\x9f\x98"]


@pytest.fixture(scope="module")
def long_text():
    with open(os.path.join(AUSTEN_DIR, "emma.txt"), encoding="utf-8") as f:
        text = f.read()[:100_000]
    assert len(text) == 100_000
    return text


def text_inputs(kind, texts):
    if kind == "squad":
        return {"question": ["Who is handsome?"] * len(texts), "context": texts}
    inputs = {"text": texts}
    if kind in ("classifier", "regressor"):
        inputs["text_pair"] = tf.constant([], tf.string)
    return inputs


# === Empty and whitespace-only text ===


@pytest.mark.parametrize("kind", kinds("embeddings", "classifier"))
def test_empty_text_is_an_empty_sequence(kind):
    served = call(kind, **text_inputs(kind, EMPTY))
    outputs = keras_model(kind)(keras_features(EMPTY, kind=kind))
    if kind == "classifier":
        np.testing.assert_allclose(served["logits"], outputs.numpy(), atol=1e-5)
    else:
        np.testing.assert_allclose(np.linalg.norm(served["embedding"], axis=1), 1.0, atol=1e-5)
    features = keras_features(EMPTY, kind=kind)
    assert features["input_mask"].numpy().sum(axis=1).tolist() == [2, 2, 2]  # [CLS] [SEP]


@pytest.mark.slow
def test_empty_text_has_no_words_and_no_answer():
    tagged = call("tagger", text=EMPTY)
    assert tagged["num_tokens"].tolist() == [0, 0, 0]
    assert tagged["num_entities"].tolist() == [0, 0, 0]
    answered = call("squad", **text_inputs("squad", EMPTY))
    assert answered["answer"].tolist() == [b""] * 3
    assert answered["start"].tolist() == answered["end"].tolist() == [-1] * 3
    assert not answered["has_answer"].any()
    assert np.isneginf(answered["score"]).all()  # no span at all


# === A 100,000-character text ===


@pytest.mark.parametrize("kind", kinds("embeddings", "classifier"))
def test_long_text_is_cut_to_seq_length(kind, long_text):
    served = call(kind, **text_inputs(kind, [long_text]))
    features = keras_features([long_text], kind=kind)
    assert features["input_mask"].numpy().sum() == SEQ_LENGTH[kind]
    outputs = keras_model(kind)(features)
    if kind == "classifier":
        np.testing.assert_allclose(served["logits"], outputs.numpy(), atol=1e-5)
    else:
        # The same as the text's first few hundred characters: only the window counts.
        prefix = call(kind, text=[long_text[:500]])["embedding"]
        np.testing.assert_allclose(served["embedding"], prefix, atol=1e-5)


def test_long_text_pair_is_cut_longest_first(long_text):
    served = call("classifier", text=["A short question?"], text_pair=[long_text])
    features = keras_features(["A short question?"], [long_text])
    np.testing.assert_allclose(
        served["logits"], keras_model("classifier")(features).numpy(), atol=1e-5
    )


@pytest.mark.slow
def test_long_text_tags_every_word_and_only_the_window_is_seen(long_text):
    served = call("tagger", text=[long_text])
    words = long_text.split()
    assert served["num_tokens"][0] == len(words)
    assert decode(served["tokens"][0]).tolist() == words
    head = " ".join(words[:20])
    short = call("tagger", text=[head])
    seen = int((short["tags"][0] != b"").sum())
    # Words inside the window are tagged as in a short text; every word after it is "O".
    assert served["tags"][0, :seen].tolist() == short["tags"][0, :seen].tolist()
    assert set(served["tags"][0, 20:].tolist()) == {b"O"}
    ends = served["token_end"][0]
    assert long_text[served["token_start"][0, -1] : ends[-1]] == words[-1]


@pytest.mark.slow
def test_long_context_is_searched_in_the_first_windows(long_text):
    served = call("squad", **text_inputs("squad", [long_text]))
    assert served["start"][0] <= served["end"][0]
    if served["has_answer"][0]:
        answer = served["answer"][0].decode("utf-8")
        # The answer is its span with whitespace runs as one space (the one answer-text rule).
        assert answer_text(long_text[served["start"][0] : served["end"][0]]) == answer
        # 64 windows of 16-piece steps reach about a thousand pieces into the text.
        assert served["end"][0] < 20_000


# === Invalid UTF-8 ===


@pytest.mark.parametrize("kind", kinds("embeddings", "classifier", "tagger", "squad"))
def test_invalid_utf8_reads_as_python_replace(kind):
    served = call(kind, **text_inputs(kind, INVALID))
    cleaned = [b.decode("utf-8", errors="replace") for b in INVALID]
    expected = call(kind, **text_inputs(kind, cleaned))
    for name, value in served.items():
        if value.dtype == object:
            assert value.tolist() == expected[name].tolist(), name
            decode(value)  # every output string is valid UTF-8
        else:
            np.testing.assert_allclose(value, expected[name], atol=1e-6, err_msg=name)


# === Batch sizes ===


@pytest.mark.parametrize("kind", kinds("embeddings", "classifier", "regressor", "tagger", "squad"))
def test_batch_of_zero(kind):
    served = call(kind, **text_inputs(kind, tf.constant([], tf.string)))
    assert all(value.shape[0] == 0 for value in served.values()), {
        k: v.shape for k, v in served.items()
    }


@pytest.mark.parametrize("kind", kinds("classifier", "tagger", "squad"))
def test_batch_of_a_thousand(kind):
    texts = ["Emma Woodhouse, handsome, clever, and rich.", "Mr. Knightley lives at Donwell."]
    served = call(kind, **text_inputs(kind, texts * 500))
    single = call(kind, **text_inputs(kind, texts))
    for name, value in served.items():
        assert value.shape[0] == 1000
        repeated = np.concatenate([single[name]] * 500)
        if value.dtype == object:
            assert value.tolist() == repeated.tolist(), name
        else:
            np.testing.assert_allclose(value, repeated, atol=1e-5, err_msg=name)


def test_text_pair_of_another_batch_size_is_a_clear_error():
    with pytest.raises(tf.errors.InvalidArgumentError, match="one `text_pair` per `text`"):
        call("classifier", text=["a", "b", "c"], text_pair=["x", "y"])


@pytest.mark.slow
def test_question_and_context_of_different_batch_sizes_is_a_clear_error():
    with pytest.raises(tf.errors.InvalidArgumentError, match="one `context` per `question`"):
        call("squad", question=["a", "b"], context=["x"])


def test_example_without_its_text_feature_is_a_clear_error():
    example = tf.train.Example().SerializeToString()
    with pytest.raises(tf.errors.InvalidArgumentError, match="text"):
        call("classifier", "serve_examples", inputs=[example])


# === Inputs of the wrong shape or range: one row per case ===

PAIR = tf.constant([], tf.string)
IDS = dict(input_ids=[[2, 5, 3]], input_mask=[[1, 1, 1]], segment_ids=[[0, 0, 0]])
BAD_CALLS = [
    # (case, signature, inputs, message)
    (
        "rank-2 text",
        "serving_default",
        dict(text=[["a good film"]], text_pair=PAIR),
        r"Shape of tensor text \[1,1\] is not compatible with expected shape \[\?\]",
    ),
    (
        "scalar text",
        "serving_default",
        dict(text="a good film", text_pair=PAIR),
        r"Shape of tensor text \[\] is not compatible",
    ),
    (
        "rank-2 serialized examples",
        "serve_examples",
        dict(inputs=[[b""]]),
        r"Shape of tensor inputs \[1,1\]",
    ),
    (
        "rank-1 ids",
        "serve_ids",
        dict(IDS, input_ids=[2, 5, 3]),
        r"Shape of tensor input_ids \[3\] is not compatible with expected shape \[\?,\?\]",
    ),
    (
        "negative id",
        "serve_ids",
        dict(IDS, input_ids=[[2, -5, 3]]),
        r"input_ids must lie in \[0, 30522\); got min\] \[-5\]",
    ),
    (
        "id past the vocabulary",
        "serve_ids",
        dict(IDS, input_ids=[[2, 99999, 3]]),
        r"input_ids must lie in \[0, 30522\); got min\] \[2\] \[max\] \[99999\]",
    ),
    (
        "segment 2",
        "serve_ids",
        dict(IDS, segment_ids=[[0, 2, 0]]),
        r"segment_ids must lie in \[0, 2\)",
    ),
    (
        "mask of another shape",
        "serve_ids",
        dict(IDS, input_mask=[[1, 1]]),
        r"must have one shape; got\] \[1 3\] \[1 2\] \[1 3\]",
    ),
    (
        "1000 ids",
        "serve_ids",
        {name: np.ones([1, 1000], np.int32) for name in IDS},
        r"at most 512 ids long \(max_position_embeddings\); got\] \[1000\]",
    ),
]


@pytest.mark.parametrize(
    "case, signature, inputs, message", BAD_CALLS, ids=[case[0] for case in BAD_CALLS]
)
def test_bad_call_is_a_clear_error(case, signature, inputs, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        call("classifier", signature, **inputs)
    # And the model keeps serving.
    assert call("classifier", "serve_ids", **IDS)["logits"].shape == (1, 3)


@pytest.mark.slow
def test_short_contexts_are_answered():
    # Before: contexts of <= 30 words answered "" with score -inf: the n-best
    # positions were ranked over padding too, which this barely trained model
    # scores as high as the context. Now ranked over [CLS] and the context only.
    words = "the quick brown fox jumps over the lazy dog near a river bank".split()
    contexts = [" ".join((words * 3)[:n]) for n in (3, 5, 10, 20, 30)]
    served = call("squad", question=["What jumps?"] * len(contexts), context=contexts)
    # A best span exists for every context (this export is SQuAD 2.0: the null may still win).
    assert np.isfinite(served["score"]).all(), served["score"]
    assert np.isfinite(served["null_score_diff"]).all()
    assert served["has_answer"].any()
    for context, start, end, answer, has_answer in zip(
        contexts, served["start"], served["end"], served["answer"], served["has_answer"]
    ):
        if has_answer:
            assert 0 <= start < end <= len(context)
            assert answer_text(context[start:end]) == answer.decode("utf-8")
        else:
            assert (start, end, answer) == (-1, -1, b"")


# === Control characters, empty questions ===


@pytest.mark.slow
def test_tagger_keeps_every_word_around_a_nul():
    # Before: tensorflow-text's regex split stopped at the NUL: tokens ["Emma"].
    text = "Emma\x00 lives in \x00High\x1fbury\x00"
    served = call("tagger", text=[text])
    count = int(served["num_tokens"][0])
    assert decode(served["tokens"][0, :count]).tolist() == ["Emma", "lives", "in", "High\x1fbury"]
    starts, ends = served["token_start"][0, :count], served["token_end"][0, :count]
    assert [text[s:e] for s, e in zip(starts, ends)] == ["Emma", "lives", "in", "High\x1fbury"]
    assert (served["tags"][0, :count] != b"").all()


@pytest.mark.slow
@pytest.mark.parametrize("signature", ["serving_default", "serve_examples"])
def test_empty_question_is_refused_by_position(signature):
    questions = ["Who is handsome?", "", " \x00\t"]
    context = "Emma Woodhouse, handsome, clever, and rich."
    if signature == "serving_default":
        inputs = dict(question=questions, context=[context] * 3)
    else:
        inputs = dict(
            inputs=[
                tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            name: tf.train.Feature(
                                bytes_list=tf.train.BytesList(value=[value.encode()])
                            )
                            for name, value in (("question", q), ("context", context))
                        }
                    )
                ).SerializeToString()
                for q in questions
            ]
        )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"empty question .* batch position\(s\)\] \[1 2\]"
    ):
        call("squad", signature, **inputs)
    # And the model keeps serving.
    answered = call("squad", question=questions[:1], context=[context])
    assert answered["answer"].shape == (1,)
