"""Ranking metrics (trec_eval semantics through pytrec_eval) against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from lit_docemb.eval.ranking import paper_ranking_metrics, rank_and_score, ranking_metrics, top_k_run

QRELS = {"q1": {"a": 1, "b": 1, "c": 1, "n": 0}, "q2": {"d": 1}, "q3": {"e": 1}, "q4": {"f": 0}}
RUN = {"q1": {"a": 0.9, "n": 0.8, "b": 0.7}, "q2": {"y": 0.9, "d": 0.5, "z": 0.1}, "q4": {"f": 1.0}}


def test_metrics_match_a_hand_computed_example():
    m = ranking_metrics(RUN, QRELS, k=3)
    # q1: a, (n), b of 3 relevant; q2: d at rank 2 of 1 relevant; q3: nothing retrieved; q4 has no relevant doc
    p = [2 / 3, 1 / 3, 0.0]
    r = [2 / 3, 1.0, 0.0]
    ap = [(1 / 1 + 2 / 3) / 3, (1 / 2) / 1, 0.0]
    ndcg = [(1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3) + 1 / math.log2(4)), (1 / math.log2(3)) / 1, 0.0]
    # bpref: q1 has 1 judged non-relevant doc (n), ranked above b: a scores 1, b 1 - 1/1 = 0, c missing 0
    #        q2 has no judged non-relevant document: d scores 1
    bpref = [(1 + 0 + 0) / 3, 1.0, 0.0]
    mean = lambda xs: sum(xs) / 3  # noqa: E731
    assert m["P@3"] == pytest.approx(mean(p))
    assert m["recall@3"] == pytest.approx(mean(r))
    assert m["f1@3"] == pytest.approx(2 * mean(p) * mean(r) / (mean(p) + mean(r)))  # 10/24
    assert m["f1@3"] == pytest.approx(10 / 24)
    assert m["map"] == pytest.approx(mean(ap))
    assert m["ndcg"] == pytest.approx(mean(ndcg))
    assert m["bpref"] == pytest.approx(mean(bpref))
    assert m["queries"] == 3 and m["unjudged_queries"] == 1


def test_paper_f1_is_the_harmonic_mean_of_mean_precision_and_recall():
    # CTPE Table 2, arXiv: P 0.3066, R 0.1124, F1 0.1645
    precision, recall = 0.3066, 0.1124
    assert 2 * precision * recall / (precision + recall) == pytest.approx(0.1645, abs=5e-5)


def test_top_k_run_keeps_the_best_and_never_the_query_itself():
    scores = torch.tensor([[0.9, 0.1, 0.5, 0.7], [0.2, 0.3, 0.1, 0.0]])
    run = top_k_run(scores, ["a", "q"], ["a", "b", "c", "d"], k=2)
    assert run == {"a": {"d": pytest.approx(0.7), "c": pytest.approx(0.5)},
                   "q": {"b": pytest.approx(0.3), "a": pytest.approx(0.2)}}
    with pytest.raises(ValueError, match="scores"):
        top_k_run(scores, ["a"], ["a", "b", "c", "d"])


def test_no_relevant_judgement_is_an_error():
    with pytest.raises(ValueError, match="no query of the qrels has a relevant"):
        ranking_metrics({"q": {"a": 1.0}}, {"q": {"a": 0}})


def test_paper_formulas_match_a_hand_computed_example():
    # q1 ranks a, n, b, m, c (c last): relevant a, b, c of 5 candidates; q2's one relevant d is second of 5
    candidate_ids = ["a", "b", "c", "n", "m"]
    scores = torch.tensor([[0.9, 0.7, 0.1, 0.8, 0.5], [0.2, 0.1, 0.0, 0.05, 0.3]])
    qrels = {"q1": {"a": 1, "b": 1, "c": 1}, "q2": {"a": 1, "zzz": 1}, "q3": {"b": 0}}
    m = paper_ranking_metrics(scores, ["q1", "q2"], candidate_ids, qrels, k=3)
    # k = 3: q1's list a, n, b: AP (1 + 2/3) / min(3, 3); q2's list m, a, b: AP (1/2) / min(2, 3) (zzz is not a
    # candidate but counts in R)
    assert m["paper_map@3"] == pytest.approx(((1 + 2 / 3) / 3 + (1 / 2) / 2) / 2)
    ideal = [1, 1 / math.log2(3), 1 / math.log2(4)]
    ndcg = [(1 + 1 / math.log2(4)) / sum(ideal), (1 / math.log2(3)) / sum(ideal[:2])]
    assert m["paper_ndcg@3"] == pytest.approx(sum(ndcg) / 2)
    # bpref over the whole ranking: q1 (N = 2): a 1, b 1 - 1/2, c 1 - 2/2 → 1.5 / 3; q2 (N = 4 non-relevant among
    # the candidates): a has m above → 1 - 1/4, zzz is not in the pool → 0, over R = 2
    assert m["paper_bpref"] == pytest.approx((1.5 / 3 + 0.75 / 2) / 2)


def test_paper_bpref_of_a_random_ranking_is_one_half_and_trec_evals_is_near_zero():
    # CTPE Table 3's random rows: bpref 0.48 with the paper's formula; trec_eval's bpref of a top-20 list ~ 0
    generator = torch.Generator().manual_seed(0)
    candidate_ids = [f"c{j}" for j in range(4000)]
    query_ids = [f"q{i}" for i in range(60)]
    qrels = {qid: {f"c{j}": 1 for j in torch.randperm(4000, generator=generator)[:40].tolist()} for qid in query_ids}
    scores = torch.rand(60, 4000, generator=generator)
    m = rank_and_score(scores, query_ids, candidate_ids, qrels, k=20)
    assert m["paper_bpref"] == pytest.approx(0.5, abs=0.03)
    assert m["bpref"] < 0.02 and m["paper_map@20"] < 0.02 and m["paper_ndcg@20"] < 0.03


def test_paper_map_divides_by_the_relevant_papers_the_list_can_hold():
    # 40 relevant papers, the top 20 all relevant: the paper's MAP is 1, trec_eval's is 20/40
    candidate_ids = [f"c{j}" for j in range(100)]
    scores = torch.arange(100, 0, -1, dtype=torch.float32)[None]
    qrels = {"q": {f"c{j}": 1 for j in range(40)}}
    m = rank_and_score(scores, ["q"], candidate_ids, qrels, k=20)
    assert m["paper_map@20"] == pytest.approx(1.0) and m["paper_ndcg@20"] == pytest.approx(1.0)
    assert m["map"] == pytest.approx(0.5) and m["paper_bpref"] == pytest.approx(1.0)
