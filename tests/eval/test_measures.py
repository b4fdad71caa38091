"""Retrieval measures by name against hand-computed values and an independent reference implementation of
trec_eval's definitions (ties by docid descending, unjudged documents, graded relevance), and hybrid fusion:
normalisation, interpolation and the weight search on toy cases whose optimum is known."""

from __future__ import annotations

import math
import random

import pytest

from lit_docemb.eval.fusion import (
    choose_weight,
    cross_validated_fusion,
    hashed_folds,
    interpolate,
    normalise,
    weight_curve,
)
from lit_docemb.eval.ranking import (
    RETRIEVAL_MEASURES,
    per_query_metrics,
    retrieval_metrics,
    trec_measure,
)

# --- hand-computed values ------------------------------------------------------------------------------------------

# q1: ranking u1 (unjudged), n1, a, u2, n2, b, n3; relevant a, b; judged non-relevant n1, n2, n3; c relevant, missed
QRELS = {"q1": {"a": 1, "b": 1, "c": 1, "n1": 0, "n2": 0, "n3": 0}, "q2": {"d": 2, "e": 1, "f": 0}, "q3": {"g": 1},
         "q4": {"h": 0}}
RUN = {"q1": {"u1": 7.0, "n1": 6.0, "a": 5.0, "u2": 4.0, "n2": 3.0, "b": 2.0, "n3": 1.0},
       "q2": {"e": 0.9, "d": 0.8, "f": 0.7},
       "q4": {"h": 1.0}}  # q3 retrieves nothing, q4 has no relevant document


def test_measures_match_hand_computed_values():
    m = per_query_metrics(RUN, QRELS, ["mrr@10", "mrr@2", "P@5", "recall@5", "map", "ndcg@2", "ndcg@10", "bpref"])
    assert set(m) == {"q1", "q2", "q3"}  # judged queries only
    q1, q2, q3 = m["q1"], m["q2"], m["q3"]
    assert q1["mrr@10"] == pytest.approx(1 / 3) and q1["mrr@2"] == 0.0  # first relevant at rank 3
    assert q1["P@5"] == pytest.approx(1 / 5) and q1["recall@5"] == pytest.approx(1 / 3)
    assert q1["map"] == pytest.approx((1 / 3 + 2 / 6) / 3)  # precision at a (rank 3) and b (rank 6), R = 3
    # bpref: R = 3, N = 3; unjudged u1, u2 are ignored; a has 1 judged non-relevant above, b has 2; c not retrieved
    assert q1["bpref"] == pytest.approx(((1 - 1 / 3) + (1 - 2 / 3) + 0) / 3)
    dcg = 1 / math.log2(4) + 1 / math.log2(7)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert q1["ndcg@10"] == pytest.approx(dcg / ideal)
    # q2, graded: e (1) then d (2); trec_eval's gain is the relevance value itself
    assert q2["ndcg@2"] == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert q2["mrr@10"] == 1.0 and q2["map"] == pytest.approx(1.0) and q2["bpref"] == 1.0
    assert all(v == 0.0 for v in q3.values())  # nothing retrieved: 0, and still counted
    means = retrieval_metrics(RUN, QRELS, ["mrr@10", "bpref"])
    assert means["mrr@10"] == pytest.approx((1 / 3 + 1 + 0) / 3) and means["queries"] == 3


def test_ties_are_broken_by_docid_descending_as_trec_eval_does():
    qrels, run = {"q": {"a": 1, "z": 0}}, {"q": {"a": 1.0, "z": 1.0}}  # same score: z ranks before a
    m = per_query_metrics(run, qrels, ["mrr@1", "mrr@2", "P@1", "ndcg@1", "bpref"])["q"]
    assert m == {"mrr@1": 0.0, "mrr@2": 0.5, "P@1": 0.0, "ndcg@1": 0.0, "bpref": 0.0}


def test_measure_names_and_errors():
    assert trec_measure("ndcg@20") == ("ndcg_cut.20", None) and trec_measure("mrr@10") == ("recip_rank", 10)
    assert trec_measure("P@5") == ("P.5", None) and trec_measure("bpref") == ("bpref", None)
    for bad in ("ndcg@0", "mrr", "precision@5", "P@x"):
        with pytest.raises(ValueError, match="unknown measure"):
            trec_measure(bad)
    with pytest.raises(ValueError, match="no query of the qrels has a relevant"):
        retrieval_metrics({"q": {"a": 1.0}}, {"q": {"a": 0}})


# --- an independent implementation of trec_eval's definitions, on random runs -------------------------------------

def _reference(run: dict[str, float], qrels: dict[str, int], name: str) -> float:
    order = [d for d, _ in sorted(sorted(run.items(), reverse=True), key=lambda item: -item[1])]
    relevant = {d for d, r in qrels.items() if r > 0}
    base, _, cut = name.partition("@")
    k = int(cut) if cut else len(order)
    top = order[:k]
    if base == "mrr":
        return next((1 / (i + 1) for i, d in enumerate(top) if d in relevant), 0.0)
    if base == "P":
        return sum(d in relevant for d in top) / k
    if base == "recall":
        return sum(d in relevant for d in top) / len(relevant)
    if base == "ndcg":
        dcg = sum(qrels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(top) if qrels.get(d, 0) > 0)
        ideal = sorted((r for r in qrels.values() if r > 0), reverse=True)[:k]
        return dcg / sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    if base == "map":
        hits, total = 0, 0.0
        for i, d in enumerate(order):
            if d in relevant:
                hits += 1
                total += hits / (i + 1)
        return total / len(relevant)
    if base == "bpref":
        non_relevant = {d for d, r in qrels.items() if r <= 0}
        bound, seen, total = min(len(relevant), len(non_relevant)), 0, 0.0
        for d in order:
            if d in non_relevant:
                seen += 1
            elif d in relevant:
                total += 1 - min(seen, len(relevant)) / bound if bound else 1.0
        return total / len(relevant)
    raise AssertionError(name)


def test_every_default_measure_equals_trec_eval_definitions_on_random_runs():
    rng = random.Random(0)
    documents = [f"d{i:02d}" for i in range(40)]
    qrels, run = {}, {}
    for q in range(30):
        judged = rng.sample(documents, 12)
        qrels[f"q{q}"] = {d: rng.choice([0, 0, 1, 2]) for d in judged}
        qrels[f"q{q}"][judged[0]] = 1  # at least one relevant
        # coarse scores: many ties; most retrieved documents are unjudged
        run[f"q{q}"] = {d: float(rng.randint(0, 6)) for d in rng.sample(documents, 25)}
    measures = [*RETRIEVAL_MEASURES, "mrr@3", "ndcg@5", "recall@10"]
    ours = per_query_metrics(run, qrels, measures)
    for qid, judgements in qrels.items():
        for name in measures:
            assert ours[qid][name] == pytest.approx(_reference(run[qid], judgements, name), abs=1e-9), (qid, name)


# --- fusion --------------------------------------------------------------------------------------------------------

def test_normalisation():
    assert normalise({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert normalise({"a": 5.0, "b": 5.0}) == {"a": 1.0, "b": 1.0}
    z = normalise({"a": 1.0, "b": 3.0}, "z_score")
    assert z == {"a": -1.0, "b": 1.0}
    with pytest.raises(ValueError, match="unknown normalisation"):
        normalise({"a": 1.0}, "rank")


def test_interpolation_scores_a_missing_document_as_its_lists_minimum():
    dense, sparse = {"q": {"a": 10.0, "b": 0.0}}, {"q": {"b": 3.0, "c": 1.0}}
    fused = interpolate(dense, sparse, 0.25)["q"]
    # dense: a 1, b 0, (c 0); bm25: b 1, c 0, (a 0)
    assert fused == pytest.approx({"a": 0.25, "b": 0.75, "c": 0.0})
    assert list(interpolate(dense, sparse, 0.25, depth=2)["q"]) == ["b", "a"]
    assert interpolate(dense, {}, 1.0)["q"] == pytest.approx({"a": 1.0, "b": 0.0})
    with pytest.raises(ValueError, match="weight"):
        interpolate(dense, sparse, 1.5)


def _toy(relevant_score: float) -> tuple[dict, dict, dict]:
    """One query whose relevant document r is first only when 1 - s < weight < s (dense favours x, BM25 y)."""
    dense = {"q": {"r": relevant_score, "x": 1.0, "y": 0.0}}
    sparse = {"q": {"r": relevant_score, "x": 0.0, "y": 1.0}}
    return dense, sparse, {"q": {"r": 1, "x": 0, "y": 0}}


def test_weight_search_finds_the_known_optimum():
    dense, sparse, qrels = _toy(0.51)  # r wins only for 0.49 < weight < 0.51: on the grid, 0.5 alone
    assert choose_weight(dense, sparse, qrels, "mrr@1") == (0.5, 1.0)
    curve = weight_curve(dense, sparse, qrels, "mrr@1")
    assert [w for w, v in curve.items() if v == 1.0] == [0.5] and len(curve) == 21
    # BM25 alone and dense alone rank r second
    assert curve[0.0] == curve[1.0] == 0.0
    # a tie goes to the first weight of the grid
    dense, sparse, qrels = _toy(0.7)  # 0.3 < weight < 0.7
    assert choose_weight(dense, sparse, qrels, "mrr@1", weights=[0.0, 0.6, 0.4, 1.0]) == (0.6, 1.0)


def test_cross_validation_chooses_each_folds_weight_on_the_other_folds():
    # queries a*: r wins for weight ~0.5; queries b*: dense alone is right (BM25 ranks an irrelevant doc first)
    dense, sparse, qrels = {}, {}, {}
    for i in range(3):
        d, s, j = _toy(0.51)
        dense[f"a{i}"], sparse[f"a{i}"], qrels[f"a{i}"] = d["q"], s["q"], j["q"]
    dense["b0"], sparse["b0"], qrels["b0"] = {"r": 1.0, "x": 0.0}, {"x": 1.0, "r": 0.0}, {"r": 1, "x": 0}
    folds = [["a0", "b0"], ["a1"], ["a2"]]
    fused, weights = cross_validated_fusion(dense, sparse, qrels, folds, "mrr@1")
    # fold 1 is tuned on a1, a2 alone (only 0.5 ranks r first); every fold's weight is the best on the other folds
    for index, fold in enumerate(folds):
        tuning = {q: qrels[q] for q in qrels if q not in fold}
        assert weights[index] == choose_weight(dense, sparse, tuning, "mrr@1")[0]
        for q in fold:
            assert fused[q] == pytest.approx(interpolate({q: dense[q]}, {q: sparse[q]}, weights[index])[q])
    assert weights[0] == 0.5 and set(fused) == set(qrels)
    with pytest.raises(ValueError, match="no judged query"):
        cross_validated_fusion(dense, sparse, {"a0": qrels["a0"]}, [["a0"]], "mrr@1")


def test_hashed_folds_partition_the_queries_stably():
    ids = [f"q{i}" for i in range(100)]
    folds = hashed_folds(ids, 5)
    assert sorted(q for fold in folds for q in fold) == sorted(ids) and all(10 < len(f) < 30 for f in folds)
    assert hashed_folds(list(reversed(ids)), 5) == folds
    with pytest.raises(ValueError, match="at least 2 folds"):
        hashed_folds(ids, 1)
