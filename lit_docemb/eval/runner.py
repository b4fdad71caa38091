"""Which evaluations a run gets, and running them: the registry of evaluations by name (:data:`EVALUATIONS`), what a
DataModule supports when none is named (:func:`default_evaluations` for ``evaluate``, :func:`validation_evaluations`
for ``interpolate``), one pass of several evaluations over shared embeddings (:func:`run_evaluations`) and the
before/after report of ``evaluate --before_after`` (:func:`compare_with_start`). The commands parse their arguments
and call these (:mod:`lit_docemb.commands.evaluate`, :mod:`lit_docemb.commands.interpolate`).

What they ask of a DataModule is its contract, :class:`~lit_docemb.data.core.contract.EvaluationData`: whether it
ranks queries (``ranked_split``), whether its splits are pairs (``pair_splits``), whether its documents are labelled
(:class:`~lit_docemb.data.core.contract.LabelledDocuments`) and what splits it has.
"""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import torch

from lit_docemb import distributed as dist
from lit_docemb.data.core.contract import EvaluationData, LabelledDocuments
from lit_docemb.errors import ConfigError
from lit_docemb.eval.before_after import candidate_tasks, compare, measure, write_report
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext
from lit_docemb.eval.heldout import HeldOutRetrieval
from lit_docemb.eval.labelled import Clustering, LinearProbe
from lit_docemb.eval.matching import DocumentMatching
from lit_docemb.eval.retrieval import RetrievalEvaluation
from lit_docemb.methods.checkpoints import read_checkpoint, restore_method

log = logging.getLogger(__name__)

EVALUATIONS: dict[str, str] = {
    "clustering": "lit_docemb.eval.labelled.Clustering",
    "linear_probe": "lit_docemb.eval.labelled.LinearProbe",
    "few_shot": "lit_docemb.eval.labelled.FewShot",
    "retrieval": "lit_docemb.eval.retrieval.RetrievalEvaluation",
    "labelled": "lit_docemb.eval.labelled.LabelledEmbeddingEvaluation",
    "candidate_ranking": "lit_docemb.eval.candidates.CandidateRanking",
    "matching": "lit_docemb.eval.matching.DocumentMatching",
    "validation_matching": "lit_docemb.eval.matching.ValidationMatching",
    "heldout": "lit_docemb.eval.heldout.HeldOutRetrieval",
}
"""Evaluations by short name (their ``name``) -> class path, imported only when used; a new one registers here."""


def default_evaluations(data: EvaluationData) -> list[Evaluation]:
    """Retrieval on the test queries for a ranking DataModule (its validation queries when it has no test split,
    as MSMARCO without the TREC DL topics); matching for one of labelled pairs; clustering and
    the linear probe for a labelled one; held-out retrieval on the validation split for an unlabelled corpus.
    A corpus with none of these is a :class:`ConfigError` naming what it lacks."""
    split = data.ranked_split()
    if split == "test":
        return [RetrievalEvaluation(split="test")]
    if split == "val":  # a ranking DataModule (a RankingCorpus) without test queries
        if data.val_split or data.val_queries_from_train:  # the splits query_split("val") reads, not read here
            log.info("%s has no test queries: ranking its validation queries", type(data).__name__)
            return [RetrievalEvaluation(split="val")]
        raise ConfigError(f"evaluate: {type(data).__name__} has neither test nor validation queries to rank: give it "
                          "test queries (its test_* files) or a validation split (val_split, val_queries_from_train)")
    if data.pair_splits():  # labelled document pairs (AAN's LRA matching task, CoLDE's matching split)
        return [DocumentMatching()]
    if data.test_set is not None or isinstance(data, LabelledDocuments):
        evaluate_on = "test" if data.test_set is not None else "val"
        return [Clustering(evaluate_on=evaluate_on), LinearProbe(evaluate_on=evaluate_on)]
    if data.val_set:
        return [HeldOutRetrieval()]
    raise ConfigError(f"evaluate: {type(data).__name__} has no query split, no labels, no document pairs and no "
                      "validation documents to evaluate on: give it a validation split (data.init_args.val_fraction) "
                      "for --evaluation heldout, or use a labelled or ranking corpus (--evaluation "
                      f"{', '.join(EVALUATIONS)})")


def validation_evaluations(data: EvaluationData) -> list[Evaluation]:
    """What ``data`` supports on its validation split: retrieval of its validation queries, clustering and the
    linear probe on validation documents, or held-out retrieval; a :class:`ConfigError` otherwise."""
    if data.ranked_split() is not None:  # a ranking DataModule: its validation queries
        return [RetrievalEvaluation(split="val")]
    if isinstance(data, LabelledDocuments) or data.test_set is not None:
        return [Clustering(evaluate_on="val"), LinearProbe(evaluate_on="val")]
    if data.val_set:
        return [HeldOutRetrieval()]
    raise ConfigError(f"interpolate: {type(data).__name__} has no validation split to choose α on: give it one "
                      "(data.init_args.val_fraction) or pass --evaluation")


def run_evaluations(evaluations: list[Evaluation], context: EvaluationContext) -> dict[str, dict[str, float]]:
    """{name: metrics} of each evaluation on one context (embeddings shared); names repeated get a suffix. An
    evaluation that finds the corpus unsuitable (a ``ValueError`` naming what it lacks) stops the command in one
    line (:class:`ConfigError`) naming the evaluation."""
    results: dict[str, dict[str, float]] = {}
    for evaluation in evaluations:
        name, n = evaluation.name, 2
        while name in results:
            name, n = f"{evaluation.name}_{n}", n + 1
        log.info("running %s", name)
        try:
            metrics = evaluation.evaluate(context)
        except ConfigError:
            raise
        except ValueError as err:
            raise ConfigError(f"evaluation {name} cannot run on {type(context.data).__name__}: {err}") from err
        results[name] = {k: float(v) for k, v in metrics.items()}  # numpy scalars: JSON-ready
    return results


def load_checkpoint_vocabulary(method: L.LightningModule, path: str) -> None:
    """What the method keeps beside its weights in a checkpoint, read by its own ``on_load_checkpoint`` (DECA's and
    CTPE's vocabularies, which size their embedding tables), without the weights."""
    if type(method).on_load_checkpoint is not L.LightningModule.on_load_checkpoint:
        method.on_load_checkpoint(read_checkpoint(path))


def compare_with_start(method: L.LightningModule, data: EvaluationData, ckpt_path: str, output_dir: Path,
                       batch_size: int = 64, device: str | torch.device = "cpu", resamples: int = 1000,
                       evaluations: list | None = None) -> dict[str, dict[str, float]]:
    """The before/after report of ``evaluate --before_after``: ``method`` as built (before; with the checkpoint's
    vocabulary when the method keeps one, as DECA's Doc2VecC, whose tables it sizes) and with the weights of
    ``ckpt_path`` (after), on ``device``, also on the candidate tasks of the config's
    ``evaluations``; printed and written to ``output_dir``; returns ``{"before_after": {<metric>/<field>: value}}``."""
    data.setup_evaluation()
    tasks = candidate_tasks(evaluations or [])
    load_checkpoint_vocabulary(method, ckpt_path)
    before = measure(method.to(device).eval(), data, batch_size, tasks=tasks)
    restore_method(method, ckpt_path)
    after = measure(method.to(device).eval(), data, batch_size, tasks=tasks)
    rows = compare(before, after, resamples)
    title = f"Before and after training: {type(method).__name__} as its config builds it and `{ckpt_path}`"
    if dist.rank() == 0:
        print(write_report(output_dir, rows, after.notes, title, resamples, (before.seconds, after.seconds))
              + f"written to {output_dir}/before_after.md and before_after.json")
    return {"before_after": {f"{row['metric']}/{key}": row[key] for row in rows
                             for key in ("before", "after", "change", "low", "high")}}
