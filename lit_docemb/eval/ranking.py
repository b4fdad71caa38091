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
"""

from __future__ import annotations

from collections.abc import Sequence

import pytrec_eval
from torch import Tensor

from lit_docemb.data.trec import Qrels, Run


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


def rank_and_score(scores: Tensor, query_ids: Sequence[str], candidate_ids: Sequence[str], qrels: Qrels,
                   k: int = 20) -> dict[str, float]:
    """:func:`ranking_metrics` of the top-``k`` run of a (Q, N) score matrix."""
    return ranking_metrics(top_k_run(scores, query_ids, candidate_ids, k), qrels, k)
