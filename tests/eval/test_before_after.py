"""The before/after report: the paired bootstrap (interval around the change, narrower with more items), every task
row on a labelled fixture, one line for what an unlabelled corpus lacks, matching on pairs, and the callback (logs,
files, a resume keeps its first "before")."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from journeys import write_ctpe_task
from runs import Letters

from lit_docemb.data.corpora.aan import AANDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.eval.before_after import (
    BeforeAfterReport,
    Measurement,
    candidate_ranking,
    compare,
    in_two_parts,
    measure,
)
from lit_docemb.eval.candidates import evaluate_candidates, read_candidate_task
from lit_docemb.eval.bootstrap import ItemScores, paired_bootstrap, pooled_paired_bootstrap
from lit_docemb.eval.classification import kmeans_clustering, linear_probe


def reciprocal_ranks(n: int, seed: int) -> tuple[ItemScores, ItemScores]:
    """Before and after per-query reciprocal ranks of ``n`` queries, the after ones better by 0.1 on average."""
    rng = np.random.default_rng(seed)
    before = rng.choice([1.0, 0.5, 1 / 3, 0.25, 0.0], n)
    after = np.clip(before + rng.normal(0.1, 0.2, n), 0, 1)
    return ItemScores("mean", before), ItemScores("mean", after)


def test_the_interval_contains_the_change_and_narrows_with_more_queries():
    widths = []
    for n in (40, 160, 640):
        before, after = reciprocal_ranks(n, seed=n)
        change, low, high = paired_bootstrap(before, after, resamples=400, seed=0)
        assert change == pytest.approx(after.values.mean() - before.values.mean())
        assert low < change < high
        widths.append(high - low)
    assert widths[0] > 1.5 * widths[1] > 2.25 * widths[2]  # about 1/sqrt(n): halves when n quadruples
    assert paired_bootstrap(before, after, resamples=400, seed=0) == paired_bootstrap(before, after, 400, seed=0)
    identical = paired_bootstrap(before, before, resamples=50)
    assert identical == (0.0, 0.0, 0.0)  # the same model: every draw changes nothing


def test_non_mean_statistics_resample_rows():
    rows = np.array([[0, 0], [0, 0], [1, 1], [1, 0], [2, 2], [2, 2]])
    nmi, purity = ItemScores("nmi", rows), ItemScores("purity", rows)
    assert purity.value() == pytest.approx(5 / 6)
    assert purity.value(np.array([0, 1, 2])) == 1.0
    assert 0 < nmi.value() < 1
    runs = ItemScores("purity", np.concatenate([rows, [[0], [0], [1], [1], [2], [2]]], axis=1))  # a second run
    assert runs.value() == pytest.approx((5 / 6 + 1.0) / 2)  # clusterings of several k-means runs: their mean
    assert ItemScores("nmi", rows[:, [0, 1, 1]]).value() == pytest.approx(nmi.value())
    f1 = ItemScores("f1", np.array([[1, 1], [1, 0], [0, 1], [0, 0]]))  # (predicted, label)
    assert f1.value() == pytest.approx(0.5)
    with pytest.raises(ValueError, match="paired scores"):
        paired_bootstrap(nmi, f1)


FAMILIES = {"a": "front", "e": "front", "i": "front", "o": "back", "u": "back"}


def document(i: int, vowel: str, other: str) -> Document:
    words = [vowel * 3] * 8 + [other] * (i % 3)
    return Document(f"{vowel}{i}", f"{vowel * 4} {other}", [Section("", " ".join(words)),
                                                           Section("more", " ".join([vowel * 2 + other] * 30))],
                    label=FAMILIES[vowel])


def corpus(labelled: bool = True) -> SimpleNamespace:
    def split(start: int, n: int) -> list[Document]:
        docs = [document(i, v, o) for i in range(start, start + n) for v in "aeiou" for o in ("x", "yy")]
        return docs if labelled else [Document(d.id, d.title, d.sections) for d in docs]

    return SimpleNamespace(train_set=split(0, 3), val_set=split(10, 2), test_set=None, documents=None,
                           ranked_split=lambda: None)  # no queries


class Shifted(Letters):
    """Letters with a constant added to every count: a different embedding of the same documents."""

    def embed(self, batch):
        return super().embed(batch) + 1.0


def test_a_labelled_corpus_gets_every_task_row_and_the_values_of_each_evaluation():
    data = corpus()
    before = measure(Letters(), data, batch_size=4)
    assert set(before.metrics) == {"retrieval/summary/mrr@10", "retrieval/summary/recall@1",
                                   "retrieval/section/mrr@10", "retrieval/section/recall@1",
                                   "clustering/nmi", "clustering/purity", "probe/accuracy"}
    assert before.notes == []
    vectors = {d.id: torch.tensor([d.text.count(c) + 0.1 for c in "aeiou"]) for d in data.train_set + data.val_set}
    fit_x = torch.stack([vectors[d.id] for d in data.train_set])
    test_x = torch.stack([vectors[d.id] for d in data.val_set])
    fit_y, test_y = [d.label for d in data.train_set], [d.label for d in data.val_set]
    clusters = kmeans_clustering(fit_x, fit_y, test_x, test_y)
    assert before.metrics["clustering/nmi"].value() == pytest.approx(clusters["nmi"])
    assert before.metrics["clustering/purity"].value() == pytest.approx(clusters["purity"])
    assert before.metrics["probe/accuracy"].value() == pytest.approx(linear_probe(fit_x, fit_y, test_x, test_y)[
        "accuracy"])
    assert len(before.metrics["retrieval/summary/mrr@10"].values) == len(data.val_set)
    rows = compare(before, measure(Shifted(), data, batch_size=4), resamples=200)
    assert [r["metric"] for r in rows] == list(before.metrics)
    for row in rows:
        assert row["after"] - row["before"] == pytest.approx(row["change"])
        assert row["low"] <= row["change"] <= row["high"]
    assert any(row["change"] != 0 for row in rows)


def test_fitting_documents_are_drawn_evenly_from_a_corpus_stored_class_by_class():
    data = corpus()
    data.train_set = sorted(data.train_set, key=lambda d: d.label)  # all "back" documents, then all "front"
    limited = measure(Letters(), data, batch_size=4, max_documents=4)
    assert limited.notes == [] and "probe/accuracy" in limited.metrics  # both labels among the 4 fitting documents
    assert len(limited.metrics["probe/accuracy"].values) == 4


def test_an_unlabelled_corpus_says_so_in_one_line():
    measured = measure(Letters(), corpus(labelled=False), batch_size=4)
    assert {name.split("/")[0] for name in measured.metrics} == {"retrieval"}
    assert len(measured.notes) == 1 and "carry no labels" in measured.notes[0]


def test_document_pairs_get_matching_rows(lra_dir, tmp_path):
    data = AANDataModule(source=str(lra_dir), mode="pairs", cache_dir=str(tmp_path / "cache"), num_workers=0)
    data.setup("fit")
    measured = measure(Letters(), data, batch_size=4)
    assert {"matching/accuracy", "matching/f1"} <= set(measured.metrics)
    assert len(measured.metrics["matching/accuracy"].values) == len(data.test_set)
    assert 0 <= measured.metrics["matching/accuracy"].value() <= 1


def test_candidate_tasks_rank_as_the_candidate_evaluation_does(tmp_path):
    task, method = read_candidate_task(write_ctpe_task(tmp_path / "task")), Letters()
    rows = candidate_ranking(method, task, k=20, batch_size=4)
    expected = evaluate_candidates(method, task, k=20, batch_size=4)
    assert rows["ranking/map"].value() == pytest.approx(expected["map"])
    assert rows["ranking/P@20"].value() == pytest.approx(expected["P@20"])
    assert len(rows["ranking/map"].values) == expected["queries"] > 1


def test_a_document_of_one_section_is_cut_in_two():
    one = Document("p", "", [Section("", " ".join(f"w{i}" for i in range(61)))], label="x")
    halves = in_two_parts(one)
    assert [len(s.text.split()) for s in halves.sections] == [30, 31] and halves.label == "x"
    assert halves.text.split() == one.text.split()
    two = document(0, "a", "x")
    assert in_two_parts(two) is two


class Recorder:
    def __init__(self) -> None:
        self.logged: list[dict] = []

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.logged.append(metrics)


def test_callback_prints_logs_and_writes_the_report_and_a_resume_keeps_before(tmp_path, capsys):
    logger = Recorder()
    trainer = SimpleNamespace(datamodule=corpus(), loggers=[logger], global_step=4, default_root_dir=str(tmp_path),
                              callbacks=[])
    callback = BeforeAfterReport(batch_size=4, resamples=100)
    callback.on_train_start(trainer, Letters())
    callback.on_train_end(trainer, Shifted())
    printed = capsys.readouterr().out
    assert printed.count("| probe/accuracy |") == 1 and "| clustering/nmi |" in printed
    assert "Intervals: paired bootstrap over the items (queries, documents, pairs), 100 resamples." in printed
    record = json.loads((tmp_path / "evaluation" / "before_after.json").read_text())
    assert [row["metric"] for row in record["rows"]] == [row["metric"] for row in callback.rows]
    assert (tmp_path / "evaluation" / "before_after.md").read_text() in printed
    assert "s (before, after)." in printed and len(record["seconds"]) == 2 and min(record["seconds"]) > 0
    logged = logger.logged[0]
    assert logged["before_after/probe/accuracy/change"] == pytest.approx(callback.rows[-1]["change"])
    assert {f"before_after/clustering/nmi/{key}" for key in ("before", "after", "change", "low", "high")} <= set(logged)

    resumed = BeforeAfterReport(batch_size=4, resamples=100)
    resumed.load_state_dict(json.loads(json.dumps(callback.state_dict())))  # as a checkpoint keeps it
    resumed.on_train_start(trainer, Shifted())  # the first start's "before" is kept, not measured again
    resumed.on_train_end(trainer, Shifted())
    assert [row["before"] for row in resumed.rows] == pytest.approx([row["before"] for row in callback.rows])
    assert isinstance(resumed.before, Measurement)


def test_a_ranking_corpus_gets_its_judged_queries_ranked_or_one_line_without_them(tmp_path):
    from corpus_files import write_msmarco

    from lit_docemb.data.corpora.msmarco import MSMARCODataModule

    root, cache = str(write_msmarco(tmp_path / "msmarco")), str(tmp_path / "cache")
    data = MSMARCODataModule(root, test_queries="msmarco-test2019-queries.tsv.gz", test_qrels="2019qrels-docs.txt",
                             cache_dir=cache, num_workers=0)
    measured = measure(Letters(), data, batch_size=4)
    assert set(measured.metrics) == {"retrieval/qrels/mrr@10", "retrieval/qrels/ndcg@10"}
    assert len(measured.metrics["retrieval/qrels/mrr@10"].values) == 3  # the three test queries, not the dev ones
    assert measured.notes == ["clustering, probe: a ranking corpus has no document labels"]
    unjudged = measure(Letters(), MSMARCODataModule(root, val_split=None, cache_dir=cache), batch_size=4)
    assert unjudged.metrics == {} and unjudged.notes == [
        "retrieval: the ranking corpus has neither test nor validation queries",
        "clustering, probe: a ranking corpus has no document labels"]


def test_pooled_bootstrap_averages_runs_and_narrows_with_them():
    """Runs with different seeds, each on its own items: the mean change, each run's items resampled per draw."""
    rng = np.random.default_rng(0)
    runs = [(ItemScores("mean", rng.random(50)), ItemScores("mean", rng.random(50) + shift)) for shift in (0.1, 0.3)]
    assert pooled_paired_bootstrap(runs[:1], 300, seed=4) == paired_bootstrap(*runs[0], 300, seed=4)
    change, low, high = pooled_paired_bootstrap(runs, 300, seed=4)
    each = [paired_bootstrap(before, after, 300, seed=4) for before, after in runs]
    assert change == pytest.approx((each[0][0] + each[1][0]) / 2)
    assert low <= change <= high and high - low < max(h - lo for _, lo, h in each)
    with pytest.raises(ValueError, match="same statistic and items"):
        pooled_paired_bootstrap([runs[0], (runs[1][0], ItemScores("mean", rng.random(3)))])
    with pytest.raises(ValueError, match="need pairs"):
        pooled_paired_bootstrap([])
