"""Our metrics against the official / reference implementations on the same predictions:
sklearn (accuracy, F1, MCC), scipy (Pearson, Spearman), seqeval (entity F1) and the
official SQuAD v1.1 / v2.0 scripts shipped in tf-models-official."""

import itertools
import json
import os
import random
import warnings

import numpy as np
import pytest
import scipy.stats
import seqeval.metrics
import seqeval.scheme
import sklearn.metrics
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0
from seqeval.metrics.sequence_labeling import get_entities as seqeval_get_entities

from keras_bert.datasets import metrics


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=200)
    predictions = np.where(rng.random(200) < 0.7, labels, 1 - labels)
    assert metrics.accuracy(labels, predictions) == pytest.approx(
        sklearn.metrics.accuracy_score(labels, predictions)
    )
    assert metrics.f1(labels, predictions) == pytest.approx(
        sklearn.metrics.f1_score(labels, predictions)
    )
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, predictions)
    )
    three = rng.integers(0, 3, size=200)
    guess = np.where(rng.random(200) < 0.5, three, rng.integers(0, 3, size=200))
    assert metrics.matthews_corrcoef(three, guess) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(three, guess)
    )


def test_degenerate_classification_metrics_match_sklearn():
    labels, constant = np.array([0, 1, 1, 0]), np.array([1, 1, 1, 1])
    assert metrics.matthews_corrcoef(labels, constant) == sklearn.metrics.matthews_corrcoef(
        labels, constant
    )
    zeros = np.zeros(4, int)
    assert metrics.f1(zeros, zeros) == sklearn.metrics.f1_score(zeros, zeros, zero_division=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_correlations_match_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    # STS-B gold scores are multiples of 0.2 in [0, 5]: many ties.
    labels = np.round(rng.uniform(0, 5, size=300) * 5) / 5
    predictions = labels + rng.normal(0, 1.0, size=300)
    predictions[:50] = np.round(predictions[:50])
    assert metrics.pearson(labels, predictions) == pytest.approx(
        scipy.stats.pearsonr(labels, predictions)[0], abs=1e-12
    )
    assert metrics.spearman(labels, predictions) == pytest.approx(
        scipy.stats.spearmanr(labels, predictions)[0], abs=1e-12
    )


def _random_tags(rng, length, types=("PER", "LOC", "ORG")):
    tags = []
    for _ in range(length):
        r = rng.random()
        if r < 0.5:
            tags.append("O")
        else:
            prefix = "B" if r < 0.75 else "I"  # I- without a B- happens too
            tags.append(f"{prefix}-{types[rng.integers(len(types))]}")
    return tags


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_entity_f1_matches_seqeval(seed):
    rng = np.random.default_rng(seed)
    gold = [_random_tags(rng, int(rng.integers(1, 15))) for _ in range(60)]
    predicted = [
        [t if rng.random() < 0.7 else _random_tags(rng, 1)[0] for t in sentence]
        for sentence in gold
    ]
    ours = metrics.entity_scores(gold, predicted)
    assert ours["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted))
    assert ours["precision"] == pytest.approx(seqeval.metrics.precision_score(gold, predicted))
    assert ours["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, predicted))


def test_entity_f1_matches_seqeval_on_iobes_and_real_wnut_tags(datasets_dir):
    gold = [["S-PER", "O", "B-LOC", "E-LOC", "I-LOC"], ["B-ORG", "I-ORG", "E-ORG", "S-ORG"]]
    predicted = [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC"], ["B-ORG", "E-ORG", "S-ORG", "S-ORG"]]
    assert metrics.entity_scores(gold, predicted)["f1"] == pytest.approx(
        seqeval.metrics.f1_score(gold, predicted)
    )
    from keras_bert.datasets.tagging import read_conll

    dev = read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll"))
    rng = random.Random(0)
    shuffled = [[rng.choice(tags) if rng.random() < 0.3 else t for t in tags] for tags in dev.tags]
    assert metrics.entity_scores(dev.tags, shuffled)["f1"] == pytest.approx(
        seqeval.metrics.f1_score(dev.tags, shuffled)
    )


# === Entity F1 in every scheme and mode, against seqeval ===

# Each scheme's prefixes besides O, written out here rather than read from ours.
SCHEME_LETTERS = {
    "IOB1": "IB",
    "IOB2": "IB",
    "IOE1": "IE",
    "IOE2": "IE",
    "IOBES": "IBES",
    "BILOU": "BILU",
}
SEQEVAL_SCHEMES = {name: getattr(seqeval.scheme, name) for name in SCHEME_LETTERS}
# seqeval's lenient rules know B/I/E/S only; with scheme="BILOU" ours read BILOU
# as that IOBES spelling (without a scheme, as seqeval reads L and U).
AS_IOBES = {"L": "E", "U": "S"}


def _iobes_spelling(sentence):
    return [AS_IOBES.get(tag[:1], tag[:1]) + tag[1:] for tag in sentence]


def _seqeval_args(scheme, mode, true, pred):
    """The sequences and keyword arguments that make seqeval read them as we do."""
    if mode == "strict":
        return true, pred, {"mode": "strict", "scheme": SEQEVAL_SCHEMES[scheme]}
    return true, pred, {}  # the lenient call names no scheme: seqeval's own reading


def _seqeval_entities(tags, scheme, mode):
    """seqeval's entities of one sentence as (type, first, last); its type "_" is our ""."""
    if mode == "strict":
        found = [
            (e.tag, e.start, e.end - 1)
            for e in seqeval.scheme.Tokens(tags, SEQEVAL_SCHEMES[scheme]).entities
        ]
    else:
        found = seqeval_get_entities(_iobes_spelling(tags))
    return {("" if kind == "_" else kind, first, last) for kind, first, last in found}


def _alphabet(scheme, types=("PER", "ORG")):
    """O, each prefix with each type, and each bare prefix (seqeval's empty type)."""
    letters = SCHEME_LETTERS[scheme]
    return ["O"] + [f"{p}-{t}" for p in letters for t in types] + list(letters)


def test_without_a_scheme_l_and_u_tags_are_read_as_seqeval_reads_them():
    """seqeval's default mode knows B/I/E/S only: an L- or U- tag continues the
    entity before it and starts one only where the type changes. Every
    sequence of up to 4 tags over B/I/E/S/L/U/O of two types, and random ones."""
    alphabet = ["O"] + [f"{p}-{t}" for p in "BIESLU" for t in ("PER", "LOC")]
    sequences = [list(s) for n in (1, 2, 3, 4) for s in itertools.product(alphabet, repeat=n)]
    rng = np.random.default_rng(7)
    sequences += [[alphabet[i] for i in rng.integers(13, size=12)] for _ in range(3000)]
    for tags in sequences:
        assert metrics.get_entities(tags) == set(seqeval_get_entities(tags)), tags
    # The difference the BILOU scheme makes: U-PER U-PER is one entity without it.
    assert metrics.get_entities(["U-PER", "U-PER"]) == {("PER", 0, 1)}
    assert metrics.get_entities(["U-PER", "U-PER"], "BILOU") == {("PER", 0, 0), ("PER", 1, 1)}
    gold = [[alphabet[i] for i in rng.integers(13, size=int(n))] for n in rng.integers(1, 20, 300)]
    pred = [[t if rng.random() < 0.7 else alphabet[rng.integers(13)] for t in row] for row in gold]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = seqeval.metrics.f1_score(gold, pred)
    assert metrics.entity_scores(gold, pred)["f1"] == pytest.approx(expected)


# seqeval's own cases (its test_scheme / test_metrics / test_v1), rewritten:
# (gold, predicted) corpora; expected figures come from seqeval itself.
SEQEVAL_CORPORA = [
    ([["B-ORG", "I-ORG"]], [["I-ORG", "I-ORG"]]),  # conlleval 1, strict IOB2 0
    ([["B-A", "B-B", "O", "B-A"]], [["O", "B-B", "B-C", "B-A"]]),
    (
        [["O", "O", "O", "B-MISC", "I-MISC", "O", "B-ORG"], ["B-PER", "I-PER", "O", "B-PER"]],
        [["O", "O", "B-MISC", "I-MISC", "I-MISC", "O", "O"], ["B-PER", "I-PER", "O", "B-MISC"]],
    ),
    (
        [["O", "O", "O", "B", "I", "I", "O"], ["B", "I", "O"]],  # bare prefixes: the empty type
        [["O", "O", "B", "I", "I", "I", "O"], ["B", "O", "O"]],
    ),
    ([["B-PER"]], [["B-ORG"]]),
    ([["B-PER", "I-PER"]], [["B-PER", "B-PER"]]),
    ([[]], [[]]),
    ([["O"]], [["O"]]),
]


@pytest.mark.parametrize("scheme", list(SCHEME_LETTERS))
def test_entities_of_every_short_sequence_match_seqeval_in_both_modes(scheme):
    """Every sequence of up to 3 tags over the scheme's alphabet (seqeval's
    test_scheme tables are its pairs), strict and lenient."""
    alphabet = _alphabet(scheme)
    sequences = [[]] + [list(s) for n in (1, 2, 3) for s in itertools.product(alphabet, repeat=n)]
    for mode in (None, "strict"):
        for tags in sequences:
            assert metrics.get_entities(tags, scheme, mode) == _seqeval_entities(
                tags, scheme, mode
            ), (scheme, mode, tags)


@pytest.mark.parametrize("true, pred", SEQEVAL_CORPORA)
@pytest.mark.parametrize("mode", [None, "strict"])
def test_seqeval_cases_score_as_seqeval(true, pred, mode):
    scheme = "IOB2" if mode == "strict" else None
    _assert_scores_match_seqeval(true, pred, scheme or "IOB2", mode)


def _assert_scores_match_seqeval(true, pred, scheme, mode):
    # Lenient: the plain call, as existing callers make it.
    ours = (
        metrics.entity_scores(true, pred)
        if mode is None
        else metrics.entity_scores(true, pred, scheme=scheme, mode=mode)
    )
    seq_true, seq_pred, kwargs = _seqeval_args(scheme, mode, true, pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns where a figure is undefined (0)
        assert ours["f1"] == pytest.approx(seqeval.metrics.f1_score(seq_true, seq_pred, **kwargs))
        assert ours["precision"] == pytest.approx(
            seqeval.metrics.precision_score(seq_true, seq_pred, **kwargs)
        )
        assert ours["recall"] == pytest.approx(
            seqeval.metrics.recall_score(seq_true, seq_pred, **kwargs)
        )
        if not any(true) and not any(pred):
            return  # seqeval's report has no rows to compare
        expected = seqeval.metrics.classification_report(
            seq_true, seq_pred, output_dict=True, **kwargs
        )
    report = metrics.entity_report(true, pred, scheme=scheme if mode else None, mode=mode)
    expected = {
        ("" if kind == "_" else kind): row
        for kind, row in expected.items()
        if not kind.endswith(" avg")
    }
    assert sorted(report) == sorted(expected)
    for kind, row in expected.items():
        assert report[kind]["precision"] == pytest.approx(row["precision"]), kind
        assert report[kind]["recall"] == pytest.approx(row["recall"]), kind
        assert report[kind]["f1"] == pytest.approx(row["f1-score"]), kind
        assert report[kind]["support"] == row["support"], kind


def _random_scheme_tags(rng, scheme, length, types=("PER", "LOC", "ORG", "MISC")):
    alphabet = _alphabet(scheme, types) + ["O"] * 6  # mostly O, as real text
    return [alphabet[i] for i in rng.integers(len(alphabet), size=length)]


@pytest.mark.parametrize("scheme", list(SCHEME_LETTERS))
@pytest.mark.parametrize("mode", [None, "strict"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_tags_of_each_scheme_score_as_seqeval(scheme, mode, seed):
    rng = np.random.default_rng(seed)
    true = [_random_scheme_tags(rng, scheme, int(rng.integers(0, 20))) for _ in range(80)]
    # Predictions: gold with some tags replaced, so that many entities match.
    pred = [
        [tag if rng.random() < 0.75 else _random_scheme_tags(rng, scheme, 1)[0] for tag in sentence]
        for sentence in true
    ]
    _assert_scores_match_seqeval(true, pred, scheme, mode)


@pytest.mark.parametrize("scheme", list(SCHEME_LETTERS))
def test_lenient_reading_ignores_the_scheme(scheme):
    """The scheme only checks the tags in lenient mode: conlleval's rules read
    every scheme the same way; BILOU's L and U as E and S, its IOBES spelling."""
    rng = np.random.default_rng(3)
    true = [_random_scheme_tags(rng, scheme, 12) for _ in range(30)]
    pred = [_random_scheme_tags(rng, scheme, 12) for _ in range(30)]
    spelled = [[_iobes_spelling(s) for s in rows] for rows in (true, pred)]
    assert metrics.entity_scores(true, pred, scheme=scheme) == metrics.entity_scores(*spelled)


@pytest.mark.parametrize(
    "tag, scheme",
    [
        ("E-PER", "IOB1"),
        ("S-PER", "IOB1"),
        ("E", "IOB2"),
        ("S-PER", "IOB2"),
        ("B-PER", "IOE1"),
        ("S", "IOE1"),
        ("B-PER", "IOE2"),
        ("S-PER", "IOE2"),
        ("L-PER", "IOBES"),
        ("E-PER", "BILOU"),
    ],
)
def test_a_tag_outside_the_scheme_is_an_error_as_in_seqeval(tag, scheme):
    with pytest.raises(ValueError):
        seqeval.metrics.f1_score([[tag]], [["O"]], mode="strict", scheme=SEQEVAL_SCHEMES[scheme])
    for mode in (None, "strict"):
        with pytest.raises(ValueError, match=f"{tag}.*{scheme}"):
            metrics.entity_scores([[tag]], [["O"]], scheme=scheme, mode=mode)


def test_entity_f1_argument_errors():
    with pytest.raises(ValueError, match="strict mode needs the tagging scheme"):
        metrics.entity_scores([["B-PER"]], [["B-PER"]], mode="strict")
    with pytest.raises(ValueError, match="scheme must be one of"):
        metrics.entity_scores([["B-PER"]], [["B-PER"]], scheme="BIO")
    with pytest.raises(ValueError, match="mode must be"):
        metrics.entity_scores([["B-PER"]], [["B-PER"]], mode="exact")
    with pytest.raises(ValueError, match="'PER' does not follow the IOB2 scheme"):
        metrics.get_entities(["PER"], "IOB2", "strict")  # an IO label has no prefix
    # Different sentence counts or lengths: an error, as seqeval's.
    for true, pred in (([["O"]], [[]]), ([["O"]], [["O"], ["O"]])):
        with pytest.raises(ValueError):
            seqeval.metrics.f1_score(true, pred)
        with pytest.raises(ValueError):
            metrics.entity_scores(true, pred)


def _squad_data(datasets_dir):
    with open(os.path.join(datasets_dir, "squad_samples", "squad_v1_sample.json")) as f:
        v1 = json.load(f)["data"]
    with open(os.path.join(datasets_dir, "squad_samples", "quoref_sample.json")) as f:
        v1 += json.load(f)["data"]
    return v1


def _candidate_answers(dataset, rng):
    """Per question: the gold answer, a sub-span, a wrong span or the empty answer."""
    predictions = {}
    for article in dataset:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                choice = rng.random()
                gold = qa["answers"][0]["text"] if qa["answers"] else ""
                if choice < 0.3:
                    predictions[qa["id"]] = gold
                elif choice < 0.6 and gold:
                    words = gold.split()
                    predictions[qa["id"]] = " ".join(words[: max(1, len(words) // 2)]) + " the"
                elif choice < 0.85:
                    start = rng.randrange(0, max(1, len(context) - 30))
                    predictions[qa["id"]] = context[start : start + rng.randrange(1, 30)]
                else:
                    predictions[qa["id"]] = ""
    return predictions


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_squad_v1_matches_official_script(datasets_dir, seed):
    dataset = _squad_data(datasets_dir)
    predictions = _candidate_answers(dataset, random.Random(seed))
    official = squad_evaluate_v1_1.evaluate(dataset, predictions)
    ours = metrics.squad_v1_scores(dataset, predictions)
    # tf-models' copy returns fractions; the original codalab script percentages.
    assert ours["exact_match"] == pytest.approx(100 * official["exact_match"])
    assert ours["f1"] == pytest.approx(100 * official["final_f1"])


def _with_unanswerable(dataset, rng):
    """A v2.0-style copy: some questions lose their answers (is_impossible)."""
    out = json.loads(json.dumps(dataset))
    for article in out:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["is_impossible"] = rng.random() < 0.4
                if qa["is_impossible"]:
                    qa["plausible_answers"], qa["answers"] = qa["answers"], []
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_squad_v2_matches_official_script(datasets_dir, seed):
    rng = random.Random(seed)
    dataset = _with_unanswerable(_squad_data(datasets_dir), rng)
    predictions = _candidate_answers(dataset, rng)
    na_probs = {qid: round(rng.uniform(-3, 3), 1) for qid in predictions}  # ties on purpose
    official = squad_evaluate_v2_0.evaluate(dataset, predictions, na_probs)
    ours = metrics.squad_v2_scores(dataset, predictions, na_probs)
    for key in (
        "exact",
        "f1",
        "total",
        "HasAns_exact",
        "HasAns_f1",
        "HasAns_total",
        "NoAns_exact",
        "NoAns_f1",
        "NoAns_total",
    ):
        assert ours[key] == pytest.approx(official[key]), key
    for ours_key, official_key in (
        ("best_exact", "final_exact"),
        ("best_exact_thresh", "final_exact_thresh"),
        ("best_f1", "final_f1"),
        ("best_f1_thresh", "final_f1_thresh"),
    ):
        assert ours[ours_key] == pytest.approx(official[official_key]), ours_key
    # Without no-answer scores, as the official script's default.
    plain = squad_evaluate_v2_0.evaluate(dataset, predictions)
    assert metrics.squad_v2_scores(dataset, predictions)["f1"] == pytest.approx(plain["f1"])
