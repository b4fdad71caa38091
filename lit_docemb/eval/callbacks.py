"""Evaluation callbacks run during ``fit``."""

from __future__ import annotations

import time

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_only
from torch import Tensor

from lit_docemb.data.document import Document, Section
from lit_docemb.eval.heldout import evaluate_heldout


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
