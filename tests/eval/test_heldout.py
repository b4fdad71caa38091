"""HeldOutRetrieval as an Evaluation (``evaluate --evaluation heldout`` and before/after during ``fit``), and its
target-rank metrics against the trec_eval ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from runs import Letters, collate_letters

from lit_docemb.data.core.document import Document, Section
from lit_docemb.eval.evaluation import EvaluationContext
from lit_docemb.eval.heldout import HeldOutRetrieval, evaluate_heldout, target_rank_metrics
from lit_docemb.eval.ranking import retrieval_metrics


def test_target_rank_metrics_equal_the_trec_eval_measures_without_ties():
    queries, candidates = torch.randn(9, 6, generator=torch.Generator().manual_seed(3)), torch.randn(
        15, 6, generator=torch.Generator().manual_seed(4))
    targets = torch.tensor([0, 3, 5, 7, 9, 11, 13, 14, 2])
    ours = target_rank_metrics(queries, candidates, targets, k=5)
    scores = torch.nn.functional.normalize(queries, dim=-1) @ torch.nn.functional.normalize(candidates, dim=-1).T
    run = {f"q{i}": {f"c{j}": float(scores[i, j]) for j in range(15)} for i in range(9)}
    qrels = {f"q{i}": {f"c{int(t)}": 1} for i, t in enumerate(targets)}
    trec = retrieval_metrics(run, qrels, ["mrr@5", "recall@1", "recall@5"])
    assert ours == pytest.approx({k: trec[k] for k in ("mrr@5", "recall@1", "recall@5")}, abs=1e-6)
    assert 0 < ours["mrr@5"] < 1


TOPICS = ["aaaa aaa", "eeee eee", "iiii iii", "oooo ooo", "uuuu uuu", "ae ae ae"]


class HeldOut:
    documents = None
    val_set = [Document(f"d{i}", f"{t} title", [Section("", f"{t} body text {t}"), Section("", f"more {t}")])
               for i, t in enumerate(TOPICS)]


def letters(texts: list[str]) -> torch.Tensor:
    return collate_letters([Document(str(i), sections=[Section("", t)]) for i, t in enumerate(texts)]).vectors


def test_heldout_evaluation_reports_evaluate_heldout_of_the_method():
    evaluation = HeldOutRetrieval(batch_size=2, max_documents=5, k=3)
    metrics = evaluation.evaluate(EvaluationContext(Letters(), HeldOut()))
    expected = evaluate_heldout(letters, HeldOut.val_set[:5], k=3)
    assert metrics.pop("heldout/seconds") >= 0
    assert metrics == pytest.approx({f"heldout/{k}": v for k, v in expected.items()})
    assert metrics["heldout/candidates"] == 5 and metrics["heldout/summary/queries"] == 5
    assert 0 < metrics["heldout/mrr@3"] <= 1


class Recorder:
    def __init__(self) -> None:
        self.logged: list[dict] = []

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.logged.append(metrics)


def test_heldout_before_after_delta_and_a_resume_keeps_before(capsys):
    method, logger = Letters(), Recorder()
    trainer = type("Trainer", (), {"datamodule": HeldOut(), "loggers": [logger], "global_step": 7})()
    callback = HeldOutRetrieval(k=3)
    callback.on_train_start(trainer, method)
    before = callback.before
    with torch.no_grad():
        method.scale.fill_(2.0)  # cosine ignores the scale: after == before
    callback.on_train_end(trainer, method)
    assert [sorted(m)[0].split("/")[1] for m in logger.logged] == ["before", "after", "delta"]
    delta = logger.logged[2]
    assert delta["heldout/delta/mrr@3"] == pytest.approx(0.0) and delta["heldout/delta/candidates"] == 0
    assert logger.logged[0]["heldout/before/mrr@3"] == pytest.approx(before["mrr@3"])
    captured = capsys.readouterr()
    printed = captured.out
    assert "held-out retrieval, before training: 100%" in captured.err  # each measurement shows its progress
    assert "held-out retrieval, after training: 100%" in captured.err
    assert printed.count("| mrr@3 |") == 1
    title = printed.splitlines()[0]
    assert title == ("Held-out retrieval before and after training: 6 held-out documents (never trained on), "
                     "6 summary and 0 section queries")
    meanings = [line.split(":")[0] for line in printed.splitlines()[1:] if line and not line.startswith("|")]
    assert meanings == ["mrr@3", "recall@1", "recall@3", "mean_cosine", "summary/"]  # no section query here
    resumed = HeldOutRetrieval(k=3)
    resumed.load_state_dict(callback.state_dict())
    resumed.on_train_start(trainer, method)
    assert resumed.before is before or resumed.before == before
    assert len(logger.logged) == 3  # nothing measured again
    assert np.isfinite(before["mean_cosine"])
