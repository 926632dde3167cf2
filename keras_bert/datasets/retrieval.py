"""Embedding evaluation: retrieval (recall@k, MRR@10, NDCG@10) and scored pairs (Spearman).

The figures are sentence-transformers' `InformationRetrievalEvaluator`'s and
`EmbeddingSimilarityEvaluator`'s, on embeddings (any model's; `evaluate_*`
embed with a `BertSentenceEncoder`-like model's `predict`):

  recall@k   per query, the share of its relevant documents among the k
             most similar, averaged over queries;
  MRR@10     1 / the rank of the first relevant document in the top 10 (0 if none);
  NDCG@10    binary relevance, DCG = sum over the top 10 of rel_i / log2(i + 2),
             divided by the ideal DCG;
  Spearman   the rank correlation of the pairs' cosines with their scores
             (ties share their mean rank).

Similarity is cosine. Ties are broken as sentence-transformers' evaluator
breaks them: it keeps each query's best `ST_HEAP_SIZE` (its map@100) as a heap
of (score, corpus id) pairs, then sorts that heap's list by score alone. So a
tie at the heap's cut keeps the larger corpus ids, and equal scores inside keep
the heap's order, in which a smaller id tends to come first (ids compared as
given: a dict's keys, else positions). We push the kept documents in corpus
order; sentence-transformers pushes them in torch.topk's order, the same
where topk returns them in corpus order.

Legend for shape comments: Q = queries, C = corpus documents, D = embedding size.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from keras_bert.datasets import metrics
from keras_bert.datasets.text_rows import TextRows

MRR_AT = 10
NDCG_AT = 10
# sentence-transformers' evaluator ranks max(its k's) documents, map@100's by default.
ST_HEAP_SIZE = 100


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def rank_corpus(
    query_embeddings: np.ndarray,
    corpus_embeddings: np.ndarray,
    top_k: int,
    chunk_size: int = 1024,
    corpus_ids: Sequence[Any] | None = None,
) -> np.ndarray:
    """(Q, D), (C, D) -> (Q, min(top_k, C)) corpus indices, most similar first,
    ties broken as sentence-transformers breaks them (module docstring);
    `corpus_ids`: the documents' ids (default: their positions)."""
    queries, corpus = _unit(query_embeddings), _unit(corpus_embeddings)
    ids = list(range(len(corpus))) if corpus_ids is None else list(corpus_ids)
    if len(ids) != len(corpus):
        raise ValueError(f"{len(ids)} corpus ids for {len(corpus)} documents")
    top_k = min(top_k, len(corpus))
    heap_size = min(max(top_k, ST_HEAP_SIZE), len(corpus))
    ranked = []
    for start in range(0, len(queries), chunk_size):
        scores = queries[start : start + chunk_size] @ corpus.T  # (q, C)
        ranked += [_st_ranking(row, ids, heap_size)[:top_k] for row in scores]
    return np.array(ranked, np.int64).reshape(len(queries), top_k)


def _st_ranking(scores, ids, heap_size):
    """One query's scores (C,) -> the positions of its best `heap_size`
    documents, in sentence-transformers' order."""
    # The heap keeps the largest (score, id) pairs: the candidates are those
    # scoring at least the heap_size-th best score, cut by (score, id).
    cut = np.partition(scores, len(scores) - heap_size)[len(scores) - heap_size]
    candidates = np.flatnonzero(scores >= cut)
    if len(candidates) > heap_size:
        candidates = sorted(candidates, key=lambda i: (scores[i], ids[i]), reverse=True)
        candidates = sorted(candidates[:heap_size])  # back in corpus order
    heap: list[tuple[float, Any, int]] = []
    for i in candidates:
        heapq.heappush(heap, (float(scores[i]), ids[i], int(i)))
    return [i for _, _, i in sorted(heap, key=lambda entry: entry[0], reverse=True)]


def relevance_sets(
    relevant: Mapping[Any, Iterable[Any]] | Iterable[tuple[Any, Any]],
    query_ids: Sequence[Any],
    corpus_ids: Sequence[Any],
) -> list[set[int]]:
    """Relevant documents per query, as corpus positions: from {query id:
    [corpus ids]} or (query id, corpus id) pairs; ids are the keys of the
    queries / corpus dicts (positions for lists). Unknown ids: a ValueError."""
    query_index = {qid: i for i, qid in enumerate(query_ids)}
    corpus_index = {cid: i for i, cid in enumerate(corpus_ids)}
    pairs = (
        [(q, c) for q, docs in relevant.items() for c in docs]
        if isinstance(relevant, Mapping)
        else list(relevant)
    )
    sets: list[set[int]] = [set() for _ in query_ids]
    for query, document in pairs:
        if query not in query_index:
            raise ValueError(f"relevant pair ({query!r}, {document!r}): no query {query!r}")
        if document not in corpus_index:
            raise ValueError(
                f"relevant pair ({query!r}, {document!r}): no document {document!r} in the corpus"
            )
        sets[query_index[query]].add(corpus_index[document])
    return sets


def retrieval_metrics(
    query_embeddings: np.ndarray,
    corpus_embeddings: np.ndarray,
    relevant: Sequence[set[int]],
    recall_at: Sequence[int] = (1, 5, 10),
    corpus_ids: Sequence[Any] | None = None,
) -> dict[str, float]:
    """recall@k for each k of `recall_at`, mrr@10 and ndcg@10, averaged over the
    queries that have a relevant document; `relevant[q]`: corpus positions;
    `corpus_ids` break ties (`rank_corpus`)."""
    if len(relevant) != len(query_embeddings):
        raise ValueError(f"{len(relevant)} relevance sets for {len(query_embeddings)} queries")
    depth = max([MRR_AT, NDCG_AT, *recall_at])
    ranked = rank_corpus(query_embeddings, corpus_embeddings, depth, corpus_ids=corpus_ids)
    scored = [q for q, docs in enumerate(relevant) if docs]
    if not scored:
        raise ValueError("no query has a relevant document")
    figures = {f"recall@{k}": 0.0 for k in recall_at}
    figures.update({f"mrr@{MRR_AT}": 0.0, f"ndcg@{NDCG_AT}": 0.0})
    discounts = 1.0 / np.log2(np.arange(2, NDCG_AT + 2))
    for q in scored:
        hits = np.array([doc in relevant[q] for doc in ranked[q]], np.float64)
        for k in recall_at:
            figures[f"recall@{k}"] += hits[:k].sum() / len(relevant[q])
        first = np.flatnonzero(hits[:MRR_AT])
        figures[f"mrr@{MRR_AT}"] += 1.0 / (first[0] + 1) if len(first) else 0.0
        gains = hits[:NDCG_AT]
        ideal = discounts[: min(len(relevant[q]), NDCG_AT)].sum()
        figures[f"ndcg@{NDCG_AT}"] += float((gains * discounts[: len(gains)]).sum() / ideal)
    return {name: value / len(scored) for name, value in figures.items()}


def evaluate_retrieval(
    model: Any,
    queries: Sequence[str] | Mapping[Any, str],
    corpus: Sequence[str] | Mapping[Any, str],
    relevant: Mapping[Any, Iterable[Any]] | Iterable[tuple[Any, Any]],
    recall_at: Sequence[int] = (1, 5, 10),
    batch_size: int = 32,
) -> dict[str, float]:
    """Embeds queries and corpus with `model.predict` and scores the retrieval
    (`retrieval_metrics`). Queries and corpus: lists (ids are positions) or
    {id: text} dicts; `relevant`: {query id: [corpus ids]} or (query id,
    corpus id) pairs."""
    query_ids, query_texts = _ids_and_texts(queries)
    corpus_ids, corpus_texts = _ids_and_texts(corpus)
    sets = relevance_sets(relevant, query_ids, corpus_ids)
    query_embeddings = model.predict(query_texts, batch_size=batch_size, verbose=0)
    corpus_embeddings = model.predict(corpus_texts, batch_size=batch_size, verbose=0)
    return retrieval_metrics(query_embeddings, corpus_embeddings, sets, recall_at, corpus_ids)


def _ids_and_texts(texts):
    if isinstance(texts, Mapping):
        return list(texts), list(texts.values())
    return list(range(len(texts))), list(texts)


# === Scored pairs ===


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (`keras_bert.datasets.metrics.spearman`, ties
    averaged as scipy's), with the lengths checked."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(
            f"spearman needs two equally long sequences of 2 or more values; "
            f"got {len(x)} and {len(y)}"
        )
    return metrics.spearman(x, y)


def pair_cosines(embeddings_a: np.ndarray, embeddings_b: np.ndarray) -> np.ndarray:
    """(N, D), (N, D) -> (N,) cosine of each pair."""
    return (_unit(embeddings_a) * _unit(embeddings_b)).sum(axis=-1)


def evaluate_scored_pairs(
    model: Any,
    texts_a: Sequence[str],
    texts_b: Sequence[str],
    scores: Sequence[float],
    batch_size: int = 32,
) -> dict[str, float]:
    """{"spearman_cosine": ...}: how the pairs' embedding cosines rank against their scores."""
    if not len(texts_a) == len(texts_b) == len(scores):
        raise ValueError(
            f"scored pairs: {len(texts_a)} texts_a, {len(texts_b)} texts_b, {len(scores)} scores"
        )
    cosines = pair_cosines(
        model.predict(list(texts_a), batch_size=batch_size, verbose=0),
        model.predict(list(texts_b), batch_size=batch_size, verbose=0),
    )
    return {"spearman_cosine": spearman(cosines, scores)}


# === Rows of a file ===


def evaluate_text_rows(
    embed: Callable[[list[str]], np.ndarray], rows: TextRows
) -> dict[str, float | int]:
    """The figures of `rows` (`keras_bert.datasets.text_rows`) for the embeddings
    `embed(texts)` (N, D) gives: Spearman for scored pairs ({"spearman_cosine",
    "pairs"}); else retrieval, each row's first text querying its second
    among every second (and third) text of the rows (recall@1/5/10, mrr@10,
    ndcg@10, "queries", "documents")."""
    if rows.scores is not None:
        cosines = pair_cosines(embed(rows.columns[0]), embed(rows.columns[1]))
        return {"spearman_cosine": spearman(cosines, rows.scores), "pairs": len(rows)}
    queries, corpus, relevant = rows.retrieval()
    sets = relevance_sets(relevant, range(len(queries)), range(len(corpus)))
    figures: dict[str, float | int] = dict(retrieval_metrics(embed(queries), embed(corpus), sets))
    figures.update(queries=len(queries), documents=len(corpus))
    return figures
