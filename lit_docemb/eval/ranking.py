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

from lit_docemb.data.trec import Qrels, Run, ranked


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
