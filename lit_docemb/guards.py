"""Non-finite guard: a step whose loss or gradients are NaN/Inf is skipped, counted and logged, and the run
stops with a clear error after ``max_consecutive`` such steps in a row; no checkpoint stores non-finite weights.

Every :class:`~lit_docemb.methods.base.EmbeddingMethod` adds one with the defaults (``configure_callbacks``)
unless the trainer's callbacks already hold one, so ``--trainer.callbacks+=lit_docemb.guards.NonFiniteGuard
--trainer.callbacks.max_consecutive=3`` configures it.
"""

from __future__ import annotations

import logging

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

log = logging.getLogger(__name__)


def non_finite_names(tensors: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors holding a NaN or an infinity."""
    return [name for name, t in tensors.items() if t.is_floating_point() and not torch.isfinite(t).all()]


class NonFiniteGuard(Callback):
    """Skips optimizer updates whose gradients are not finite (a NaN/Inf loss gives such gradients).

    The check runs after backward and, under DDP, after the gradient all-reduce, so every rank sees the same
    gradients and skips the same step. Skipping sets the gradients to ``None``: torch optimizers then leave
    those parameters and their state (moments, step counts) untouched. The learning-rate scheduler still
    advances, as for any step Lightning counts.

    Logged: ``train/nonfinite_skipped_steps`` (total since the run started, kept across resumes).

    Args:
        max_consecutive: Stop the run (``RuntimeError``) when this many consecutive steps were non-finite.
    """

    def __init__(self, max_consecutive: int = 10) -> None:
        if max_consecutive < 1:
            raise ValueError(f"max_consecutive must be >= 1, got {max_consecutive}")
        self.max_consecutive = max_consecutive
        self.skipped = 0
        self.consecutive = 0

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        finite = bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()) if grads else True
        if finite:
            self.consecutive = 0
        else:
            optimizer.zero_grad(set_to_none=True)
            self.skipped += 1
            self.consecutive += 1
            log.warning("non-finite gradients at global step %d: update skipped (%d in a row, %d in all)",
                        trainer.global_step, self.consecutive, self.skipped)
        pl_module.log("train/nonfinite_skipped_steps", float(self.skipped), on_step=True)
        if self.consecutive >= self.max_consecutive:
            raise RuntimeError(
                f"{self.consecutive} consecutive training steps had non-finite (NaN/Inf) gradients, up to global "
                f"step {trainer.global_step}: stopping. Usual causes: a learning rate too high, fp16 overflow "
                f"(use bf16-mixed), a temperature near 0, or corrupt inputs. Resume from the last checkpoint "
                f"after the fix; raise NonFiniteGuard.max_consecutive to tolerate longer streaks.")

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        bad = non_finite_names(checkpoint["state_dict"])
        if bad:
            raise RuntimeError(f"refusing to save a checkpoint with non-finite weights in {len(bad)} tensors "
                               f"(first: {bad[0]}) at global step {trainer.global_step}")

    def state_dict(self) -> dict:
        return {"skipped": self.skipped, "consecutive": self.consecutive}

    def load_state_dict(self, state_dict: dict) -> None:
        self.skipped = int(state_dict["skipped"])
        self.consecutive = int(state_dict["consecutive"])

