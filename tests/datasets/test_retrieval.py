"""Retrieval and scored-pair figures against hand-computed values and SciPy;
the TSV reader of pairs, triplets and scored pairs."""

import math
import os

import numpy as np
import pytest
import scipy.stats

from keras_bert.datasets.retrieval import (
    evaluate_retrieval,
    evaluate_scored_pairs,
    rank_corpus,
    relevance_sets,
    retrieval_metrics,
    spearman,
)
from keras_bert.datasets.text_rows import read_text_rows

# Unit vectors at angles: similarity falls with the angle between them.
ANGLES = {"q0": 0, "q1": 90, "q2": 180, "d0": 10, "d1": 80, "d2": 100, "d3": 170}


def vector(name):
    angle = math.radians(ANGLES[name])
    return np.array([math.cos(angle), math.sin(angle)], np.float32)


class FixedEmbeddings:
    """A model whose `predict` looks each text's vector up."""

    def predict(self, texts, batch_size=None, verbose=0):
        return np.stack([vector(text) for text in texts])


def test_rank_corpus_orders_by_cosine():
    queries = np.stack([vector("q0"), vector("q2")])
    corpus = np.stack([vector(d) for d in ("d0", "d1", "d2", "d3")]) * 3  # scale-free
    np.testing.assert_array_equal(rank_corpus(queries, corpus, 3), [[0, 1, 2], [3, 2, 1]])


def test_retrieval_metrics_equal_hand_computed_values():
    """q0 ranks d0 d1 d2 d3, relevant {d1}: rank 2. q1: d1 and d2 tie (10
    degrees from 90), d0 and d3 too (80); sentence-transformers' heap, pushed
    d0 d1 d2 d3, is the list [d0, d3, d2, d1] (d3 sifts up past d1), so it
    ranks d2 d1 d0 d3; relevant {d2, d3}: ranks 1 and 4. q2 ranks d3 d2 d1 d0,
    relevant {d3}: rank 1."""
    queries = np.stack([vector(q) for q in ("q0", "q1", "q2")])
    corpus = np.stack([vector(d) for d in ("d0", "d1", "d2", "d3")])
    relevant = [{1}, {2, 3}, {3}]
    got = retrieval_metrics(queries, corpus, relevant, recall_at=(1, 2, 3))
    log2 = math.log2
    ndcg = [(1 / log2(3)) / 1, (1 + 1 / log2(5)) / (1 + 1 / log2(3)), 1.0]
    expected = {
        "recall@1": (0 + 0.5 + 1) / 3,
        "recall@2": (1 + 0.5 + 1) / 3,
        "recall@3": (1 + 0.5 + 1) / 3,
        "mrr@10": (1 / 2 + 1 + 1) / 3,
        "ndcg@10": sum(ndcg) / 3,
    }
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-6), name


def test_evaluate_retrieval_reads_ids_and_pairs():
    queries = {"a": "q0", "b": "q2"}
    corpus = {"x": "d0", "y": "d3", "z": "d1"}
    figures = evaluate_retrieval(
        FixedEmbeddings(), queries, corpus, [("a", "z"), ("b", "y")], recall_at=(1,)
    )
    assert figures["recall@1"] == pytest.approx(0.5)  # a finds x first; b finds y
    assert figures["mrr@10"] == pytest.approx((1 / 2 + 1) / 2)
    with pytest.raises(ValueError, match="no document 'w'"):
        relevance_sets([("a", "w")], list(queries), list(corpus))


def test_spearman_equals_scipy_with_ties():
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    y = np.round(x + rng.normal(size=40), 0)  # many ties
    assert spearman(x, y) == pytest.approx(scipy.stats.spearmanr(x, y).statistic, abs=1e-12)


def test_evaluate_scored_pairs():
    a, b = ["q0", "q0", "q1", "q2"], ["d0", "d3", "d1", "d3"]
    scores = [0.9, 0.0, 0.7, 1.0]
    cosines = [float(vector(p) @ vector(q)) for p, q in zip(a, b)]
    expected = scipy.stats.spearmanr(cosines, scores).statistic
    got = evaluate_scored_pairs(FixedEmbeddings(), a, b, scores)
    assert got == {"spearman_cosine": pytest.approx(expected)}


# === The TSV reader ===


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_pairs_triplets_and_scored_pairs(tmp_path):
    pairs = read_text_rows(write(tmp_path / "p.tsv", ["anchor\tpositive", "a\tb", "c\td"]))
    assert pairs.fit_inputs() == ((["a", "c"], ["b", "d"]), None)
    triplets = read_text_rows(write(tmp_path / "t.tsv", ["q\tpos\tneg", "a\tb\tc"]))
    assert triplets.fit_inputs()[0] == (["a"], ["b"], ["c"]) and triplets.names == [
        "q",
        "pos",
        "neg",
    ]
    scored = read_text_rows(
        write(tmp_path / "s.tsv", ["sentence1\tsentence2\tscore", "a\tb\t0.5", "c\td\t4"])
    )
    (x, y) = scored.fit_inputs()
    assert x == (["a", "c"], ["b", "d"])
    np.testing.assert_array_equal(y, np.array([0.5, 4.0], np.float32))


def test_bbc_news_headlines_and_articles(datasets_dir):
    rows = read_text_rows(
        os.path.join(datasets_dir, "bbc_news", "dev.tsv"), text_columns=("title", "text")
    )
    assert len(rows) == 222 and rows.scores is None
    assert rows.columns[0][0] == "Economy 'strong' in election year"
    queries, corpus, relevant = rows.retrieval()
    assert len(queries) == 222 and len(relevant) == 222
    assert all(corpus[d] == rows.columns[1][q] for q, d in relevant)


def test_reader_errors_name_the_file_and_the_columns(tmp_path):
    path = write(tmp_path / "bad.tsv", ["a\tb", "x\ty\tz"])
    with pytest.raises(ValueError, match=r"bad.tsv:2: 3 fields"):
        read_text_rows(path)
    path = write(tmp_path / "one.tsv", ["a\tb\tc\td", "1\t2\t3\t4"])
    with pytest.raises(ValueError, match="2 \\(pairs\\) or 3 \\(triplets\\)"):
        read_text_rows(path)
    with pytest.raises(ValueError, match=r"no column\(s\) \['title'\]"):
        read_text_rows(path, text_columns=("title", "a"))


class TextVectors:
    """A model whose `predict` reads each text as a comma-separated vector."""

    def predict(self, texts, batch_size=None, verbose=0):
        return np.array([[float(x) for x in text.split(",")] for text in texts], np.float32)


def test_ties_are_broken_as_sentence_transformers_breaks_them():
    """sentence-transformers' InformationRetrievalEvaluator pushes each query's
    candidates as (score, corpus_id) onto a heapq (heappush, corpus smaller than
    its top-k), then ranks `sorted(heap, key=score, reverse=True)`: equal scores
    keep the heap's list order. Four documents of one score pushed as "b", "d",
    "a", "c" (corpus order), then "far" (lower), leave the heap list [far, a,
    b, d, c] (heapq: "a" and then "far" sift up to the root), ranked a, b, d,
    c, far. The corpus order would give b, d, a, c."""
    corpus = {"b": "1,0", "d": "1,0", "a": "1,0", "c": "1,0", "far": "0,1"}
    queries = {"q": "1,0"}
    expected_rank = {"a": 1, "b": 2, "d": 3, "c": 4, "far": 5}
    for doc, rank in expected_rank.items():
        got = evaluate_retrieval(TextVectors(), queries, corpus, {"q": [doc]}, recall_at=(1, 2))
        assert got["mrr@10"] == pytest.approx(1 / rank), doc
        assert got["recall@1"] == (rank == 1) and got["recall@2"] == (rank <= 2), doc
    # A list corpus: positions are the ids, pushed 0..3 then 4 ("far"): heap
    # list [4, 0, 2, 3, 1], so position 2 ranks second.
    as_list = list(corpus.values())
    got = evaluate_retrieval(TextVectors(), ["1,0"], as_list, {0: [2]})
    assert got["mrr@10"] == pytest.approx(1 / 2)
    # Three ties pushed "z", "y", "x": heap list [x, z, y].
    ranked = rank_corpus(np.ones((1, 2)), np.ones((3, 2)), 3, corpus_ids=["z", "y", "x"])
    assert ranked.tolist() == [[2, 0, 1]]
