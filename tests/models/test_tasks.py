"""Every task model through tests/harness.py's task harness, as a user meets
it: a tiny model fits a few rows of raw text and predicts
(`run_task_test`), a `.keras` file loads in a new Python process and
predicts the same (`fresh_process_results`, one process for all of them),
and the SavedModel export answers a TensorFlow Serving request of strings
as the model does (`run_export_test`).

The models are trained once per module and shared by the three tests."""

import functools

import numpy as np
import pytest
from task_models import tiny_encoder

from keras_bert import (
    BertClassifier,
    BertFeatureExtractor,
    BertPreprocessor,
    BertSentenceEncoder,
    BertSpanExtractor,
    BertTokenClassifier,
)
from keras_bert.assets import VOCAB_FILE
from keras_bert.export import export_saved_model

from harness import (
    assert_reloaded_as_saved,
    fresh_process_results,
    run_export_test,
    run_task_test,
)

TEXTS = [
    "a gorgeous, witty movie",
    "dull and far too long",
    "Emma lives in Highbury",
    "the quick brown fox jumps over the lazy dog",
    "a fine film",
    "not again",
    "where does Emma live?",
    "Harriet walks to London",
]
PAIRS = list(reversed(TEXTS))
NAMES = ["rotten", "fresh"]
TOPICS = ["sports", "politics", "tech"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# One tag a word: the names and places of TEXTS.
PEOPLE, PLACES = {"Emma", "Harriet"}, {"Highbury", "London"}
WORD_TAGS = [
    ["B-PER" if w in PEOPLE else "B-LOC" if w in PLACES else "O" for w in text.split()]
    for text in TEXTS
]
CONTEXT = "Emma Woodhouse lives in Highbury, a village sixteen miles from London."
QUESTIONS = {
    "Who lives in Highbury?": "Emma Woodhouse",
    "Where does Emma live?": "Highbury",
    "How far is Highbury from London?": "sixteen miles",
    "What is Highbury?": "a village",
}
SPAN_X = {"question": list(QUESTIONS), "context": [CONTEXT] * len(QUESTIONS)}
SPAN_Y = {
    "text": list(QUESTIONS.values()),
    "answer_start": [CONTEXT.index(answer) for answer in QUESTIONS.values()],
}
SQUAD_OPTIONS = {"doc_stride": 16, "max_query_length": 16}


def preprocessor(seq_length):
    return BertPreprocessor(VOCAB_FILE, seq_length=seq_length)


def classifier_init(seed, num_classes, seq_length=16, **kwargs):
    """A BertClassifier's arguments: no dropout (the loss must go down)."""
    return dict(
        encoder=tiny_encoder(seed),
        num_classes=num_classes,
        dropout=0.0,
        preprocessor=preprocessor(seq_length),
        **kwargs,
    )


def classify_answers(keys, x=TEXTS):
    """A classifier's served outputs `keys`, and `model.classify(x)`'s, alike."""
    return (
        lambda model: {key: model.classify(x)[key] for key in keys},
        lambda served: {key: served[key] for key in keys},
    )


def tag_answers():
    def served_tags(served):
        return [
            [tag.decode() for tag in row[: int(n)]]
            for row, n in zip(served["tags"], served["num_tokens"])
        ]

    return (lambda model: [answer["tags"] for answer in model.tag(TEXTS)], served_tags)


def span_answers():
    def model_answers(model):
        answers = model.predict_answers(SPAN_X, **SQUAD_OPTIONS)
        return {"answer": [a["answer"] for a in answers], "start": [a["start"] for a in answers]}

    return (
        model_answers,
        lambda served: {"answer": list(served["answer"]), "start": list(served["start"])},
    )


# name -> the harness's arguments: the class, its constructor's arguments (a
# function: each build makes a fresh encoder), what `fit` takes, what
# `predict` takes (JSON-able, as the fresh process reads it), the predict
# shapes; the export's request and its two answers (None: no export).
TASKS = {
    "classifier": dict(
        cls=BertClassifier,
        init=lambda: classifier_init(0, 2, label_names=NAMES),
        train=(TEXTS, NAMES * 4),
        predict=TEXTS,
        shape=(8, 2),
        export=({"text": TEXTS, "text_pair": []}, *classify_answers(["label", "probabilities"])),
    ),
    "regressor": dict(
        cls=BertClassifier,
        init=lambda: classifier_init(2, 1, seq_length=24),
        train=({"text": TEXTS, "text_pair": PAIRS}, np.linspace(0, 5, 8).astype("float32")),
        predict={"pair": [TEXTS, PAIRS]},
        shape=(8, 1),
        export=({"text": TEXTS, "text_pair": PAIRS}, *classify_answers(["score"], (TEXTS, PAIRS))),
    ),
    "multi_label": dict(
        cls=BertClassifier,
        init=lambda: classifier_init(1, 3, label_names=TOPICS, multi_label=True),
        train=(TEXTS, [["sports"], ["politics"], [], ["tech", "sports"]] * 2),
        predict=TEXTS,
        shape=(8, 3),
        export=({"text": TEXTS, "text_pair": []}, *classify_answers(["probabilities"])),
    ),
    "tagger": dict(
        cls=BertTokenClassifier,
        init=lambda: dict(encoder=tiny_encoder(3), label_names=TAGS, preprocessor=preprocessor(16)),
        train=(TEXTS, WORD_TAGS),
        predict=TEXTS,
        shape=(8, 16, 5),
        export=({"text": TEXTS}, *tag_answers()),
    ),
    "span_extractor": dict(
        cls=BertSpanExtractor,
        init=lambda: dict(
            encoder=tiny_encoder(4), max_query_length=16, preprocessor=preprocessor(48)
        ),
        train=(SPAN_X, SPAN_Y),
        predict=SPAN_X,
        shape=None,  # windows: as many as the contexts need
        export=({"question": SPAN_X["question"], "context": SPAN_X["context"]}, *span_answers()),
    ),
    "sentence_encoder": dict(
        cls=BertSentenceEncoder,
        init=lambda: dict(
            encoder=tiny_encoder(7),
            pooling=["max", "mean"],
            normalize=True,
            lowercase_text=True,
            dense=[{"units": 8, "activation": "tanh", "use_bias": True}],
            preprocessor=preprocessor(16),
        ),
        train=((TEXTS, PAIRS),),  # (anchor, positive) rows: in-batch negatives, no targets
        predict=TEXTS,
        shape=(8, 8),
        export=(
            {"text": TEXTS},
            lambda model: model.predict(TEXTS, verbose=0),
            lambda served: served["embedding"],
        ),
    ),
    # Frozen features, nothing to fit; no SavedModel (`export_saved_model`
    # refuses it, which the export test checks).
    "feature_extractor": dict(
        cls=BertFeatureExtractor,
        # Two layers: the top layers are concatenated in their order.
        init=lambda: dict(
            encoder=tiny_encoder(5, num_hidden_layers=2),
            num_top_layers=2,
            preprocessor=preprocessor(16),
        ),
        train=None,
        predict=TEXTS,
        shape={"sentence_embedding": (8, 32), "token_features": (8, 16, 64)},
        export=None,
    ),
}


@functools.lru_cache(maxsize=None)
def trained(name):
    """The task model `name` after `run_task_test` (fitted where it trains)."""
    task = TASKS[name]
    return run_task_test(
        task["cls"],
        task["init"](),
        train_data=task["train"],
        predict_data=_inputs(task["predict"]),
        expected_output_shape=task["shape"],
        run_training_test=task["train"] is not None,
    )


def _inputs(spec):
    return tuple(spec["pair"]) if isinstance(spec, dict) and set(spec) == {"pair"} else spec


@pytest.mark.parametrize("name", TASKS)
def test_a_task_model_fits_and_predicts_raw_text_and_round_trips_its_config(name):
    trained(name)  # run_task_test asserts; the model is kept for the tests below


def saving_only_models():
    """Variants saved and reloaded besides the trained tasks: a softmax head,
    and a classifier of pairs with LoRA adapters (not merged)."""
    lora = BertClassifier(
        tiny_encoder(1), 2, label_names=["rotten", "fresh"], preprocessor=preprocessor(32)
    )
    lora.enable_lora(4)
    softmax = BertClassifier(
        tiny_encoder(0), 2, activation="softmax", preprocessor=preprocessor(32)
    )
    return {
        "classifier_softmax": (softmax, TEXTS),
        "classifier_lora_pairs": (lora, {"pair": [TEXTS, PAIRS]}),
    }


SAVED = (*TASKS, "classifier_softmax", "classifier_lora_pairs")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    models = {name: (trained(name), TASKS[name]["predict"]) for name in TASKS}
    return fresh_process_results(
        {**models, **saving_only_models()}, tmp_path_factory.mktemp("fresh_process")
    )


@pytest.mark.parametrize("name", SAVED)
def test_a_saved_task_model_loads_in_a_fresh_process(fresh, name):
    assert_reloaded_as_saved(*fresh[name])


def test_a_reloaded_multi_label_classifier_compiles_as_one(fresh):
    """Its config, not the class, decides the defaults: a sigmoid per label."""
    assert fresh["multi_label"][1]["compiled"] == {
        "loss": "BinaryCrossentropy",
        "metrics": ["binary_accuracy", "f1_micro"],
    }


# Exporting takes seconds (tracing three signatures): the default suite
# exports the classifier (and checks the refusal), the slow suite the rest,
# as tests/export does.
FAST_EXPORTS = ("classifier", "feature_extractor")


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=() if name in FAST_EXPORTS else pytest.mark.slow) for name in TASKS],
)
def test_the_export_answers_a_request_of_strings_as_the_model_does(name, tmp_path):
    model = trained(name)
    if TASKS[name]["export"] is None:
        with pytest.raises(ValueError, match=f"cannot export a {type(model).__name__}"):
            export_saved_model(model, str(tmp_path / name / "1"))
        return
    request, model_answers, served_answers = TASKS[name]["export"]
    options = SQUAD_OPTIONS if name == "span_extractor" else {}
    run_export_test(
        model,
        str(tmp_path / name / "1"),
        request,
        model_answers(model),
        served_answers,
        **options,
    )
