"""Shared retrieval support: queries, TREC qrels and runs, folds, negative sampling.

Fixture files are written in the real formats with invented ids and text."""

from __future__ import annotations

import bz2
import gzip
import json
from collections import Counter

import numpy as np
import pytest

from lit_docemb.data.retrieval.bm25 import bm25_run
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import MalformedInputError, ReadContext
from lit_docemb.data.retrieval.datamodule import NegativeSampler, read_run_pools
from lit_docemb.data.retrieval.trec import (
    QueryRecord,
    ranked,
    read_folds,
    read_qrels,
    read_queries,
    read_run,
    write_run,
)


def test_queries_tsv_gz_and_csv_with_bad_lines_counted(tmp_path):
    tsv = tmp_path / "queries.tsv.gz"
    with gzip.open(tsv, "wt") as f:
        f.write("17\thow do  kites fly\n\n42\twhat is a\tpinwheel\nno tab here\n43\t   \n17\tagain\n")
    stats: Counter = Counter()
    queries = read_queries(tsv, stats)
    assert queries == {"17": QueryRecord("17", "how do kites fly"), "42": QueryRecord("42", "what is a pinwheel")}
    assert stats == Counter(malformed_query_line=1, empty_query=1, duplicate_query_id=1)

    csv_path = tmp_path / "queries.csv"
    csv_path.write_text('id_left,text_left\n5,"kites, pinwheels and ""tops"""\n6,a paper boat\n7\n')
    stats = Counter()
    assert read_queries(csv_path, stats) == {"5": QueryRecord("5", 'kites, pinwheels and "tops"'),
                                             "6": QueryRecord("6", "a paper boat")}
    assert stats == Counter(malformed_query_line=1)
    with pytest.raises(MalformedInputError, match=r"queries\.csv, line 4: 1 field\(s\); expected a CSV row"):
        read_queries(csv_path, strict=True)
    (tmp_path / "noheader.csv").write_text("5,kites\n")
    with pytest.raises(MalformedInputError, match="line 1: header.*id_left,text_left"):
        read_queries(tmp_path / "noheader.csv")
    with pytest.raises(FileNotFoundError, match="expected a queries file"):
        read_queries(tmp_path / "missing.tsv")


def test_qrels_parsing_and_bad_lines(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("301 0 DOC-1 1\n301 0 DOC-2 0\n302\t0\tDOC-3\t2\n\n302 0 DOC-3 1\n303 0 DOC-4\n303 0 DOC-5 high\n")
    stats: Counter = Counter()
    assert read_qrels(path, stats) == {"301": {"DOC-1": 1, "DOC-2": 0}, "302": {"DOC-3": 2}}
    assert stats == Counter(duplicate_qrels_entry=1, malformed_qrels_line=2)
    with pytest.raises(MalformedInputError, match=r"qrels\.txt, line 5: \(302, DOC-3\) judged twice; expected TREC"):
        read_qrels(path, strict=True)


def test_run_round_trip_ties_and_depth(tmp_path):
    run = {"q2": {"d1": 0.5, "d2": 1.25, "d3": 1.25, "d10": -3.0}, "q1": {"x": 1e-17, "y": 2 / 3}}
    for name in ("run.txt", "run.txt.gz"):
        write_run(run, tmp_path / name, run_name="dense")
        assert read_run(tmp_path / name) == run
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert lines[0] == f"q1 Q0 y 1 {2 / 3!r} dense"
    # ties by docid, descending: d3 before d2, as trec_eval orders them
    assert [line.split()[2:4] for line in lines[2:]] == [["d3", "1"], ["d2", "2"], ["d1", "3"], ["d10", "4"]]
    assert ranked(run["q2"])[0] == ("d3", 1.25)
    assert read_run(tmp_path / "run.txt", depth=2) == {"q2": {"d3": 1.25, "d2": 1.25}, "q1": run["q1"]}
    assert read_run(tmp_path / "run.txt", query_ids={"q1"}) == {"q1": run["q1"]}
    with pytest.raises(ValueError, match="run_name"):
        write_run(run, tmp_path / "bad.run", run_name="two words")


def test_written_ranks_are_the_ranks_trec_eval_evaluates(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run = {"q": {"a": 1.0, "b": 1.0, "c": 0.5}}
    qrels = {"q": {"a": 1}}
    write_run(run, tmp_path / "tie.run")
    first = (tmp_path / "tie.run").read_text().split()[2]
    precision = pytrec_eval.RelevanceEvaluator(qrels, {"P_1"}).evaluate(run)["q"]["P_1"]
    assert precision == (1.0 if first == "a" else 0.0) == 0.0


def test_bad_run_lines_are_counted_or_raised(tmp_path):
    path = tmp_path / "bm25.res"
    path.write_bytes(b"1 Q0 D1 1 3.5 bm25\n1 Q0 D2 2 nan bm25\n1 Q0 D3 x 2.0 bm25\n1 Q0 D1 3 1.0 bm25\n"
                     b"2 Q0 D\xff 1 1.0 bm25\n1 Q0 D4 4\n")
    stats: Counter = Counter()
    assert read_run(path, stats) == {"1": {"D1": 3.5}, "2": {"D\ufffd": 1.0}}
    assert stats == Counter(malformed_run_line=3, duplicate_run_entry=1, undecodable_line=1)
    with pytest.raises(MalformedInputError, match=r"bm25\.res, line 2: .*expected TREC run 'qid Q0 docid rank score"):
        read_run(path, strict=True)
    with pytest.raises(FileNotFoundError, match="expected a run file in TREC run"):
        read_run(tmp_path / "none.res")


def test_bzip2_files_and_fallback_decoding(tmp_path):
    path = tmp_path / "qrels.bz2"
    path.write_bytes(bz2.compress(b"1 0 a 1\n"))
    assert read_qrels(path) == {"1": {"a": 1}}
    context = ReadContext(fallback_encoding="latin-1")
    assert [context.decode(line, "line") for line in (b"ok\n", b"caf\xe9\n")] == ["ok\n", "café\n"]
    assert context.stats == Counter(line_decoded_with_fallback_encoding=1)


def test_folds_in_json_and_text_layouts(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps([["301", "302"], ["303"], [304, "305"]]))
    (tmp_path / "dict.json").write_text(json.dumps({"fold1": ["301"], "fold2": ["302", "303"]}))
    (tmp_path / "folds.txt").write_text("# one fold per line\n301 302\n\n303, 304  # trailing note\n")
    assert read_folds(tmp_path / "list.json") == [["301", "302"], ["303"], ["304", "305"]]
    assert read_folds(tmp_path / "dict.json") == [["301"], ["302", "303"]]
    assert read_folds(tmp_path / "folds.txt") == [["301", "302"], ["303", "304"]]
    (tmp_path / "overlap.json").write_text(json.dumps([["301", "302"], ["302"]]))
    with pytest.raises(ValueError, match="query 302 is in folds 1 and 2"):
        read_folds(tmp_path / "overlap.json")
    (tmp_path / "empty.json").write_text(json.dumps([["301"], [], {"fold": 3}]))
    with pytest.raises(ValueError, match="fold 3 must be a list of query ids"):
        read_folds(tmp_path / "empty.json")
    (tmp_path / "empty.json").write_text(json.dumps({"fold1": ["301"], "fold2": [], "fold3": ["302"]}))
    assert read_folds(tmp_path / "empty.json") == [["301"], [], ["302"]]  # an empty fold is the caller's to judge
    with pytest.raises(FileNotFoundError, match="folds file"):
        read_folds(tmp_path / "nofolds.json")


def test_uniform_negatives_never_relevant_distinct_and_deterministic():
    relevant = [np.array([0, 1, 2]), np.array([5]), np.arange(3, 20)]
    sampler = NegativeSampler(corpus_size=20, relevant=relevant, num_negatives=3, seed=11)
    for query in range(3):
        draws = [sampler.sample(query, epoch, 0) for epoch in range(30)]
        for negatives in draws:
            assert len(set(negatives)) == 3 and not set(negatives) & set(relevant[query].tolist())
            assert all(0 <= n < 20 for n in negatives)
        assert len({tuple(d) for d in draws}) > 1  # epochs differ
        assert draws == [NegativeSampler(20, relevant, 3, seed=11).sample(query, e, 0) for e in range(30)]
    other_seed = NegativeSampler(20, relevant, 3, seed=12)
    assert [sampler.sample(0, e, 0) for e in range(10)] != [other_seed.sample(0, e, 0) for e in range(10)]
    with pytest.raises(ValueError, match="cannot draw 4 negatives"):
        NegativeSampler(20, relevant, num_negatives=4)


def test_pool_negatives_stay_in_the_pool_and_are_topped_up():
    relevant = [np.array([0]), np.array([1])]
    pools = [np.array([7, 8, 9, 10]), np.array([3])]
    sampler = NegativeSampler(50, relevant, num_negatives=2, seed=0, pools=pools)
    seen = set()
    for epoch in range(40):
        negatives = sampler.sample(0, epoch, 0)
        assert set(negatives) <= {7, 8, 9, 10} and len(set(negatives)) == 2
        seen |= set(negatives)
        short = sampler.sample(1, epoch, 0)  # pool of one: topped up uniformly
        assert short[0] == 3 and short[1] not in (1, 3)
    assert seen == {7, 8, 9, 10}


def test_run_pools_keep_the_top_by_score_and_count_unknown_documents(tmp_path):
    run = tmp_path / "top.run"
    run.write_text("a Q0 d3 3 1.0 r\na Q0 d1 1 9.0 r\nb Q0 d2 1 4.0 r\na Q0 d2 2 5.0 r\na Q0 zz 4 0.5 r\n"
                   "c Q0 d1 1 1.0 r\n")
    stats: Counter = Counter()
    pools = read_run_pools(run, {"d1": 0, "d2": 1, "d3": 2}, {"a": 0, "b": 1, "x": 2}, depth=2, stats=stats)
    assert [p.tolist() for p in pools] == [[0, 1], [1], []]
    assert stats == Counter(run_document_missing_from_corpus=1)


def test_bm25_run_ranks_the_matching_document_first():
    pytest.importorskip("bm25s")
    docs = [Document(f"d{i}", sections=[Section("", text)]) for i, text in enumerate([
        "the copper kettle whistles on the stove", "a wooden canoe drifts down the river",
        "migrating geese cross the autumn sky", "the river otter builds a den of reeds"])]
    run = bm25_run(docs, {"q1": QueryRecord("q1", "canoe on a river"), "q2": QueryRecord("q2", "kettle")}, depth=3)
    assert ranked(run["q1"])[0][0] == "d1" and list(run["q2"]) == ["d0"]  # zero scores are not listed


def test_bm25_run_takes_k1_and_b():
    pytest.importorskip("bm25s")
    docs = [Document("short", sections=[Section("", "river canoe")]),
            Document("long", sections=[Section("", "river canoe " + "reeds otter geese sky " * 10)])]
    query = {"q": QueryRecord("q", "river canoe")}
    normalised, unnormalised = bm25_run(docs, query, k1=0.9, b=1.0)["q"], bm25_run(docs, query, k1=0.9, b=0.0)["q"]
    assert normalised["short"] > normalised["long"]  # b: the long document's matches count less
    assert unnormalised["short"] == pytest.approx(unnormalised["long"])  # b = 0: length is ignored
