"""Evaluation metrics, computed exactly as the official scripts compute them.

Classification: accuracy, binary F1, Matthews correlation (CoLA); regression:
Pearson and Spearman (STS-B); tagging: entity-level precision / recall / F1 as
seqeval computes them, in its lenient (conlleval's) and strict modes, for the
IOB1, IOB2, IOE1, IOE2, IOBES and BILOU schemes; SQuAD v1.1 exact match / F1 and v2.0
HasAns / NoAns / best-threshold figures with the official normalisation.
Plain NumPy and Python: predictions are small and exactness matters more than speed.
"""

from __future__ import annotations

import collections
import re
import string
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# === Classification and regression ===


def accuracy(labels: ArrayLike, predictions: ArrayLike) -> float:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def f1(labels: ArrayLike, predictions: ArrayLike, positive=1) -> float:
    """Binary F1 of the positive class (MRPC, QQP); 0 when undefined, as sklearn."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    true_positive = np.sum((predictions == positive) & (labels == positive))
    predicted = np.sum(predictions == positive)
    actual = np.sum(labels == positive)
    if predicted + actual == 0:
        return 0.0
    return float(2 * true_positive / (predicted + actual))


def matthews_corrcoef(labels: ArrayLike, predictions: ArrayLike) -> float:
    """Multi-class Matthews correlation (Gorodkin's R_K), as sklearn; 0 when undefined."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.unique(np.concatenate([labels, predictions]))
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for true, pred in zip(labels, predictions):
        confusion[index[true], index[pred]] += 1
    true_counts, pred_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, samples = np.trace(confusion), confusion.sum()
    covariance_yp = correct * samples - np.dot(true_counts, pred_counts)
    covariance_pp = samples**2 - np.dot(pred_counts, pred_counts)
    covariance_yy = samples**2 - np.dot(true_counts, true_counts)
    if covariance_pp * covariance_yy == 0:
        return 0.0
    return float(covariance_yp / np.sqrt(covariance_pp * covariance_yy))


def multi_label_scores(labels: ArrayLike, predictions: ArrayLike) -> dict[str, float]:
    """Multi-label figures of multi-hot rows (N, C) of 0 / 1 (or booleans):
    micro F1 (every text-label decision pooled), macro F1 (the mean of the
    labels' F1s) and subset accuracy (rows right in every label), as
    scikit-learn's `f1_score(average="micro" / "macro")` and
    `accuracy_score`; an F1 without a true or predicted positive is 0, as
    scikit-learn's default."""
    true = np.asarray(labels).astype(bool)
    predicted = np.asarray(predictions).astype(bool)
    true_positive = np.sum(true & predicted, axis=0)  # (C,)
    # 2 TP / (2 TP + FP + FN): the sizes of both sets, per label.
    sizes = np.sum(true, axis=0) + np.sum(predicted, axis=0)  # (C,)
    per_label = np.divide(
        2.0 * true_positive, sizes, out=np.zeros(sizes.shape, np.float64), where=sizes > 0
    )
    total = np.sum(sizes)
    return {
        "f1_micro": float(2.0 * np.sum(true_positive) / total) if total else 0.0,
        "f1_macro": float(np.mean(per_label)) if per_label.size else 0.0,
        "subset_accuracy": float(np.mean(np.all(true == predicted, axis=1))) if true.size else 0.0,
    }


def pearson(labels: ArrayLike, predictions: ArrayLike) -> float:
    x = np.asarray(labels, dtype=np.float64)
    y = np.asarray(predictions, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator else 0.0


def _average_ranks(values):
    """Ranks 1..n with ties given the mean of their ranks (scipy's 'average')."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman(labels: ArrayLike, predictions: ArrayLike) -> float:
    return pearson(_average_ranks(labels), _average_ranks(predictions))


# === Tagging: entity-level F1 (seqeval / conlleval) ===
#
# A tag is read as seqeval reads it: "B-PER" is prefix B, type PER; a bare
# prefix ("B", "I") has the empty type; "O" (and "O-...") is outside. A tag with
# no prefix letter ("PER", IO tagging) is I-PER, as the in-graph tagger reads it
# (`keras_bert.preprocessing.tagging`); seqeval would read "PER" as prefix P,
# type "ER", and "ORG" as outside.
#
# Two modes, seqeval's:
# - lenient (mode=None, the default): conlleval's chunk rules, which read
#   IOB1, IOB2, IOE1, IOE2 and IOBES alike. They know only B/I/E/S: any other
#   prefix letter (BILOU's L and U) continues the entity before it and starts
#   or ends one only where the type changes (U-PER U-PER is one entity), as
#   seqeval's default reads them. With scheme="BILOU", L and U are read as E
#   and S instead (BILOU is IOBES spelled with L and U), where seqeval ignores
#   the scheme.
# - strict (mode="strict", a scheme required): an entity counts only if its
#   tags follow that scheme exactly (seqeval's `mode="strict", scheme=IOB2`).
# With a scheme, a tag whose prefix the scheme lacks is an error in both modes.

SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
MODES = (None, "strict")
_PREFIX_LETTERS = "BIESLUO"
_SCHEME_PREFIXES = {
    "IOB1": "IOB",
    "IOB2": "IOB",
    "IOE1": "IOE",
    "IOE2": "IOE",
    "IOBES": "IOBES",
    "BILOU": "BILOU",
}
# Lenient reading with scheme="BILOU": IOBES spelled with L (last) for E and U (unit) for S.
_LENIENT_PREFIX = {"L": "E", "U": "S"}

# The strict schemes' rules, seqeval's tables. Each rule is three characters:
# the previous tag's prefix, this tag's prefix ("." any prefix), and whether
# their types must match: "=" the same type, "!" a different one, "*" either.
# An entity starts at a tag matching `start` (given the tag before it), grows
# while the next tag matches `inside` (given the last tag taken), and counts
# if the tag after it (or the end of the sentence, an O) matches `end`.
_STRICT_RULES = {
    "IOB1": {"start": "OI* II! BI* IB= BB=", "inside": "BI= II=", "end": "II! IO* IB* BO* BI! BB="},
    "IOB2": {"start": ".B*", "inside": "BI= II=", "end": "IO* II! IB* BO* BI! BB*"},
    "IOE1": {"start": "OI* II! EI* EE=", "inside": "II= IE=", "end": "II! IO* IE! EI= EE="},
    "IOE2": {"start": "OI* OE* EI* EE* II! IE!", "inside": "IE= II=", "end": "E.*"},
    "IOBES": {"start": ".B* .S*", "inside": "BI= BE= II= IE=", "end": "S.* E.*"},
    "BILOU": {"start": ".B* .U*", "inside": "BI= BL= II= IL=", "end": "U.* L.*"},
}


def _split_tag(tag: str | None, scheme: str | None, mode: str | None) -> tuple[str, str]:
    """One tag -> (prefix, entity type) as the given scheme and mode read it
    (see above); ValueError for a tag the scheme does not allow."""
    if tag is None or tag == "" or tag == "O" or tag.startswith("O-"):
        return "O", ""
    if tag[0] in _PREFIX_LETTERS and (len(tag) == 1 or tag[1] == "-"):
        prefix, entity = tag[0], tag[2:]
    else:
        prefix, entity = "", tag  # an IO label
    if scheme is not None and prefix not in set(_SCHEME_PREFIXES[scheme]):
        raise ValueError(
            f"tag {tag!r} does not follow the {scheme} scheme: its prefix must be "
            f"one of {', '.join(_SCHEME_PREFIXES[scheme])} (as in B-PER)"
        )
    if mode == "strict":  # a scheme is given, so the prefix is one of its letters
        return prefix, entity
    if scheme == "BILOU":
        prefix = _LENIENT_PREFIX.get(prefix, prefix)
    return prefix or "I", entity


def lenient_tag(tag: str | None, scheme: str | None = None) -> tuple[str, str]:
    """One tag -> (prefix, entity type) as the lenient rules read it: the prefix
    is one of O, B, I, E, S, L, U (an IO label reads as I; with
    scheme="BILOU", L and U read as E and S).
    With a scheme, ValueError for a tag whose prefix the scheme lacks."""
    _check_scheme(scheme, None)
    return _split_tag(tag, scheme, None)


def _check_scheme(scheme, mode):
    if mode not in MODES:
        raise ValueError(
            f"mode must be None (lenient, conlleval's rules) or 'strict', got {mode!r}"
        )
    if scheme is not None and scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)} or None, got {scheme!r}")
    if mode == "strict" and scheme is None:
        raise ValueError(
            f"strict mode needs the tagging scheme: scheme= one of {', '.join(SCHEMES)}"
        )


def _ends_chunk(prev_prefix, prefix, prev_type, type_):
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return prev_prefix != "O" and prev_type != type_


def _starts_chunk(prev_prefix, prefix, prev_type, type_):
    if prefix in ("B", "S"):
        return True
    if prev_prefix in ("E", "S", "O") and prefix in ("E", "I"):
        return True
    return prefix != "O" and prev_type != type_


def _lenient_entities(split):
    entities = set()
    prev_prefix, prev_type, begin = "O", "", 0
    for i, (prefix, type_) in enumerate(split + [("O", "")]):
        if _ends_chunk(prev_prefix, prefix, prev_type, type_):
            entities.add((prev_type, begin, i - 1))
        if _starts_chunk(prev_prefix, prefix, prev_type, type_):
            begin = i
        prev_prefix, prev_type = prefix, type_
    return entities


def _matches(rules, prev, current):
    """Whether (prefix, type) `current` after `prev` matches one of `rules`."""
    for rule in rules.split():
        want_prev, want_current, types = rule
        if (
            want_prev in (".", prev[0])
            and want_current in (".", current[0])
            and (types == "*" or (types == "=") == (prev[1] == current[1]))
        ):
            return True
    return False


def _strict_entities(split, scheme):
    rules = _STRICT_RULES[scheme]
    tags = split + [("O", "")]  # the end of the sentence reads as an O
    entities, i = set(), 0
    while i < len(tags):
        prev = tags[i - 1] if i else ("O", "")
        if not _matches(rules["start"], prev, tags[i]):
            i += 1
            continue
        after = i + 1
        while _matches(rules["inside"], tags[after - 1], tags[after]):
            after += 1  # never past the final O: nothing continues into an O
        if _matches(rules["end"], tags[after - 1], tags[after]):
            entities.add((tags[i][1], i, after - 1))
        i = after
    return entities


def get_entities(
    tags: Iterable[str], scheme: str | None = None, mode: str | None = None
) -> set[tuple[str, int, int]]:
    """Tags of one sentence -> set of (type, first, last) entities, read as
    seqeval reads them in `mode` (None: lenient, conlleval's rules; "strict":
    `scheme`'s rules; see the comment above)."""
    _check_scheme(scheme, mode)
    split = [_split_tag(tag, scheme, mode) for tag in tags]
    return _strict_entities(split, scheme) if mode == "strict" else _lenient_entities(split)


def _entity_counts(true_tags, predicted_tags, scheme, mode):
    """Per entity type: [correct, true, predicted] entity counts."""
    if len(true_tags) != len(predicted_tags):
        raise ValueError(f"{len(true_tags)} gold sentences but {len(predicted_tags)} predicted")
    counts = collections.defaultdict(lambda: [0, 0, 0])
    for index, (gold, pred) in enumerate(zip(true_tags, predicted_tags)):
        if len(gold) != len(pred):
            raise ValueError(f"sentence {index}: {len(gold)} gold tags, {len(pred)} predicted")
        gold_entities = get_entities(gold, scheme, mode)
        pred_entities = get_entities(pred, scheme, mode)
        for entity in gold_entities & pred_entities:
            counts[entity[0]][0] += 1
        for entity in gold_entities:
            counts[entity[0]][1] += 1
        for entity in pred_entities:
            counts[entity[0]][2] += 1
    return counts


def _scores(correct, n_true, n_pred):
    """Precision, recall, F1; 0 where undefined (seqeval's zero_division default)."""
    precision = correct / n_pred if n_pred else 0.0
    recall = correct / n_true if n_true else 0.0
    f1_score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1_score}


def entity_scores(
    true_tags: Sequence[Sequence[str]],
    predicted_tags: Sequence[Sequence[str]],
    scheme: str | None = None,
    mode: str | None = None,
) -> dict[str, float]:
    """Lists of tag sequences -> entity-level precision, recall and F1 (micro),
    as seqeval's `f1_score(true, predicted)` (mode=None) or
    `f1_score(true, predicted, mode="strict", scheme=...)`."""
    _check_scheme(scheme, mode)
    counts = _entity_counts(true_tags, predicted_tags, scheme, mode)
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    return _scores(*totals)


def entity_report(
    true_tags: Sequence[Sequence[str]],
    predicted_tags: Sequence[Sequence[str]],
    scheme: str | None = None,
    mode: str | None = None,
) -> dict[str, dict[str, float]]:
    """Per entity type (those of the gold or predicted entities, sorted):
    precision, recall, F1 and support (gold entities), as seqeval's
    `classification_report` (its type "_" is the empty type "" here)."""
    _check_scheme(scheme, mode)
    counts = _entity_counts(true_tags, predicted_tags, scheme, mode)
    return {
        entity: {**_scores(*counts[entity]), "support": counts[entity][1]}
        for entity in sorted(counts)
    }


# === SQuAD ===


def normalize_answer(text: str) -> str:
    """Lowercase, strip punctuation, articles and extra whitespace (official scripts)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text, flags=re.UNICODE)
    return " ".join(text.split())


def squad_exact(gold: str, prediction: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(prediction))


def squad_f1(gold: str, prediction: str, version: int = 2) -> float:
    """Token F1 of the official scripts. Where both answers normalise to nothing,
    v2.0's script scores 1 and v1.1's 0 (no common token): `version` picks which."""
    gold_tokens = normalize_answer(gold).split()
    pred_tokens = normalize_answer(prediction).split()
    if version == 2 and (not gold_tokens or not pred_tokens):
        # v2.0: an empty answer scores 1 only against an empty answer.
        return float(gold_tokens == pred_tokens)
    common = collections.Counter(gold_tokens) & collections.Counter(pred_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    """SQuAD JSON `data` list -> {id: gold answer texts}."""
    return {
        qa["id"]: [a["text"] for a in qa["answers"]]
        for article in dataset
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    }


def squad_v1_scores(
    dataset: Iterable[Mapping[str, Any]], predictions: Mapping[str, str]
) -> dict[str, float]:
    """Official v1.1 evaluation: percentages over every question (missing ones score 0)."""
    questions = _questions(dataset)
    exact = f1_total = 0.0
    for qid, golds in questions.items():
        if qid not in predictions:
            continue
        exact += max(squad_exact(g, predictions[qid]) for g in golds)
        f1_total += max(squad_f1(g, predictions[qid], version=1) for g in golds)
    total = len(questions)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1_total / total}


def _best_threshold(predictions, scores, na_probs, has_answer):
    """Sweeps the no-answer threshold as the official v2.0 script does."""
    score = best = sum(1 for q in scores if not has_answer[q])
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        else:
            score += -1 if predictions[qid] else 0
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), threshold


def squad_v2_scores(
    dataset: Iterable[Mapping[str, Any]],
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    na_prob_threshold: float = 1.0,
) -> dict[str, float]:
    """Official v2.0 evaluation over the questions that have a prediction.

    `na_probs` are no-answer scores (higher = more likely unanswerable); a
    question whose score exceeds `na_prob_threshold` counts as answered "".
    Returns exact / f1 / total, HasAns_* and NoAns_* (when present) and the
    best-threshold figures `best_exact`, `best_exact_thresh`, `best_f1`,
    `best_f1_thresh` (the official `final_*`).
    """
    golds = {qid: texts for qid, texts in _questions(dataset).items() if qid in predictions}
    has_answer = {qid: bool(texts) for qid, texts in golds.items()}
    if na_probs is None:
        na_probs = {qid: 0.0 for qid in predictions}
    exact_raw, f1_raw = {}, {}
    for qid, texts in golds.items():
        texts = [t for t in texts if normalize_answer(t)] or [""]
        exact_raw[qid] = max(squad_exact(t, predictions[qid]) for t in texts)
        f1_raw[qid] = max(squad_f1(t, predictions[qid]) for t in texts)

    def thresholded(raw):
        return {
            qid: float(not has_answer[qid]) if na_probs[qid] > na_prob_threshold else s
            for qid, s in raw.items()
        }

    exact, f1_scores = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids):
        return {
            "exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1_scores[q] for q in qids) / len(qids),
            "total": len(qids),
        }

    result = summary(list(golds))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in golds if has_answer[q] == wanted]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in summary(qids).items()})
    result["best_exact"], result["best_exact_thresh"] = _best_threshold(
        predictions, exact_raw, na_probs, has_answer
    )
    result["best_f1"], result["best_f1_thresh"] = _best_threshold(
        predictions, f1_raw, na_probs, has_answer
    )
    return result
