"""The shared base of every method: optimizer/scheduler wiring, loss summation, logging, predict.

A method subclasses :class:`EmbeddingMethod` and implements three things: ``collator(stage)`` (documents →
its typed batch, run in dataloader workers), ``losses(batch)`` (batch → ``{"name_loss": tensor, ...}``)
and ``embed(tokens)`` (tokens → document embeddings). The total loss is the weighted sum of the terms whose
names end in ``_loss``; every term is logged as ``train/<name>`` or ``val/<name>``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor
from torch.optim.lr_scheduler import LambdaLR

from lit_docemb.data.batches import DocumentBatch


class LinearWarmupDecay(LambdaLR):
    """Linear warm-up to the base learning rate, then linear decay to ``final_fraction`` of it.

    Args:
        optimizer: Wrapped optimizer.
        warmup_steps: Optimizer steps of linear warm-up from 0.
        total_steps: Steps of the whole run; ``None`` lets the method fill in
            ``trainer.estimated_stepping_batches`` (so it follows max_epochs/max_steps/accumulation).
        final_fraction: Learning-rate multiplier reached at ``total_steps``.
    """

    def __init__(self, optimizer, warmup_steps: int = 0, total_steps: int | None = None,
                 final_fraction: float = 0.0) -> None:
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.final_fraction = final_fraction
        super().__init__(optimizer, self.multiplier)

    def multiplier(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        if not self.total_steps or self.total_steps <= self.warmup_steps:
            return 1.0
        progress = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return 1.0 - (1.0 - self.final_fraction) * progress


class EmbeddingMethod(L.LightningModule, ABC):
    """Base LightningModule of the document-embedding methods.

    Args:
        optimizer: Optimizer factory (``class_path`` + ``init_args`` in YAML), called with the parameters;
            ``None`` uses AdamW at the method's paper learning rate (:attr:`default_learning_rate`).
        scheduler: Optional learning-rate scheduler factory, stepped every optimizer step.
    """

    #: Learning rate of the AdamW used when no optimizer is configured (the method's paper value).
    default_learning_rate: float = 1e-4

    #: Multipliers of the ``*_loss`` terms in the total; a method sets these from its own arguments.
    loss_weights: dict[str, float]

    def __init__(self, optimizer: OptimizerCallable | None = None,
                 scheduler: LRSchedulerCallable | None = None) -> None:
        super().__init__()
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.loss_weights = {}
        self._step_started: float | None = None

    # --- what a method implements -------------------------------------------------------------------
    @abstractmethod
    def collator(self, stage: str) -> Callable:
        """The function turning a list of documents into this method's batch for ``stage``
        ("fit", "validate" or "predict"). It must be picklable: it runs in dataloader workers."""

    @abstractmethod
    def losses(self, batch) -> dict[str, Tensor]:
        """Named loss terms (and extra metrics) of one batch."""

    @abstractmethod
    def embed(self, batch: DocumentBatch) -> Tensor:
        """Document embeddings (B, D) of a batch of whole documents."""

    def similarity(self, queries: Tensor, candidates: Tensor) -> Tensor:
        """Ranking scores (Q, N) between ``embed`` outputs of queries and candidates: cosine, unless a method's
        representation has its own similarity (CTPE's pairs)."""
        queries = torch.nn.functional.normalize(queries.float(), dim=-1)
        return queries @ torch.nn.functional.normalize(candidates.float(), dim=-1).T

    # --- the shared step skeleton ------------------------------------------------------------------
    def total_loss(self, terms: dict[str, Tensor]) -> Tensor:
        names = [k for k in terms if k.endswith("_loss")]
        if not names:
            raise ValueError(f"{type(self).__name__}.losses returned no '*_loss' term: {sorted(terms)}")
        return sum(self.loss_weights.get(k, 1.0) * terms[k] for k in names)

    def _shared_step(self, batch, stage: str) -> Tensor:
        terms = self.losses(batch)
        loss = self.total_loss(terms)
        on_step = stage == "train"
        batch_size = len(batch)
        self.log(f"{stage}/loss", loss, prog_bar=True, on_step=on_step, on_epoch=not on_step,
                 batch_size=batch_size, sync_dist=not on_step)
        for name, value in terms.items():
            self.log(f"{stage}/{name}", value.detach().float(), on_step=on_step, on_epoch=not on_step,
                     batch_size=batch_size, sync_dist=not on_step)
        return loss

    def training_step(self, batch, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "train")

    def validation_step(self, batch, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "val")

    def test_step(self, batch, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "test")

    def predict_step(self, batch: DocumentBatch, batch_idx: int) -> dict:
        return {"ids": batch.ids, "embeddings": self.embed(batch).float().cpu()}

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        self._step_started = time.perf_counter()

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        if self._step_started is not None:
            seconds = time.perf_counter() - self._step_started
            self.log("train/documents_per_second", len(batch) / max(seconds, 1e-9), on_step=True)

    # --- optimisation -------------------------------------------------------------------------------
    def configure_optimizers(self):
        if self.optimizer_factory is None:
            optimizer = torch.optim.AdamW(self.parameters(), lr=self.default_learning_rate)
        else:
            optimizer = self.optimizer_factory(self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer)
        if isinstance(scheduler, LinearWarmupDecay) and scheduler.total_steps is None:
            scheduler.total_steps = int(self.trainer.estimated_stepping_batches)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
