"""What ``evaluate``, ``interpolate`` and the before/after report ask a DataModule before and after evaluating it
(``setup_evaluation``, ``report_evaluation_reading``, ``ranked_split``), answered by a DataModule of documents and by
a ranking one as the commands decided when they tested for ``RetrievalDataModule``: documents are set up as for
``fit`` and rank no queries; a ranking corpus reads nothing until its evaluations read the corpus, which it then
reports, and ranks its test queries, else its validation ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_files import write_msmarco

from lit_docemb.data.corpora.jsonl import JSONLDataModule
from lit_docemb.data.corpora.msmarco import MSMARCODataModule

TEST_TOPICS = {"test_queries": "msmarco-test2019-queries.tsv.gz", "test_qrels": "2019qrels-docs.txt"}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(write_msmarco(tmp_path_factory.mktemp("msmarco")))


def test_documents_are_set_up_as_for_fit_and_rank_no_queries(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"text number {i}"}) + "\n" for i in range(8)))
    data = JSONLDataModule([str(path)], val_fraction=0.5, num_workers=0)
    assert data.ranked_split() is None
    data.setup_evaluation()
    assert len(data.train_set) + len(data.val_set) == 8 and len(data.train_set) > 0
    assert data.data_stats["documents"]["documents_read"] == 8
    reported = json.dumps(data.data_stats)
    data.report_evaluation_reading()  # setup reported what it read: nothing to add
    assert json.dumps(data.data_stats) == reported


@pytest.mark.parametrize("mode", ["documents", "retrieval"])
def test_a_ranking_corpus_reads_nothing_before_its_evaluations_and_reports_the_corpus_they_read(root, tmp_path, mode):
    data = MSMARCODataModule(root, mode=mode, cache_dir=str(tmp_path / "cache"), num_workers=0)
    data.setup_evaluation()
    assert data.train_set is None and data.corpus is None and data.data_stats == {}
    data.report_evaluation_reading()
    assert data.data_stats == {}  # nothing read yet, nothing reported
    data.corpus = data.load_documents()  # as the retrieval evaluations read it
    data.report_evaluation_reading()
    assert list(data.data_stats) == ["corpus"] and data.data_stats["corpus"]["documents_read"] == len(data.corpus)
    assert data.data_stats["corpus"]["skipped"]["empty_document"] == 1


def test_a_ranking_corpus_set_up_by_fit_reports_no_second_reading(root, tmp_path):
    data = MSMARCODataModule(root, mode="retrieval", cache_dir=str(tmp_path / "cache"), num_workers=0)
    data.setup("fit")
    reported = json.dumps(data.data_stats)
    data.report_evaluation_reading()
    assert list(data.data_stats) == ["examples"] and json.dumps(data.data_stats) == reported


def test_a_ranking_corpus_ranks_its_test_queries_else_its_validation_ones(root):
    with_test, dev = MSMARCODataModule(root, **TEST_TOPICS), MSMARCODataModule(root)
    held_out = MSMARCODataModule(root, val_split=None, val_queries_from_train=2)
    neither = MSMARCODataModule(root, val_split=None)
    assert [d.ranked_split() for d in (with_test, dev, held_out, neither)] == ["test", "val", "val", "val"]
    assert [sorted(d.query_split(d.ranked_split()).queries) for d in (with_test, dev)] == [
        ["70", "71", "72"], ["50", "51", "52"]]
    assert len(held_out.query_split("val").queries) == 2
    assert neither.query_split("val") is None  # the before/after report notes it; evaluate refuses it
