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
Queries and candidates are embedded in length-sorted chunks, so padding costs little.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.utilities import rank_zero_only
from torch import Tensor

from lit_docemb.data.datamodule import stable_fraction
from lit_docemb.data.document import Document, Section

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


@torch.no_grad()
def embed_sorted(embed: Embedder, texts: list[str], batch_size: int = 32) -> Tensor:
    """Embeds texts in chunks of similar length (less padding) and returns them in input order, (N, D)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    chunks = [embed([texts[i] for i in order[start:start + batch_size]]).float().cpu()
              for start in range(0, len(texts), batch_size)]
    sorted_embeddings = torch.cat(chunks)  # (N, D) in length order
    out = torch.empty_like(sorted_embeddings)
    out[torch.tensor(order)] = sorted_embeddings
    return out


def retrieval_metrics(queries: Tensor, candidates: Tensor, targets: Tensor, k: int = 10) -> dict[str, float]:
    """MRR@k and recall@1/@k of (Q, D) query vectors against (N, D) candidates by cosine; ``targets`` (Q,).

    Ties are broken against the target (a constant embedder scores 0 on MRR@k when N > k).
    """
    scores = F.normalize(queries, dim=-1) @ F.normalize(candidates, dim=-1).T  # (Q, N)
    target_scores = scores.gather(1, targets[:, None])  # (Q, 1)
    others = torch.ones_like(scores, dtype=torch.bool).scatter_(1, targets[:, None], False)
    rank = ((scores >= target_scores) & others).sum(1) + 1  # (Q,) 1 = best
    reciprocal = torch.where(rank <= k, 1.0 / rank.float(), torch.zeros_like(rank, dtype=torch.float))
    return {f"mrr@{k}": reciprocal.mean().item(), "recall@1": (rank == 1).float().mean().item(),
            f"recall@{k}": (rank <= k).float().mean().item()}


def evaluate_heldout(embed: Embedder, documents: Sequence[Document], k: int = 10, batch_size: int = 32,
                     min_section_words: int = 30) -> dict[str, float]:
    """Evaluates ``embed`` (texts → (N, D) tensor) on held-out ``documents``.

    Returns ``{"summary/mrr@10", "summary/recall@1", "summary/recall@10", "section/...", "mrr@10",
    "summary/queries", "section/queries", "candidates", "mean_cosine"}``: ``mrr@10`` is the mean over the
    tasks that have queries; ``mean_cosine`` is the mean cosine between different candidates, a collapse
    diagnostic (it rises towards 1 when all documents drift to one region). The caller chooses the
    documents: pass only documents the embedder was not trained on, and put a model in eval mode first.
    """
    task = build_task(documents, min_section_words)
    if not task.candidates:
        raise ValueError("no held-out document has body text")
    candidates = embed_sorted(embed, task.candidates, batch_size)  # (N, D)
    queries = embed_sorted(embed, task.queries, batch_size) if task.queries else candidates[:0]  # (Q, D)
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
            for name, value in retrieval_metrics(queries[mask], candidates, targets[mask], k).items():
                results[f"{kind}/{name}"] = value
            mrrs.append(results[f"{kind}/mrr@{k}"])
    results[f"mrr@{k}"] = sum(mrrs) / len(mrrs) if mrrs else 0.0
    return results


class HeldOutRetrieval(L.Callback):
    """Retrieval on the DataModule's held-out documents before training and after it (see
    :func:`lit_docemb.eval.heldout.evaluate_heldout`), printed as a table and logged as
    ``heldout/before/<metric>``, ``heldout/after/<metric>`` and ``heldout/delta/<metric>``.

    Runs on global rank 0 only, on documents the training split never contains.

    Args:
        batch_size: Texts embedded per forward pass.
        max_documents: Evaluate on at most this many held-out documents.
        k: Cut-off of MRR@k and recall@k.
    """

    def __init__(self, batch_size: int = 32, max_documents: int | None = 2_000, k: int = 10) -> None:
        self.batch_size = batch_size
        self.max_documents = max_documents
        self.k = k
        self.before: dict[str, float] | None = None
        self.after: dict[str, float] | None = None

    def _documents(self, trainer: L.Trainer) -> list[Document]:
        val_set = trainer.datamodule.val_set
        n = len(val_set) if self.max_documents is None else min(len(val_set), self.max_documents)
        return [val_set[i] for i in range(n)]

    def _evaluate(self, trainer: L.Trainer, module: L.LightningModule) -> dict[str, float]:
        collate = module.collator("predict")
        was_training = module.training
        module.eval()

        def embed(texts: list[str]) -> Tensor:
            docs = [Document(str(i), sections=[Section("", t)]) for i, t in enumerate(texts)]
            batch = module.transfer_batch_to_device(collate(docs), module.device, 0)
            return module.embed(batch).float().cpu()

        started = time.perf_counter()
        with torch.no_grad():
            metrics = evaluate_heldout(embed, self._documents(trainer), k=self.k, batch_size=self.batch_size)
        metrics["seconds"] = time.perf_counter() - started
        module.train(was_training)
        return metrics

    @rank_zero_only
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.before is None:  # a resumed run keeps the figures of its first start
            self.before = self._evaluate(trainer, pl_module)
            self._log(trainer, "before", self.before)

    @rank_zero_only
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.after = self._evaluate(trainer, pl_module)
        self._log(trainer, "after", self.after)
        if self.before is not None:
            delta = {k: self.after[k] - self.before[k] for k in self.after if k in self.before}
            self._log(trainer, "delta", delta)
            print(self.table())

    def _log(self, trainer: L.Trainer, stage: str, metrics: dict[str, float]) -> None:
        for logger in trainer.loggers:
            logger.log_metrics({f"heldout/{stage}/{k}": v for k, v in metrics.items()}, step=trainer.global_step)

    def table(self) -> str:
        """A Markdown table of the before/after metrics."""
        keys = [k for k in self.after if k.startswith(("summary/mrr", "summary/recall", "section/mrr",
                                                        "section/recall", "mrr", "mean_cosine"))]
        lines = ["| held-out metric | before | after | change |", "|---|---:|---:|---:|"]
        for key in keys:
            before, after = self.before[key], self.after[key]
            lines.append(f"| {key} | {before:.4f} | {after:.4f} | {after - before:+.4f} |")
        return "\n".join(lines)

    def state_dict(self) -> dict:
        return {"before": self.before}

    def load_state_dict(self, state_dict: dict) -> None:
        self.before = state_dict.get("before")
