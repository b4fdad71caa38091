"""The before/after report: the starting encoder (the method as its config builds it, no checkpoint) and the
trained one scored side by side on every task the corpus supports, with the change and a paired bootstrap 95%
interval per metric (:mod:`lit_docemb.eval.bootstrap`), as one table.

Tasks, each run when the corpus can serve it (otherwise one line of the report says what it lacks):

* ``retrieval``: with judged queries (a ranking DataModule: MSMARCO, Robust04, WIKIR), dense retrieval of the test
  split's queries (its validation queries without a test split), MRR@k and nDCG@10 per query. Without them,
  self-supervised queries on the evaluated documents (:func:`lit_docemb.eval.heldout.build_task`): a document's
  one-line summary, else its title, must find its body (``summary``), and a section cut out of a document must find
  the rest of it (``section``; a document of one section is cut at its middle word into two); MRR@k and recall@1
  per query.
* ``ranking`` for each candidate task folder the run evaluates on (CTPE's ``CandidateRanking``): each test document
  ranks the candidate pool; MAP and P@20 per query.
* ``clustering`` and ``probe`` when documents carry labels: k-means (k = number of labels) and a logistic regression
  fitted on the training documents (at most ``max_documents``), scored on the evaluated documents: NMI and purity of
  the clusters, accuracy of the probe.
* ``matching`` when the corpus has labelled document pairs: the cosine threshold chosen on the validation pairs,
  accuracy and F1 on the test pairs.

The evaluated documents are the DataModule's labelled test split when it has one, else its validation split (the
held-out documents, never trained on). Every item is scored by both models, so one draw of items serves both and
the interval is that of the change. A document the method cannot represent (CTPE without a split point) is a zero
vector, for both models alike (left out of ``ranking``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch import Tensor

from lit_docemb import distributed as dist
from lit_docemb.data.core.contract import EvaluationData, PairSplit
from lit_docemb.data.core.datamodule import DocumentDataModule, documents_at
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.retrieval.datamodule import RetrievalDataModule
from lit_docemb.errors import ConfigError, write_whole_text
from lit_docemb.eval.bootstrap import ItemScores, paired_bootstrap
from lit_docemb.eval.candidates import CandidateRanking, CandidateTask, read_candidate_task
from lit_docemb.eval.classification import kmeans_assignments, probe_predictions
from lit_docemb.eval.embedding import embed_rows, embed_with_ids
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext
from lit_docemb.eval.heldout import build_task, stop_live_progress_bar, target_ranks
from lit_docemb.eval.matching import best_threshold, cosine_scores, dataset_pairs, embeddings_by_id
from lit_docemb.eval.ranking import per_query_metrics, top_k_run
from lit_docemb.eval.retrieval import RetrievalEvaluation, split_qrels

MEANINGS = {
    "retrieval/summary": "a document's one-line summary (its title when it has none) must find its body",
    "retrieval/section": "a section cut out of a document must find the rest of that document",
    "retrieval/qrels": "the corpus's judged queries, ranked against its whole collection",
    "clustering": "k-means on the embeddings against the documents' labels",
    "probe": "a logistic regression on the frozen embeddings predicting the label",
    "matching": "a cosine threshold chosen on validation pairs decides whether two documents match",
    "ranking": "each test document of a candidate task folder ranks the candidate pool (CTPE's task)",
}
"""Task -> one line saying what it measures (printed under the table for the tasks it has)."""


@dataclass
class Measurement:
    """One model's per-item scores on every task the corpus supports.

    Attributes:
        metrics: ``<task>/<metric>`` -> per-item scores.
        notes: One line per task the corpus cannot serve, saying what it lacks.
        seconds: How long the measurement took.
    """

    metrics: dict[str, ItemScores] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"metrics": {k: v.to_json() for k, v in self.metrics.items()}, "notes": self.notes,
                "seconds": self.seconds}

    @classmethod
    def from_json(cls, record: dict) -> Measurement:
        return cls({k: ItemScores.from_json(v) for k, v in record["metrics"].items()}, list(record["notes"]),
                   record.get("seconds", 0.0))


def _embed(method: L.LightningModule, documents: Sequence[Document], batch_size: int) -> Tensor:
    """(N, D) fp32 embeddings on the CPU, one row per document (several vectors of a document concatenated; a
    document the method cannot represent is zeros)."""
    embedded, _ = embed_rows(method, documents, batch_size, sharded=True)
    return embedded.reshape(len(documents), -1).float().cpu()


def _embed_texts(method: L.LightningModule, texts: Sequence[str], batch_size: int) -> Tensor:
    return _embed(method, [Document(str(i), sections=[Section("", text)]) for i, text in enumerate(texts)], batch_size)


def in_two_parts(doc: Document) -> Document:
    """A document of one non-empty section cut at its middle word into two sections, so that its second half can
    query for its first (a page of OpenWebText has neither a title nor sections); other documents as they are."""
    sections = [s for s in doc.sections if s.text.strip()]
    if len(sections) != 1:
        return doc
    words = sections[0].text.split()
    halves = [Section(sections[0].heading, " ".join(words[:len(words) // 2])), Section("", " ".join(
        words[len(words) // 2:]))]
    return Document(doc.id, doc.title, halves, doc.label, doc.metadata)


def heldout_retrieval(method: L.LightningModule, documents: Sequence[Document], batch_size: int = 64,
                      k: int = 10) -> dict[str, ItemScores]:
    """Per-query MRR@k and recall@1 of the summary and section queries of ``documents`` ({} when none); a document
    of one section is cut in two first (:func:`in_two_parts`)."""
    task = build_task([in_two_parts(doc) for doc in documents])
    if not task.candidates or not task.queries:
        return {}
    candidates = _embed_texts(method, task.candidates, batch_size)  # (N, D)
    ranks = target_ranks(_embed_texts(method, task.queries, batch_size), candidates,
                         torch.tensor(task.targets)).numpy()  # (Q,)
    kinds, scores = np.array(task.kinds), {}
    for kind in ("summary", "section"):
        rank = ranks[kinds == kind]
        if len(rank):
            scores[f"retrieval/{kind}/mrr@{k}"] = ItemScores("mean", np.where(rank <= k, 1.0 / rank, 0.0))
            scores[f"retrieval/{kind}/recall@1"] = ItemScores("mean", (rank == 1).astype(float))
    return scores


def judged_retrieval(method: L.LightningModule, data: RetrievalDataModule, batch_size: int = 64,
                     k: int = 10) -> dict[str, ItemScores]:
    """Per-query MRR@k and nDCG@10 of dense retrieval on the test queries (the validation ones without)."""
    split = data.ranked_split()
    qrels = split_qrels(data.query_split(split))
    run = RetrievalEvaluation(split=split).dense_run(EvaluationContext(method, data, None, batch_size), split)
    values = per_query_metrics(run, qrels, [f"mrr@{k}", "ndcg@10"])
    queries = sorted(values)
    return {f"retrieval/qrels/{name}": ItemScores("mean", np.array([values[q][name] for q in queries]))
            for name in (f"mrr@{k}", "ndcg@10")}


def candidate_ranking(method: L.LightningModule, task: CandidateTask, k: int = 20,
                      batch_size: int = 64) -> dict[str, ItemScores]:
    """Per-query MAP and P@k (the paper's measures) of the task folder's test documents ranking its candidates with
    the method's own similarity (CTPE §4.1; :mod:`lit_docemb.eval.candidates`); documents the method cannot
    represent are left out (the same for both models: which ones depends on the text, not on the weights)."""
    candidate_ids, candidates, _ = embed_with_ids(method, task.candidates, batch_size)
    query_ids, queries, _ = embed_with_ids(method, [d for d in task.queries if d.id in task.qrels], batch_size)
    scores = method.similarity(queries.to(method.device), candidates.to(method.device)).cpu()  # (Q, N)
    values = per_query_metrics(top_k_run(scores, query_ids, candidate_ids, k), {q: task.qrels[q] for q in query_ids},
                               ["map", f"P@{k}"])
    queries = sorted(values)
    return {f"ranking/{name}": ItemScores("mean", np.array([values[q][name] for q in queries]))
            for name in ("map", f"P@{k}")}


def labelled_tasks(method: L.LightningModule, fit: Sequence[Document], evaluated: Sequence[Document],
                   batch_size: int = 64, seed: int = 0) -> dict[str, ItemScores]:
    """Per-document k-means (label, cluster) rows and probe correctness of the labelled ``evaluated`` documents,
    both fitted on the labelled ``fit`` documents."""
    fit_x, evaluated_x = _embed(method, fit, batch_size), _embed(method, evaluated, batch_size)
    fit_y, evaluated_y = [d.label for d in fit], np.array([d.label for d in evaluated])
    codes = {label: i for i, label in enumerate(sorted(set(fit_y) | set(evaluated_y)))}
    clusters = kmeans_assignments(fit_x, fit_y, evaluated_x, seed=seed)
    rows = np.stack([np.array([codes[y] for y in evaluated_y]), clusters], axis=1)  # (N, 2) label, cluster
    correct = (probe_predictions(fit_x, fit_y, evaluated_x) == evaluated_y).astype(float)
    return {"clustering/nmi": ItemScores("nmi", rows), "clustering/purity": ItemScores("purity", rows),
            "probe/accuracy": ItemScores("mean", correct)}


def matching_task(method: L.LightningModule, data: EvaluationData,
                  batch_size: int = 64) -> dict[str, ItemScores]:
    """Per-pair correctness and (predicted, label) rows on the test pairs at the threshold chosen on validation."""
    pairs = {"val_set": dataset_pairs(data.val_set), "test_set": dataset_pairs(data.test_set)}
    wanted = {i for rows in pairs.values() for a, b, _ in rows for i in (a, b)}
    corpus = data.val_set.documents
    documents = [corpus[i] for i in range(len(corpus)) if corpus[i].id in wanted]
    vectors = embeddings_by_id([d.id for d in documents], _embed(method, documents, batch_size))
    threshold = best_threshold(*cosine_scores(vectors, pairs["val_set"]))
    scores, labels = cosine_scores(vectors, pairs["test_set"])
    predicted = (scores >= threshold).astype(int)
    return {"matching/accuracy": ItemScores("mean", (predicted == labels).astype(float)),
            "matching/f1": ItemScores("f1", np.stack([predicted, labels], axis=1))}


def _documents(dataset, limit: int | None, corpus=None) -> list[Document]:
    """The documents of a split, at most ``limit`` of them evenly spaced through it (a corpus stored class by class
    keeps every class); [] for none or a split of pairs. A split whose items are a method's cached rows (DocSplit's
    sentences, CoLDE's sections, Graph-RoBERTa's passages) gives the documents of ``corpus`` (the DataModule's
    ``documents``) behind them."""
    if dataset is None or isinstance(dataset, PairSplit) or not len(dataset):
        return []
    n = len(dataset)
    rows = range(n) if limit is None or n <= limit else np.linspace(0, n - 1, limit).round().astype(int).tolist()
    return documents_at(dataset, rows, corpus)


def candidate_tasks(evaluations: Sequence) -> list[CandidateTask]:
    """The task folders of the :class:`CandidateRanking` evaluations among ``evaluations`` (a trainer's callbacks)."""
    return [evaluation.task or read_candidate_task(evaluation.root) for evaluation in evaluations
            if isinstance(evaluation, CandidateRanking)]


def measure(method: L.LightningModule, data: DocumentDataModule, batch_size: int = 64,
            max_documents: int | None = 2_000, k: int = 10, seed: int = 0,
            tasks: Sequence[CandidateTask] = ()) -> Measurement:
    """Every task ``data`` (set up, or a ranking DataModule) supports, scored per item with ``method``.

    Args:
        method: The method, on its device.
        data: Its DataModule.
        batch_size: Documents embedded per forward pass.
        max_documents: At most this many evaluated documents, and this many training documents to fit the
            clustering and the probe (None: all).
        k: Cut-off of MRR@k.
        seed: Seed of k-means.
        tasks: Candidate-ranking task folders the run evaluates on (CTPE's; :func:`candidate_tasks`).
    """
    measured, started = Measurement(), time.perf_counter()
    _measure_tasks(measured, method, data, batch_size, max_documents, k, seed, tasks)
    measured.seconds = time.perf_counter() - started
    return measured


def _measure_tasks(measured: Measurement, method: L.LightningModule, data: DocumentDataModule, batch_size: int,
                   max_documents: int | None, k: int, seed: int, tasks: Sequence[CandidateTask]) -> None:
    """Fills ``measured`` (see :func:`measure`)."""
    for task in tasks:
        measured.metrics |= candidate_ranking(method, task, 20, batch_size)
    split = data.ranked_split()
    if split is not None:  # judged queries: ranked against the corpus, which has no document labels
        if data.query_split(split) is None:
            measured.notes.append("retrieval: the ranking corpus has neither test nor validation queries")
        else:
            measured.metrics |= judged_retrieval(method, data, batch_size, k)
        measured.notes.append("clustering, probe: a ranking corpus has no document labels")
        return
    corpus = data.documents
    evaluated = (_documents(data.test_set, max_documents, corpus)
                 or _documents(data.val_set, max_documents, corpus))
    retrieval = heldout_retrieval(method, evaluated, batch_size, k) if evaluated else {}
    measured.metrics |= retrieval
    if not retrieval:
        measured.notes.append("retrieval: no held-out document has a summary, a title or a second section to "
                              "query with (more held-out documents: data.init_args.val_fraction)")
    fit = [d for d in _documents(data.train_set, max_documents, corpus) if d.label is not None]
    labelled = [d for d in evaluated if d.label is not None]
    if len({d.label for d in fit}) >= 2 and labelled:
        measured.metrics |= labelled_tasks(method, fit, labelled, batch_size, seed)
        if len(labelled) < len(evaluated):
            measured.notes.append(f"clustering, probe: {len(labelled)} of {len(evaluated)} evaluated documents "
                                  "carry a label; the others are left out")
    else:
        measured.notes.append("clustering, probe: the documents carry no labels (or one label only), so there is "
                              "nothing to cluster or predict")
    if isinstance(data.val_set, PairSplit) and data.test_set is not None:
        measured.metrics |= matching_task(method, data, batch_size)


def compare(before: Measurement, after: Measurement, resamples: int = 1000, seed: int = 0) -> list[dict]:
    """One row per metric both measured: ``metric``, ``items``, ``before``, ``after``, ``change``, ``low``,
    ``high`` (the paired bootstrap 95% interval of the change)."""
    rows = []
    for name, scores in after.metrics.items():
        if name in before.metrics:
            change, low, high = paired_bootstrap(before.metrics[name], scores, resamples, seed)
            rows.append({"metric": name, "items": len(scores.values), "before": before.metrics[name].value(),
                         "after": scores.value(), "change": change, "low": low, "high": high})
    return rows


def markdown(rows: list[dict], notes: Sequence[str], title: str, resamples: int,
             seconds: Sequence[float] = ()) -> str:
    """The report as a titled Markdown table, the notes, one line per task saying what it measures and, given the
    ``seconds`` of the two measurements, how long they took."""
    lines = [f"## {title}", "", "| metric | items | before | after | change | 95% interval of the change |",
             "|---|---:|---:|---:|---:|---|"]
    for row in rows:
        lines.append(f"| {row['metric']} | {row['items']} | {row['before']:.4f} | {row['after']:.4f} | "
                     f"{row['change']:+.4f} | [{row['low']:+.4f}, {row['high']:+.4f}] |")
    lines += ["", f"Intervals: paired bootstrap over the items (queries, documents, pairs), {resamples} resamples."]
    lines += [f"{task}: {meaning}" for task, meaning in MEANINGS.items() if any(r["metric"].startswith(task + "/")
                                                                                for r in rows)]
    lines += list(notes)
    if not rows:
        lines.append("No task: the corpus offers no queries, labels or document pairs to score.")
    if seconds:
        lines.append("Measured in " + " and ".join(f"{s:.1f} s" for s in seconds) + " (before, after).")
    return "\n".join(lines) + "\n"


def write_report(folder: str | Path, rows: list[dict], notes: Sequence[str], title: str, resamples: int,
                 seconds: Sequence[float] = ()) -> str:
    """Writes ``before_after.md`` and ``before_after.json`` into ``folder`` and returns the Markdown."""
    text = markdown(rows, notes, title, resamples, seconds)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_whole_text(folder / "before_after.md", text)
    record = {"title": title, "resamples": resamples, "rows": rows, "notes": list(notes), "seconds": list(seconds)}
    write_whole_text(folder / "before_after.json", json.dumps(record, indent=2) + "\n")
    return text


class BeforeAfterReport(Evaluation):
    """The before/after report during ``fit``: every task measured when training starts (the encoder as the config
    builds it; a resumed run keeps its first start's) and when it ends, then printed, logged to the run's loggers
    as ``before_after/<task>/<metric>/{before,after,change,low,high}`` and written to
    ``<default_root_dir>/evaluation/before_after.{md,json}``. ``python -m lit_docemb evaluate --before_after`` makes
    the same report for any run folder.

    Args:
        batch_size: Documents embedded per forward pass.
        max_documents: At most this many evaluated and this many fitting documents (None: all).
        k: Cut-off of MRR@k.
        resamples: Bootstrap resamples of the intervals.
        seed: Seed of the resamples and of k-means.
    """

    name = "before_after"

    def __init__(self, batch_size: int = 64, max_documents: int | None = 2_000, k: int = 10, resamples: int = 1000,
                 seed: int = 0) -> None:
        super().__init__(every_n_epochs=None, batch_size=batch_size)
        if (max_documents is not None and max_documents < 2) or k < 1 or resamples < 1:
            raise ConfigError(f"{type(self).__name__} init_args.max_documents (>= 2 or null), k (>= 1) and resamples "
                              f"(>= 1): got {max_documents}, {k}, {resamples}")
        self.max_documents, self.k, self.resamples, self.seed = max_documents, k, resamples, seed
        self.before: Measurement | None = None
        self.rows: list[dict] | None = None

    def measure(self, method: L.LightningModule, data: DocumentDataModule,
                tasks: Sequence[CandidateTask] = ()) -> Measurement:
        return measure(method, data, self.batch_size, self.max_documents, self.k, self.seed, tasks)

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        """One model's value of every metric (no comparison)."""
        return {name: scores.value() for name, scores in self.measure(context.method, context.data).metrics.items()}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.before is None:
            self.before = self.measure(pl_module, trainer.datamodule, candidate_tasks(trainer.callbacks))

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        after = self.measure(pl_module, trainer.datamodule, candidate_tasks(trainer.callbacks))
        self.rows = compare(self.before, after, self.resamples, self.seed)
        for logger in trainer.loggers:
            logger.log_metrics({f"before_after/{row['metric']}/{key}": row[key] for row in self.rows
                                for key in ("before", "after", "change", "low", "high")}, step=trainer.global_step)
        stop_live_progress_bar(trainer, pl_module, training_ended=True)  # the table comes after the bar
        if dist.rank() == 0:
            title = f"Before and after training ({type(pl_module).__name__}, step {trainer.global_step})"
            print(write_report(Path(trainer.default_root_dir) / "evaluation", self.rows, after.notes, title,
                               self.resamples, (self.before.seconds, after.seconds)), flush=True)

    def state_dict(self) -> dict:
        return {"before": None if self.before is None else self.before.to_json()}

    def load_state_dict(self, state_dict: dict) -> None:
        before = state_dict.get("before")
        self.before = None if before is None else Measurement.from_json(before)
