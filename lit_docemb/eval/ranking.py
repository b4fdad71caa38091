"""Ranking metrics with trec_eval's semantics (pytrec_eval), for any method that ranks candidates per query.

:func:`top_k_run` turns a (Q, N) score matrix into a run (query id → {candidate id: score}) of each query's
``k`` best candidates; :func:`ranking_metrics` scores a run against qrels (query id → {candidate id:
relevance}) with trec_eval's ``P.k``, ``recall.k``, ``map``, ``ndcg`` and ``bpref`` and adds ``f1@k``.

The measures are those of CTPE §4.3 (seed 004: "top N = 20" results, P/R/F1, MAP, NDCG, bpref). As there,
every measure is computed on the run it is given, i.e. the top-k list when the run is cut at k: MAP sums the
precision at the relevant candidates found in the list, divided by all relevant candidates of the query.
F1 is the harmonic mean of the *mean* precision and *mean* recall, the way the paper's Table 2 reports it
(arXiv: P 0.3066, R 0.1124 → F1 0.1645).

Queries: those of the qrels with at least one relevant candidate. One of them missing from the run (nothing
retrieved) scores 0 on every measure; run queries without any relevant candidate are ignored and counted
(``unjudged_queries``).

**The paper's formulas** (:func:`paper_ranking_metrics`, keys ``paper_map@k``, ``paper_ndcg@k``, ``paper_bpref``).
CTPE's Table 3 was not computed with trec_eval and its authors published neither their formulas nor their
evaluation code (seed 004 §4.3 cites the textbook definitions; github.com/opendata-ai/tr has the data only). The
table's own rows fix a reading: a random embedding scores bpref 0.4767 / 0.4753 / 0.4753 (arXiv / DBLP / USPTO),
which trec_eval's bpref on a top-20 list cannot give (near 0: a random list holds almost no relevant paper), while
MAP and NDCG of the same rows are near 0, as on a top-20 list. Read so:

* ``paper_map@k``: average precision of the top-``k`` list normalised by the relevant papers it *could* hold,
  ``sum_{i <= k, d_i relevant} P@i / min(R, k)`` (trec_eval's ``map`` divides by ``R``: on arXiv, ``R`` is 22-95,
  so its MAP is at most ``k / R`` even for a perfect list; CTPE-word2vec(full)'s MAP 0.1893 next to P@20 0.3066
  fits ``min(R, k)``, not ``R``);
* ``paper_ndcg@k``: binary-gain ``DCG@k / IDCG@k``, the ideal list holding ``min(R, k)`` relevant papers
  (trec_eval's ``ndcg`` has all ``R`` in its ideal list);
* ``paper_bpref``: Buckley & Voorhees's bpref over the *whole* ranking of the candidate pool with every
  non-relevant candidate judged, ``(1 / R) sum_r (1 - |non-relevant ranked above r| / N)`` (``N`` non-relevant
  candidates, ``r`` over the relevant ones in the pool): a random ranking scores 0.5 times the share of ``R`` found
  in the pool, as the table's random rows do (0.48: some ground-truth ids are not among the candidates).

These are a reconstruction from the published numbers, not the authors' code: compare them with Table 3 only as
that; trec_eval's ``map``, ``ndcg`` and ``bpref`` stay beside them under their own names.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytrec_eval
import torch
from torch import Tensor

from lit_docemb.data.retrieval.trec import Qrels, Run, ranked


def top_k_run(scores: Tensor, query_ids: Sequence[str], candidate_ids: Sequence[str], k: int = 20,
              exclude_self: bool = True) -> Run:
    """The ``k`` highest-scoring candidates of each query, (Q, N) ``scores`` → run. With ``exclude_self`` a
    candidate with the query's own id is never retrieved (a document does not retrieve itself)."""
    if scores.shape != (len(query_ids), len(candidate_ids)):
        raise ValueError(f"scores {tuple(scores.shape)} != ({len(query_ids)} queries, {len(candidate_ids)} "
                         "candidates)")
    scores = scores.float().clone()
    if exclude_self:
        column = {cid: j for j, cid in enumerate(candidate_ids)}
        for i, qid in enumerate(query_ids):
            if qid in column:
                scores[i, column[qid]] = float("-inf")
    depth = min(k, scores.shape[1])
    values, indices = scores.topk(depth, dim=1)  # (Q, k)
    run: Run = {}
    for qid, row_values, row_indices in zip(query_ids, values.tolist(), indices.tolist(), strict=True):
        run[qid] = {candidate_ids[j]: v for v, j in zip(row_values, row_indices, strict=True) if v != float("-inf")}
    return run


def ranking_metrics(run: Run, qrels: Qrels, k: int = 20) -> dict[str, float]:
    """Mean ``P@k, recall@k, f1@k, map, ndcg, bpref`` over the judged queries, plus ``queries`` and
    ``unjudged_queries`` counts (see the module docstring)."""
    judged = {qid: rels for qid, rels in qrels.items() if any(r > 0 for r in rels.values())}
    if not judged:
        raise ValueError("no query of the qrels has a relevant candidate (relevance > 0)")
    names = {f"P_{k}": f"P@{k}", f"recall_{k}": f"recall@{k}", "map": "map", "ndcg": "ndcg", "bpref": "bpref"}
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {f"P.{k}", f"recall.{k}", "map", "ndcg", "bpref"})
    per_query = evaluator.evaluate({qid: docs for qid, docs in run.items() if qid in judged and docs})
    means = {}
    for measure, name in names.items():
        means[name] = sum(per_query.get(qid, {}).get(measure, 0.0) for qid in judged) / len(judged)
    precision, recall = means[f"P@{k}"], means[f"recall@{k}"]
    means[f"f1@{k}"] = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    means["queries"] = float(len(judged))
    means["unjudged_queries"] = float(sum(qid not in judged for qid in run))
    return means


def paper_ranking_metrics(scores: Tensor, query_ids: Sequence[str], candidate_ids: Sequence[str], qrels: Qrels,
                          k: int = 20, exclude_self: bool = True) -> dict[str, float]:
    """CTPE Table 3's MAP, NDCG and bpref as read in the module docstring (``paper_map@k``, ``paper_ndcg@k``,
    ``paper_bpref``), means over the queries of ``qrels`` with a relevant candidate, from a (Q, N) score matrix
    (bpref needs the whole ranking, not a top-``k`` run). A query without a row in ``scores`` scores 0.

    Args:
        scores: (Q, N) similarity of each query to each candidate.
        query_ids: The Q query ids, in the rows' order.
        candidate_ids: The N candidate ids, in the columns' order.
        qrels: Query id → {candidate id: relevance}; relevance > 0 is relevant.
        k: Depth of the list that MAP and NDCG read (paper: 20).
        exclude_self: A candidate with the query's own id is left out of the query's ranking, as in
            :func:`top_k_run`.
    """
    if scores.shape != (len(query_ids), len(candidate_ids)):
        raise ValueError(f"scores {tuple(scores.shape)} != ({len(query_ids)} queries, {len(candidate_ids)} "
                         "candidates)")
    judged = {qid: {cid for cid, r in rels.items() if r > 0} for qid, rels in qrels.items()}
    judged = {qid: relevant for qid, relevant in judged.items() if relevant}
    if not judged:
        raise ValueError("no query of the qrels has a relevant candidate (relevance > 0)")
    column = {cid: j for j, cid in enumerate(candidate_ids)}
    rows = [row for row, qid in enumerate(query_ids) if qid in judged]
    count = torch.tensor([len(judged[query_ids[row]]) for row in rows], dtype=torch.float64)  # R per query
    ideal = count.clamp(max=k)
    discounts = 1.0 / torch.log2(torch.arange(2, k + 2, dtype=torch.float64))
    ideal_gain = discounts.cumsum(0)
    totals = {"map": 0.0, "ndcg": 0.0, "bpref": 0.0}
    for start in range(0, len(rows), 256):  # (256, N) at a time
        block = rows[start:start + 256]
        values = scores[block].double()
        is_relevant = torch.zeros(values.shape, dtype=torch.bool)
        for i, row in enumerate(block):
            is_relevant[i, [column[cid] for cid in judged[query_ids[row]] if cid in column]] = True
            if exclude_self and query_ids[row] in column:  # out of the ranking: last, neither relevant nor not
                values[i, column[query_ids[row]]] = float("-inf")
                is_relevant[i, column[query_ids[row]]] = False
        in_pool = torch.ones(values.shape, dtype=torch.float64)
        if exclude_self:
            in_pool[values == float("-inf")] = 0.0
        order = values.argsort(dim=1, descending=True, stable=True)
        hits = is_relevant.gather(1, order).double()  # relevance down each whole ranking
        pool = in_pool.gather(1, order)
        top = hits[:, :k]
        precision_at = top.cumsum(1) / torch.arange(1, top.shape[1] + 1, dtype=torch.float64)
        part = slice(start, start + len(block))
        totals["map"] += float(((precision_at * top).sum(1) / ideal[part]).sum())
        totals["ndcg"] += float(((top * discounts[:top.shape[1]]).sum(1) / ideal_gain[ideal[part].long() - 1]).sum())
        non_relevant_above = ((1.0 - hits) * pool).cumsum(1)  # at each position, non-relevant candidates so far
        non_relevant = non_relevant_above[:, -1:].clamp(min=1.0)  # N (every candidate relevant: nothing above)
        totals["bpref"] += float((((1.0 - non_relevant_above / non_relevant) * hits).sum(1) / count[part]).sum())
    return {f"paper_map@{k}": totals["map"] / len(judged), f"paper_ndcg@{k}": totals["ndcg"] / len(judged),
            "paper_bpref": totals["bpref"] / len(judged)}


def rank_and_score(scores: Tensor, query_ids: Sequence[str], candidate_ids: Sequence[str], qrels: Qrels,
                   k: int = 20) -> dict[str, float]:
    """:func:`ranking_metrics` (trec_eval) of the top-``k`` run of a (Q, N) score matrix, with the paper's formulas
    of :func:`paper_ranking_metrics` beside them."""
    metrics = ranking_metrics(top_k_run(scores, query_ids, candidate_ids, k), qrels, k)
    return metrics | paper_ranking_metrics(scores, query_ids, candidate_ids, qrels, k)


# ---------------------------------------------------------------------------------------------------------------------
# Retrieval measures by name (Graph-RoBERTa Tables 3-5, MSMARCO)
# ---------------------------------------------------------------------------------------------------------------------

RETRIEVAL_MEASURES = ("mrr@10", "mrr@100", "ndcg@10", "ndcg@20", "P@5", "P@10", "P@20", "map", "recall@100", "bpref")
"""The measures :func:`retrieval_metrics` reports by default."""

_TREC_NAMES = {"ndcg": "ndcg_cut", "P": "P", "recall": "recall", "map": "map_cut"}


def trec_measure(name: str) -> tuple[str, int | None]:
    """(trec_eval measure, run cut-off) of a measure name: ``mrr@k`` is ``recip_rank`` on each query's top ``k``
    (trec_eval has no cut of it; MSMARCO's MRR@10), ``ndcg@k`` → ``ndcg_cut.k``, ``P@k`` → ``P.k``,
    ``recall@k`` → ``recall.k``, ``map@k`` → ``map_cut.k``; ``map``, ``ndcg``, ``bpref``, ``recip_rank`` as is."""
    base, _, cut = name.partition("@")
    if not cut:
        if name in ("map", "ndcg", "bpref", "recip_rank"):
            return name, None
    elif cut.isdigit() and int(cut) > 0:
        if base == "mrr":
            return "recip_rank", int(cut)
        if base in _TREC_NAMES:
            return f"{_TREC_NAMES[base]}.{cut}", None
    raise ValueError(f"unknown measure {name!r}: use mrr@k, ndcg@k, P@k, recall@k, map@k, map, ndcg, bpref")


def cut_run(run: Run, depth: int) -> Run:
    """Each query's top ``depth`` documents in trec_eval's order (score descending, ties by docid descending)."""
    return {qid: dict(ranked(docs)[:depth]) for qid, docs in run.items()}


def per_query_metrics(run: Run, qrels: Qrels,
                      measures: Sequence[str] = RETRIEVAL_MEASURES) -> dict[str, dict[str, float]]:
    """{query id: {measure: value}} for every query of ``qrels`` with a relevant document (relevance > 0); a
    query missing from the run (or with nothing retrieved) scores 0, as with ``trec_eval -c``."""
    judged = {qid: rels for qid, rels in qrels.items() if any(r > 0 for r in rels.values())}
    if not judged:
        raise ValueError("no query of the qrels has a relevant document (relevance > 0)")
    run = {qid: docs for qid, docs in run.items() if qid in judged and docs}
    by_cut: dict[int | None, dict[str, str]] = {}  # run cut-off → {trec_eval measure: our name}
    for name in measures:
        measure, cut = trec_measure(name)
        by_cut.setdefault(cut, {})[measure] = name
    out = {qid: {} for qid in judged}
    for cut, names in by_cut.items():
        evaluated = pytrec_eval.RelevanceEvaluator(judged, set(names)).evaluate(
            run if cut is None else cut_run(run, cut))
        for qid in judged:
            values = evaluated.get(qid, {})
            for measure, name in names.items():
                out[qid][name] = float(values.get(measure.replace(".", "_"), 0.0))
    return out


def retrieval_metrics(run: Run, qrels: Qrels, measures: Sequence[str] = RETRIEVAL_MEASURES) -> dict[str, float]:
    """Mean of each measure (see :func:`trec_measure`) over the judged queries (:func:`per_query_metrics`), plus
    ``queries``: trec_eval's values averaged as ``trec_eval -c`` does."""
    values = per_query_metrics(run, qrels, measures)
    means = {name: sum(q[name] for q in values.values()) / len(values) for name in measures}
    means["queries"] = float(len(values))
    return means
