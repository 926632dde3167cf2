"""SQuAD features and post-processing against Model Garden's `squad_lib` (an
independent copy of run_squad.py with the original Python tokenizer), on the
shipped real SQuAD-format samples and tiny synthetic v2.0 data."""

import collections
import copy
import json
import os

import numpy as np
import pytest
import tensorflow_datasets as tfds
from official.nlp.data import squad_lib
from official.nlp.tools import tokenization

from keras_bert import BertTokenizer
from keras_bert.datasets import squad

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


def _samples(datasets_dir):
    data = []
    for name in ("squad_v1_sample.json", "quoref_sample.json"):
        with open(os.path.join(datasets_dir, "squad_samples", name)) as f:
            data += json.load(f)["data"]
    # Training reads the first answer; squad_lib insists on exactly one.
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    return data


def _synthetic_v2():
    context = (
        "The quick brown fox jumped over the lazy dog near the river bank. "
        "Foxes are small omnivorous mammals, and dogs are domesticated wolves. "
    ) * 4
    qas = [
        {
            "id": "q1",
            "question": "What jumped over the dog?",
            "is_impossible": False,
            "answers": [{"text": "quick brown fox", "answer_start": 4}],
        },
        {"id": "q2", "question": "What colour is the cat?", "is_impossible": True, "answers": []},
        {
            "id": "q3",
            "question": "What are dogs?",
            "is_impossible": False,
            "answers": [
                {"text": "domesticated wolves", "answer_start": context.rindex("domesticated")}
            ],
        },
        {"id": "q4", "question": "Who owns the river?", "is_impossible": True, "answers": []},
    ]
    return [{"title": "synthetic", "paragraphs": [{"context": context, "qas": qas}]}]


@pytest.fixture(scope="module")
def tokenizer(real_vocab_file):
    return BertTokenizer(real_vocab_file)


@pytest.fixture(scope="module")
def reference_tokenizer(real_vocab_file):
    return tokenization.FullTokenizer(real_vocab_file, do_lower_case=True)


def _reference_features(data, tmp_path, tokenizer, is_training, v2, **kwargs):
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"data": data}))
    examples = squad_lib.read_squad_examples(str(path), is_training, v2)
    features = []

    def collect(feature, is_padding=False):
        if not is_padding:
            features.append(copy.deepcopy(feature))

    squad_lib.convert_examples_to_features(
        examples, tokenizer, is_training=is_training, output_fn=collect, batch_size=1, **kwargs
    )
    return examples, features


SETTINGS = dict(max_seq_length=96, doc_stride=32, max_query_length=12)


@pytest.mark.parametrize("is_training", [True, False])
@pytest.mark.parametrize("which", ["samples", "synthetic_v2"])
def test_features_match_squad_lib(
    datasets_dir, tokenizer, reference_tokenizer, tmp_path, is_training, which
):
    v2 = which == "synthetic_v2"
    data = _samples(datasets_dir) if not v2 else _synthetic_v2()
    ref_examples, ref_features = _reference_features(
        data, tmp_path, reference_tokenizer, is_training, v2, **SETTINGS
    )
    examples = squad.read_squad_examples(data, is_training, version_2_with_negative=v2)
    assert [e.qas_id for e in examples] == [e.qas_id for e in ref_examples]
    assert [e.doc_tokens for e in examples] == [e.doc_tokens for e in ref_examples]
    if is_training:
        assert [(e.start_position, e.end_position, e.is_impossible) for e in examples] == [
            (e.start_position, e.end_position, e.is_impossible) for e in ref_examples
        ]
    features = squad.convert_examples_to_features(
        examples, tokenizer, is_training=is_training, **SETTINGS
    )
    assert len(features) == len(ref_features) > len(examples)  # several windows each
    for ours, ref in zip(features, ref_features):
        assert (ours.example_index, ours.doc_span_index) == (ref.example_index, ref.doc_span_index)
        np.testing.assert_array_equal(ours.input_ids, ref.input_ids)
        np.testing.assert_array_equal(ours.input_mask, ref.input_mask)
        np.testing.assert_array_equal(ours.segment_ids, ref.segment_ids)
        assert ours.token_to_orig_map == ref.token_to_orig_map
        assert ours.token_is_max_context == ref.token_is_max_context
        assert ours.num_tokens == len(ref.tokens)
        assert (ours.start_position, ours.end_position) == (ref.start_position, ref.end_position)
    if is_training:
        assert any(f.start_position > 0 for f in features)


def test_answer_pieces_map_back_to_the_answer_characters(datasets_dir, tokenizer):
    data = _samples(datasets_dir)
    examples = squad.read_squad_examples(data, is_training=True)
    features = squad.convert_examples_to_features(examples, tokenizer, is_training=True, **SETTINGS)
    checked = 0
    for feature in features:
        if feature.start_position == 0:
            continue
        example = examples[feature.example_index]
        first = feature.token_char_spans[feature.start_position][0]
        last = feature.token_char_spans[feature.end_position][1]
        assert example.context[first:last] == example.orig_answer_text
        checked += 1
    assert checked >= len(examples)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("which", ["samples", "synthetic_v2"])
def test_postprocess_matches_squad_lib(
    datasets_dir, tokenizer, reference_tokenizer, tmp_path, seed, which
):
    v2 = which == "synthetic_v2"
    data = _samples(datasets_dir) if not v2 else _synthetic_v2()
    ref_examples, ref_features = _reference_features(
        data, tmp_path, reference_tokenizer, False, v2, **SETTINGS
    )
    examples = squad.read_squad_examples(data, False, version_2_with_negative=v2)
    features = squad.convert_examples_to_features(examples, tokenizer, **SETTINGS)
    rng = np.random.default_rng(seed)
    start = rng.normal(size=(len(features), SETTINGS["max_seq_length"])).astype(np.float32)
    end = rng.normal(size=start.shape).astype(np.float32)
    # Question, [SEP] and padding logits below the rest, as a fine-tuned model's
    # are: squad_lib ranks them into its n-best, we rank only [CLS] and the
    # context (test_short_context_is_answered_where_run_squad_finds_nothing).
    for i, feature in enumerate(features):
        outside = np.setdiff1d(np.arange(start.shape[1]), [0, *feature.token_to_orig_map])
        start[i, outside] -= 20.0
        end[i, outside] -= 20.0
    if v2:
        # Even questions get a dominant null score, odd ones a hopeless one.
        even = np.array([f.example_index % 2 == 0 for f in features])
        start[:, 0] += np.where(even, 10.0, -10.0).astype(np.float32)
    results = [
        RawResult(f.unique_id, start[i].tolist(), end[i].tolist())
        for i, f in enumerate(ref_features)
    ]
    ref_predictions, ref_nbest, ref_diffs = squad_lib.postprocess_output(
        ref_examples,
        ref_features,
        results,
        n_best_size=20,
        max_answer_length=30,
        do_lower_case=True,
        version_2_with_negative=v2,
        null_score_diff_threshold=0.0,
    )
    predictions, diffs, nbest = squad.postprocess(
        examples,
        features,
        start.tolist(),
        end.tolist(),
        n_best_size=20,
        max_answer_length=30,
        version_2_with_negative=v2,
    )
    assert predictions == dict(ref_predictions)
    assert diffs.keys() == ref_diffs.keys()
    for qid in diffs:
        assert diffs[qid] == pytest.approx(ref_diffs[qid], abs=1e-5)
    for qid in nbest:
        assert [n["text"] for n in nbest[qid]] == [n["text"] for n in ref_nbest[qid]]
        np.testing.assert_allclose(
            [n["probability"] for n in nbest[qid]],
            [n["probability"] for n in ref_nbest[qid]],
            rtol=1e-5,
        )
    if v2:
        assert "" in predictions.values() and any(predictions.values())


def test_short_context_is_answered_where_run_squad_finds_nothing(
    tokenizer, reference_tokenizer, tmp_path
):
    # A lightly trained model scores padding as high as the context;
    # with 80 of 96 positions padding, squad_lib's n-best over all positions
    # holds no context piece and it answers "empty". Ours ranks [CLS] and the context.
    data = [
        {
            "title": "t",
            "paragraphs": [
                {
                    "context": "Ann met Bob in Paris last spring.",
                    "qas": [
                        {
                            "id": "q",
                            "question": "Where?",
                            "answers": [{"text": "Paris", "answer_start": 15}],
                        }
                    ],
                }
            ],
        }
    ]
    ref_examples, ref_features = _reference_features(
        data, tmp_path, reference_tokenizer, False, False, **SETTINGS
    )
    examples = squad.read_squad_examples(data, False)
    features = squad.convert_examples_to_features(examples, tokenizer, **SETTINGS)
    start = np.where(features[0].input_mask, 0.0, 5.0)[None].astype(np.float32)
    end = start.copy()
    paris = next(i for i, (a, b) in features[0].token_char_spans.items() if a == 15)
    start[0, paris] = end[0, paris] = 3.0
    results = [RawResult(ref_features[0].unique_id, start[0].tolist(), end[0].tolist())]
    ref_predictions, _, _ = squad_lib.postprocess_output(
        ref_examples,
        ref_features,
        results,
        n_best_size=20,
        max_answer_length=30,
        do_lower_case=True,
        version_2_with_negative=False,
    )
    predictions, _, _ = squad.postprocess(examples, features, start, end)
    assert dict(ref_predictions) == {"q": "empty"}
    assert predictions == {"q": "Paris"}


def test_null_threshold_decides_no_answer(tokenizer):
    examples = squad.read_squad_examples(_synthetic_v2(), False, version_2_with_negative=True)
    features = squad.convert_examples_to_features(examples, tokenizer, **SETTINGS)
    start = np.zeros((len(features), SETTINGS["max_seq_length"]), np.float32)
    end = np.zeros_like(start)
    start[:, 0] = end[:, 0] = 2.0  # null score 4
    f = next(i for i, x in enumerate(features) if x.token_is_max_context.get(20))
    start[f, 20], end[f, 21] = 3.0, 3.0  # best span scores 6
    predictions, diffs, _ = squad.postprocess(
        examples, features, start, end, version_2_with_negative=True
    )
    qid = examples[features[f].example_index].qas_id
    assert diffs[qid] == pytest.approx(-2.0)
    assert predictions[qid] != ""
    predictions, _, _ = squad.postprocess(
        examples, features, start, end, version_2_with_negative=True, null_score_diff_threshold=-3.0
    )
    assert predictions[qid] == ""


def test_tfds_squad_reader_with_mock_data(tokenizer):
    for name in ("squad/v1.1", "squad/v2.0"):
        with tfds.testing.mock_data(num_examples=4):
            data = squad.read_squad_tfds(name, "validation")
        qas = [qa for article in data for p in article["paragraphs"] for qa in p["qas"]]
        assert len(qas) == 4
        assert all(isinstance(qa["question"], str) for qa in qas)
        assert ("is_impossible" in qas[0]) == (name == "squad/v2.0")
        examples = squad.read_squad_examples(data, is_training=False)
        features = squad.convert_examples_to_features(examples, tokenizer, **SETTINGS)
        assert {f.example_index for f in features} == set(range(4))


@pytest.mark.parametrize(
    "data, place",
    [
        (
            {"data": [{"paragraphs": [{"context": "abc"}]}]},
            r"data\[0\].paragraphs\[0\].qas must be a list",
        ),
        (
            {"data": [{"paragraphs": [{"context": "abc", "qas": [{"id": "1"}]}]}]},
            r"data\[0\].paragraphs\[0\].qas\[0\].question must be text",
        ),
        (
            {
                "data": [
                    {
                        "paragraphs": [
                            {
                                "context": "abc",
                                "qas": [
                                    {
                                        "id": "1",
                                        "question": "q?",
                                        "answers": [{"text": "a", "answer_start": "0"}],
                                    }
                                ],
                            }
                        ]
                    }
                ]
            },
            r"data\[0\].paragraphs\[0\].qas\[0\].answers\[0\].answer_start must be a character "
            "offset, got str",
        ),
        ({"data": {"title": "x"}}, "data must be a list of articles"),
        ([1, 2], "no top-level `data` field"),
    ],
)
def test_a_squad_file_of_the_wrong_shape_names_the_field(tmp_path, data, place):
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"train.json: {place}"):
        squad.load_squad_json(str(path))
