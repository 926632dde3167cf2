"""Our metrics against the official / reference implementations on the same predictions:
sklearn (accuracy, F1, MCC), scipy (Pearson, Spearman), seqeval (entity F1) and the
official SQuAD v1.1 / v2.0 scripts shipped in tf-models-official."""

import json
import os
import random

import numpy as np
import pytest
import scipy.stats
import seqeval.metrics
import sklearn.metrics
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from keras_bert.tasks import metrics


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=200)
    predictions = np.where(rng.random(200) < 0.7, labels, 1 - labels)
    assert metrics.accuracy(labels, predictions) == pytest.approx(
        sklearn.metrics.accuracy_score(labels, predictions))
    assert metrics.f1(labels, predictions) == pytest.approx(
        sklearn.metrics.f1_score(labels, predictions))
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, predictions))
    three = rng.integers(0, 3, size=200)
    guess = np.where(rng.random(200) < 0.5, three, rng.integers(0, 3, size=200))
    assert metrics.matthews_corrcoef(three, guess) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(three, guess))


def test_degenerate_classification_metrics_match_sklearn():
    labels, constant = np.array([0, 1, 1, 0]), np.array([1, 1, 1, 1])
    assert metrics.matthews_corrcoef(labels, constant) == sklearn.metrics.matthews_corrcoef(
        labels, constant)
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
        scipy.stats.pearsonr(labels, predictions)[0], abs=1e-12)
    assert metrics.spearman(labels, predictions) == pytest.approx(
        scipy.stats.spearmanr(labels, predictions)[0], abs=1e-12)


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
    predicted = [[t if rng.random() < 0.7 else _random_tags(rng, 1)[0] for t in sentence]
                 for sentence in gold]
    ours = metrics.entity_scores(gold, predicted)
    assert ours["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted))
    assert ours["precision"] == pytest.approx(seqeval.metrics.precision_score(gold, predicted))
    assert ours["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, predicted))


def test_entity_f1_matches_seqeval_on_iobes_and_real_wnut_tags(datasets_dir):
    gold = [["S-PER", "O", "B-LOC", "E-LOC", "I-LOC"], ["B-ORG", "I-ORG", "E-ORG", "S-ORG"]]
    predicted = [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC"], ["B-ORG", "E-ORG", "S-ORG", "S-ORG"]]
    assert metrics.entity_scores(gold, predicted)["f1"] == pytest.approx(
        seqeval.metrics.f1_score(gold, predicted))
    from keras_bert.tasks.tagging import read_conll
    dev = read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll"))
    rng = random.Random(0)
    shuffled = [[rng.choice(tags) if rng.random() < 0.3 else t for t in tags]
                for tags in dev.tags]
    assert metrics.entity_scores(dev.tags, shuffled)["f1"] == pytest.approx(
        seqeval.metrics.f1_score(dev.tags, shuffled))


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
                    predictions[qa["id"]] = " ".join(words[:max(1, len(words) // 2)]) + " the"
                elif choice < 0.85:
                    start = rng.randrange(0, max(1, len(context) - 30))
                    predictions[qa["id"]] = context[start:start + rng.randrange(1, 30)]
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
    for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                "NoAns_exact", "NoAns_f1", "NoAns_total"):
        assert ours[key] == pytest.approx(official[key]), key
    for ours_key, official_key in (("best_exact", "final_exact"),
                                   ("best_exact_thresh", "final_exact_thresh"),
                                   ("best_f1", "final_f1"), ("best_f1_thresh", "final_f1_thresh")):
        assert ours[ours_key] == pytest.approx(official[official_key]), ours_key
    # Without no-answer scores, as the official script's default.
    plain = squad_evaluate_v2_0.evaluate(dataset, predictions)
    assert metrics.squad_v2_scores(dataset, predictions)["f1"] == pytest.approx(plain["f1"])
