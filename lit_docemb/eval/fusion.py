"""Hybrid dense + BM25 ranking by weighted interpolation of normalised scores (Graph-RoBERTa Tables 3-5: "a
weighted average of their scores (the weight is selected through cross-validation)").

Each query's scores are normalised within that query's list (min-max to [0, 1], or z-scores), then
``fused = weight * dense + (1 - weight) * bm25`` over the union of both lists; a document one list lacks gets
that list's lowest normalised score for the query (0 under min-max). The weight is chosen from a grid by a
measure's mean over judged queries: on a development split (:func:`choose_weight`), or per fold by k-fold
cross-validation over the queries (:func:`cross_validated_fusion`, Robust04's five folds).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Literal

from lit_docemb.data.core.datamodule import stable_fraction
from lit_docemb.data.retrieval.trec import Qrels, Run, ranked
from lit_docemb.eval.ranking import per_query_metrics

Normalisation = Literal["min_max", "z_score"]
DEFAULT_WEIGHTS = tuple(i / 20 for i in range(21))
"""The default grid of dense weights: 0, 0.05, ..., 1."""


def normalise(scores: dict[str, float], how: Normalisation = "min_max") -> dict[str, float]:
    """One query's scores normalised: min-max to [0, 1] (all equal: all 1), or z-scores (all equal: all 0)."""
    if not scores:
        return {}
    values = list(scores.values())
    if how == "min_max":
        low, high = min(values), max(values)
        return {d: (s - low) / (high - low) if high > low else 1.0 for d, s in scores.items()}
    if how == "z_score":
        mean, std = statistics.fmean(values), statistics.pstdev(values)
        return {d: (s - mean) / std if std > 0 else 0.0 for d, s in scores.items()}
    raise ValueError(f"unknown normalisation {how!r}: 'min_max' or 'z_score'")


def interpolate(dense: Run, sparse: Run, weight: float, how: Normalisation = "min_max",
                depth: int | None = None) -> Run:
    """``weight * dense + (1 - weight) * sparse`` of per-query normalised scores, for every query of either run,
    cut to each query's top ``depth`` (None: the whole union)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    fused: Run = {}
    for qid in dense.keys() | sparse.keys():
        a, b = normalise(dense.get(qid, {}), how), normalise(sparse.get(qid, {}), how)
        floor_a, floor_b = min(a.values(), default=0.0), min(b.values(), default=0.0)
        scores = {d: weight * a.get(d, floor_a) + (1.0 - weight) * b.get(d, floor_b) for d in a.keys() | b.keys()}
        fused[qid] = dict(ranked(scores)[:depth]) if depth is not None else scores
    return fused


def weight_curve(dense: Run, sparse: Run, qrels: Qrels, measure: str = "ndcg@20",
                 weights: Sequence[float] = DEFAULT_WEIGHTS, how: Normalisation = "min_max",
                 depth: int | None = None) -> dict[float, float]:
    """{weight: mean ``measure`` of the fused run over the judged queries of ``qrels``}."""
    if not weights:
        raise ValueError("need at least one weight")
    curve = {}
    for weight in weights:
        values = per_query_metrics(interpolate(dense, sparse, weight, how, depth), qrels, [measure])
        curve[weight] = sum(v[measure] for v in values.values()) / len(values)
    return curve


def choose_weight(dense: Run, sparse: Run, qrels: Qrels, measure: str = "ndcg@20",
                  weights: Sequence[float] = DEFAULT_WEIGHTS, how: Normalisation = "min_max",
                  depth: int | None = None) -> tuple[float, float]:
    """(weight, its mean ``measure``) of the best weight on ``qrels``' queries; a tie goes to the first in
    ``weights``."""
    curve = weight_curve(dense, sparse, qrels, measure, weights, how, depth)
    best = max(curve, key=lambda w: (curve[w], -list(curve).index(w)))
    return best, curve[best]


def hashed_folds(query_ids: Sequence[str], n_folds: int = 5, seed: int = 0) -> list[list[str]]:
    """``n_folds`` folds of query ids by a seeded hash of each id (stable across runs and machines)."""
    if n_folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {n_folds}")
    folds: list[list[str]] = [[] for _ in range(n_folds)]
    for qid in sorted(query_ids):
        folds[min(n_folds - 1, int(stable_fraction(qid, seed) * n_folds))].append(qid)
    return folds


def cross_validated_fusion(dense: Run, sparse: Run, qrels: Qrels, folds: Sequence[Sequence[str]],
                           measure: str = "ndcg@20", weights: Sequence[float] = DEFAULT_WEIGHTS,
                           how: Normalisation = "min_max", depth: int | None = None) -> tuple[Run, list[float]]:
    """The fused run in which each fold's queries use the weight chosen on the other folds' queries, and the
    weight of each fold. Queries of no fold are left out of the run; a fold whose complement has no judged
    query is an error."""
    fused: Run = {}
    chosen = []
    for index, fold in enumerate(folds):
        held_out = set(fold)
        tuning = {q: rels for q, rels in qrels.items() if q not in held_out and any(r > 0 for r in rels.values())}
        if not tuning:
            raise ValueError(f"fold {index + 1}: the other folds have no judged query to choose a weight on")
        weight, _ = choose_weight(dense, sparse, tuning, measure, weights, how, depth)
        chosen.append(weight)
        fold_dense = {q: d for q, d in dense.items() if q in held_out}
        fold_sparse = {q: d for q, d in sparse.items() if q in held_out}
        fused.update(interpolate(fold_dense, fold_sparse, weight, how, depth))
    return fused, chosen
