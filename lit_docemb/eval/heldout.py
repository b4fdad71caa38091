"""Before/after evaluation of a document embedder on held-out documents (documents training never saw).

Two retrieval tasks share one candidate set, the bodies of the held-out documents (title excluded):

* ``summary``: the document's one-line description written by its author (``metadata["summary"]``: the
  package ``Summary:``, the module docstring's summary line; the title when there is none, e.g. a reference
  topic's heading) must retrieve its body. The description is never part of the body (removed when the
  corpus is read, and again here if it occurs verbatim). This asks whether the document vector captures what
  the document is *about*, as a person would summarise it, a task different from the training objective.
* ``section``: one section of each multi-section document (chosen by a hash of the id, never the first)
  is cut out of its body and must retrieve the rest of that body among all candidates. This asks whether a
  passage and the rest of its document land together, i.e. whether the vector encodes the document's global
  topic rather than its local wording (the property DocSplit claims), measured on documents not trained on.

Both report MRR@k and recall@1 over the held-out queries; ``mrr@10`` is the mean of the two MRR@10s, and
``mean_cosine`` (mean cosine between different held-out documents) shows whether training spreads the
documents apart or collapses them together.
A method embeds queries and candidates with :func:`lit_docemb.eval.embedding.embed_documents` (length-sorted
batches, so padding costs little).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from torch import Tensor
from tqdm.auto import tqdm

from lit_docemb import distributed as dist
from lit_docemb.data.core.contract import EvaluationData
from lit_docemb.data.core.datamodule import documents_at, stable_fraction
from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import ConfigError
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext

Embedder = Callable[[list[str]], Tensor]


def heldout_split(documents: Sequence[Document], fraction: float = 0.2,
                  seed: int = 0) -> tuple[list[Document], list[Document]]:
    """Splits documents into (train, held-out) by a hash of their id: stable across runs, orders and machines,
    and identical to ``DocumentDataModule(val_fraction=fraction, seed=seed)``."""
    train, heldout = [], []
    for doc in documents:
        (heldout if stable_fraction(doc.id, seed) < fraction else train).append(doc)
    return train, heldout


@dataclass
class RetrievalTask:
    """Queries that each have exactly one relevant candidate.

    Attributes:
        candidates: Candidate texts (held-out document bodies).
        queries: Query texts, grouped by ``kinds`` (``"summary"`` / ``"section"``).
        targets: For each query, the index of its relevant candidate.
        kinds: For each query, the task it belongs to.
    """

    candidates: list[str]
    queries: list[str]
    targets: list[int]
    kinds: list[str]


def _pick_section(doc: Document, min_words: int) -> int | None:
    """Index of the probe section of ``doc``: a non-first section with ``min_words`` words, chosen by a hash."""
    eligible = [i for i, s in enumerate(doc.sections) if i > 0 and len(s.text.split()) >= min_words]
    if not eligible or sum(bool(s.text.strip()) for s in doc.sections) < 2:
        return None
    return eligible[int(stable_fraction(doc.id, seed=1) * len(eligible))]


def _without(text: str, phrase: str) -> str:
    return re.sub(re.escape(phrase), " ", text, flags=re.IGNORECASE) if len(phrase) > 3 else text


def build_task(documents: Sequence[Document], min_section_words: int = 30) -> RetrievalTask:
    """Builds the summary→document and section→rest-of-document queries of the held-out documents.

    Documents without body text are left out; a document whose probe section is cut out contributes the
    rest of its body as its candidate (for both tasks), the others their whole body.
    """
    task = RetrievalTask([], [], [], [])
    for doc in (d for d in documents if not d.is_empty()):
        summary = (doc.metadata.get("summary") or doc.title or "").strip()
        probe = _pick_section(doc, min_section_words)
        body = "\n\n".join(s.text for i, s in enumerate(doc.sections) if i != probe and s.text)
        queries = [(summary, "summary")] if summary else []
        if probe is not None:
            queries.append((doc.sections[probe].text, "section"))
        for text, kind in queries:
            task.queries.append(text)
            task.targets.append(len(task.candidates))
            task.kinds.append(kind)
        task.candidates.append(_without(body, summary) if summary else body)
    return task


def target_ranks(queries: Tensor, candidates: Tensor, targets: Tensor) -> Tensor:
    """(Q,) rank (1 = best) of each query's one relevant candidate, by cosine of (Q, D) query vectors against (N, D)
    candidates; ``targets`` (Q,). Ties are broken against the target."""
    scores = F.normalize(queries, dim=-1) @ F.normalize(candidates, dim=-1).T  # (Q, N)
    target_scores = scores.gather(1, targets[:, None])  # (Q, 1)
    others = torch.ones_like(scores, dtype=torch.bool).scatter_(1, targets[:, None], False)
    return ((scores >= target_scores) & others).sum(1) + 1  # (Q,) 1 = best


def target_rank_metrics(queries: Tensor, candidates: Tensor, targets: Tensor, k: int = 10) -> dict[str, float]:
    """The rank of each query's one relevant candidate as MRR@k and recall@1/@k of (Q, D) query vectors against (N, D) candidates by cosine; ``targets`` (Q,).

    Ties are broken against the target (a constant embedder scores 0 on MRR@k when N > k).
    """
    rank = target_ranks(queries, candidates, targets)
    reciprocal = torch.where(rank <= k, 1.0 / rank.float(), torch.zeros_like(rank, dtype=torch.float))
    return {f"mrr@{k}": reciprocal.mean().item(), "recall@1": (rank == 1).float().mean().item(),
            f"recall@{k}": (rank <= k).float().mean().item()}


def evaluate_heldout(embed: Embedder, documents: Sequence[Document], k: int = 10,
                     min_section_words: int = 30) -> dict[str, float]:
    """Evaluates ``embed`` (texts → (N, D) tensor, called once for the candidates and once for the queries) on
    held-out ``documents``.

    Returns ``{"summary/mrr@10", "summary/recall@1", "summary/recall@10", "section/...", "mrr@10",
    "summary/queries", "section/queries", "candidates", "mean_cosine"}``: ``mrr@10`` is the mean over the
    tasks that have queries; ``mean_cosine`` is the mean cosine between different candidates, a collapse
    diagnostic (it rises towards 1 when all documents drift to one region). The caller chooses the
    documents: pass only documents the embedder was not trained on, and put a model in eval mode first.
    """
    task = build_task(documents, min_section_words)
    if not task.candidates:
        raise ValueError("no held-out document has body text")
    candidates = embed(task.candidates).float().cpu()  # (N, D)
    queries = embed(task.queries).float().cpu() if task.queries else candidates[:0]  # (Q, D)
    targets = torch.tensor(task.targets, dtype=torch.long)
    normalised = F.normalize(candidates, dim=-1)
    n = len(task.candidates)
    off_diagonal = ((normalised @ normalised.T).sum() - n) / max(1, n * (n - 1))
    results: dict[str, float] = {"candidates": float(n), "mean_cosine": off_diagonal.item()}
    mrrs = []
    for kind in ("summary", "section"):
        mask = torch.tensor([q == kind for q in task.kinds], dtype=torch.bool)
        results[f"{kind}/queries"] = float(mask.sum())
        if mask.any():
            for name, value in target_rank_metrics(queries[mask], candidates, targets[mask], k).items():
                results[f"{kind}/{name}"] = value
            mrrs.append(results[f"{kind}/mrr@{k}"])
    results[f"mrr@{k}"] = sum(mrrs) / len(mrrs) if mrrs else 0.0
    return results


def metric_meanings(k: int = 10) -> dict[str, str]:
    """One line per metric of :meth:`HeldOutRetrieval.table` saying what it measures (higher is better except
    ``mean_cosine``)."""
    return {
        f"mrr@{k}": f"mean of 1/rank of the right document when it is in the top {k} (0 otherwise); higher is "
                    "better, 1 = always first; without a prefix, the mean of the summary and section tasks",
        "recall@1": "share of queries whose right document is ranked first",
        f"recall@{k}": f"share of queries whose right document is in the top {k}",
        "mean_cosine": "mean cosine similarity between different held-out documents; near 1 means the vectors "
                       "collapsed together",
        "summary/": "queries are a document's one-line description, e.g. a package's Summary: line",
        "section/": "queries are one section cut out of a document, to find the rest of it",
    }


@contextmanager
def progress_display(trainer: L.Trainer | None, description: str):
    """A progress bar for one measurement, as ``(add_total, advance)`` callables: a line of the trainer's Rich
    display while it is live (the sanity check's, the last epoch's), a Rich display of its own when the trainer's
    Rich bar is between two loops, else tqdm (on rank 0 only).

    Args:
        trainer: The trainer whose progress bar to join (None: tqdm).
        description: What is being measured, the bar's label.
    """
    bar = getattr(trainer, "progress_bar_callback", None)
    if not isinstance(bar, RichProgressBar) or not bar.is_enabled or dist.rank() != 0:
        line = tqdm(total=0, desc=description, unit="text", disable=dist.rank() != 0, dynamic_ncols=True)

        def add_total(n: int) -> None:
            line.total += n
            line.refresh()

        try:
            yield add_total, line.update
        finally:
            line.close()
        return
    live = bar.progress if bar.progress is not None and bar.progress.live.is_started else None
    if live is None:
        from rich.progress import Progress  # installed: the trainer shows a Rich bar

        display = Progress(*bar.configure_columns(trainer))
    else:
        display = live
    task = display.add_task(description, total=0)

    def add_total(n: int) -> None:
        total = next(t.total or 0 for t in display.tasks if t.id == task)
        display.update(task, total=total + n)

    if live is None:
        display.start()
    try:
        yield add_total, lambda n: display.update(task, advance=n, refresh=True)
    finally:
        display.stop_task(task)  # its time and rate stay those of the measurement
        if live is None:
            display.stop()


def stop_live_progress_bar(trainer: L.Trainer, pl_module: L.LightningModule, training_ended: bool = False) -> None:
    """Ends the progress bar on screen, so that what is printed next appears after it rather than inside it: a
    Rich bar's live display (the sanity check's, or the training epoch's; Lightning starts a new one for the next
    loop) and, once training ended, tqdm's training bar (Lightning would close it just after).

    Args:
        trainer: The trainer whose progress bar to end.
        pl_module: The method it trains.
        training_ended: Whether this is the end of training (tqdm's training bar exists and may be closed).
    """
    bar = getattr(trainer, "progress_bar_callback", None)
    if isinstance(bar, RichProgressBar):
        bar.teardown(trainer, pl_module, "fit")
    elif isinstance(bar, TQDMProgressBar) and training_ended and bar.is_enabled:
        bar.on_train_end(trainer, pl_module)


class HeldOutRetrieval(Evaluation):
    """Retrieval on the DataModule's held-out documents (its ``val_set``; see :func:`evaluate_heldout`).

    During ``fit`` it runs before training and after it, prints a before/after table and logs
    ``heldout/before/<metric>``, ``heldout/after/<metric>`` and ``heldout/delta/<metric>``; a resumed run keeps
    the "before" of its first start (callback state). ``python -m lit_docemb evaluate --evaluation heldout`` reports
    ``heldout/<metric>`` of a checkpoint. Every rank runs it (the texts are embedded in shards, one per rank).

    Args:
        batch_size: Texts embedded per forward pass.
        max_documents: Evaluate on at most this many held-out documents (None: all).
        k: Cut-off of MRR@k and recall@k.
    """

    name = "heldout"

    def __init__(self, batch_size: int = 32, max_documents: int | None = 2_000, k: int = 10) -> None:
        super().__init__(every_n_epochs=None, batch_size=batch_size)
        if (max_documents is not None and max_documents < 1) or k < 1:
            raise ConfigError(f"{type(self).__name__} init_args.max_documents (>= 1 or null) and init_args.k (>= 1): "
                              f"got {max_documents}, {k}")
        self.max_documents, self.k = max_documents, k
        self.before: dict[str, float] | None = None
        self.after: dict[str, float] | None = None

    def _measure(self, method: L.LightningModule, data: EvaluationData, trainer: L.Trainer | None = None,
                 description: str = "held-out retrieval") -> dict[str, float]:
        val_set = data.val_set
        n = len(val_set) if self.max_documents is None else min(len(val_set), self.max_documents)
        started = time.perf_counter()
        with progress_display(trainer, description) as (add_total, advance):
            def embed(texts: list[str]) -> Tensor:
                documents = [Document(str(i), sections=[Section("", text)]) for i, text in enumerate(texts)]
                add_total(len(texts))
                return embed_documents(method, documents, self.batch_size, sharded=True, progress=advance)

            documents = documents_at(val_set, range(n), data.documents)
            metrics = evaluate_heldout(embed, documents, k=self.k)
        return metrics | {"seconds": time.perf_counter() - started}

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        return {f"heldout/{k}": v for k, v in self._measure(context.method, context.data).items()}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.before is None:  # a resumed run keeps the figures of its first start
            self.before = self._measure(pl_module, trainer.datamodule, trainer, "held-out retrieval, before training")
            self._log(trainer, "before", self.before)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.after = self._measure(pl_module, trainer.datamodule, trainer, "held-out retrieval, after training")
        stop_live_progress_bar(trainer, pl_module, training_ended=True)  # the table below comes after the bar
        self._log(trainer, "after", self.after)
        if self.before is not None:
            delta = {k: self.after[k] - self.before[k] for k in self.after if k in self.before}
            self._log(trainer, "delta", delta)
            if dist.rank() == 0:
                print(self.table(), flush=True)

    def _log(self, trainer: L.Trainer, stage: str, metrics: dict[str, float]) -> None:
        for logger in trainer.loggers:
            logger.log_metrics({f"heldout/{stage}/{k}": v for k, v in metrics.items()}, step=trainer.global_step)

    def table(self) -> str:
        """The before/after metrics as a titled Markdown table, with what was measured on how many documents and
        one line saying what each metric means."""
        keys = [k for k in self.after if k.startswith(("summary/mrr", "summary/recall", "section/mrr",
                                                        "section/recall", "mrr", "mean_cosine"))]
        after = self.after
        lines = [f"Held-out retrieval before and after training: {int(after['candidates'])} held-out documents "
                 f"(never trained on), {int(after['summary/queries'])} summary and {int(after['section/queries'])} "
                 f"section queries",
                 "", "| held-out metric | before | after | change |", "|---|---:|---:|---:|"]
        for key in keys:
            before, now = self.before[key], after[key]
            lines.append(f"| {key} | {before:.4f} | {now:.4f} | {now - before:+.4f} |")
        lines.append("")
        lines += [f"{key}: {meaning}" for key, meaning in metric_meanings(self.k).items()
                  if any(k == key or k.endswith("/" + key) or key.endswith("/") and k.startswith(key) for k in keys)]
        return "\n".join(lines)

    def state_dict(self) -> dict:
        return {"before": self.before}

    def load_state_dict(self, state_dict: dict) -> None:
        self.before = state_dict.get("before")
