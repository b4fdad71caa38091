"""``pool-folds``: the TREC runs of a cross-validation's folds pooled into one run and scored (Graph-RoBERTa's
Table 3), on qrels and runs written in the TREC formats."""

from __future__ import annotations

import json

import pytest

from lit_docemb.commands import main
from lit_docemb.data.retrieval.trec import read_run, write_run

QRELS = "\n".join(f"{q} 0 {d} {r}" for q, d, r in [
    ("q1", "a", 1), ("q1", "b", 1), ("q1", "c", 0), ("q2", "a", 1), ("q2", "d", 2),
    ("q3", "e", 1), ("q3", "f", 1), ("q4", "a", 1), ("q4", "g", 1), ("q5", "a", 0)]) + "\n"


@pytest.fixture
def fold_runs(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    folds = [{"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"c": 2.0, "e": 1.0}},  # P@2: 1 and 0
             {"q3": {"e": 5.0, "x": 4.0, "f": 0.5}}]  # P@2: 0.5; q4 is ranked by no fold (scores 0)
    paths = []
    for index, run in enumerate(folds, 1):
        paths.append(tmp_path / f"fold{index}" / "evaluation" / "test.dense.run")
        write_run(run, paths[-1], run_name="dense")
    return tmp_path, [str(p) for p in paths]


def test_pooled_runs_are_scored_over_every_judged_query(fold_runs, capsys):
    root, runs = fold_runs
    results = main(["pool-folds", "--qrels", str(root / "qrels.txt"), "--measures", "P@2", "ndcg@20",
                    "--runs", *runs, "--output", str(root / "pooled")])
    assert results["pooled"]["P@2"] == pytest.approx((1 + 0 + 0.5 + 0) / 4)  # q5 has no relevant document
    assert results["pooled"]["queries"] == 4
    assert results["fold1"]["P@2"] == pytest.approx(0.5) and results["fold2"]["P@2"] == pytest.approx(0.5)
    assert results["fold_mean"]["P@2"] == pytest.approx(0.5) and results["fold_mean"]["queries"] == 3
    assert results["fold1"]["ndcg@20"] == pytest.approx(0.5)  # q1 ideal, q2 nothing relevant retrieved
    assert read_run(root / "pooled" / "pooled.run") == {**read_run(runs[0]), **read_run(runs[1])}
    assert json.loads((root / "pooled" / "pooled.json").read_text())["results"] == results
    printed = capsys.readouterr().out
    assert "| pooled | 0.3750 |" in printed and "pooled.md" in printed


@pytest.mark.parametrize("problem, message", [
    ("overlap", "--runs: query q1 is ranked by both"),
    ("measure", "--measures: unknown measure 'P20'"),
    ("missing", "--runs: "),
])
def test_bad_runs_stop_with_one_line(fold_runs, capsys, problem, message):
    root, runs = fold_runs
    measures = ["P20"] if problem == "measure" else ["P@2"]
    if problem == "overlap":
        write_run({"q1": {"a": 1.0}}, root / "again.run")
        runs = [*runs, str(root / "again.run")]
    if problem == "missing":
        runs = [*runs, str(root / "fold3" / "test.dense.run")]
    with pytest.raises(SystemExit) as exit_info:
        main(["pool-folds", "--qrels", str(root / "qrels.txt"), "--measures", *measures, "--runs", *runs])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: {message}") and "\n" not in error
