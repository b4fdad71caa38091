"""Guards every run has.

* :class:`NonFiniteGuard`: a step whose loss or gradients are NaN/Inf is skipped, counted and logged, and the
  run stops with a clear error after ``max_consecutive`` such steps in a row; no checkpoint stores non-finite
  weights.
* :class:`FailFast`: an exception on one rank ends every rank within seconds, each printing which rank failed
  and why, instead of the others waiting in a collective until its timeout (30 minutes by default; with NCCL
  a dead peer is not noticed before that).

Every :class:`~lit_docemb.methods.base.EmbeddingMethod` adds both with their defaults (``configure_callbacks``)
unless the trainer's callbacks already hold one of the type, so ``--trainer.callbacks+=lit_docemb.methods.guards.
NonFiniteGuard --trainer.callbacks.max_consecutive=3`` configures it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from lit_docemb import distributed
from lit_docemb.errors import ConfigError

log = logging.getLogger(__name__)


def non_finite_names(tensors: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors holding a NaN or an infinity."""
    return [name for name, t in tensors.items() if t.is_floating_point() and not torch.isfinite(t).all()]


def all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every element of every tensor is finite, with one synchronisation.

    A sum is finite only if all its terms are (an infinity or a NaN stays non-finite through a sum), so one sum
    per tensor decides the common case in a single pass over memory, much faster on CPU than
    ``isfinite(t).all()`` (figures: docs/performance.md); only a non-finite sum, which finite elements can
    also give by overflowing, is checked element by element.
    """
    if not tensors:
        return True
    if bool(torch.isfinite(torch.stack([t.sum(dtype=torch.float32) for t in tensors])).all()):
        return True
    return all(bool(torch.isfinite(t).all()) for t in tensors)


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
            raise ConfigError(f"trainer.callbacks (NonFiniteGuard).init_args.max_consecutive: must be >= 1, "
                              f"got {max_consecutive}")
        self.max_consecutive = max_consecutive
        self.skipped = 0
        self.consecutive = 0

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        finite = all_finite(grads)
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



class FailFast(Callback):
    """Ends all ranks promptly when one raises: the failing rank writes its error into the process group's
    key-value store (``on_exception``) and every other rank, watching that key from a daemon thread, prints it
    and exits with status 1. With one process it does nothing.

    Args:
        poll_seconds: How often the other ranks look at the store.
    """

    KEY = "lit_docemb/failed"

    def __init__(self, poll_seconds: float = 1.0) -> None:
        self.poll_seconds = poll_seconds
        self._store = None
        self._done = threading.Event()

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._store is not None:
            return
        self._store = distributed.default_store()
        if self._store is None:
            return
        self._done.clear()
        threading.Thread(target=self._watch, args=(distributed.rank(),), name="lit_docemb-failfast",
                         daemon=True).start()

    def _watch(self, rank: int) -> None:
        while not self._done.wait(self.poll_seconds):
            try:
                if not self._store.check([self.KEY]):
                    continue
                message = self._store.get(self.KEY).decode()
            except Exception:  # the store's host (rank 0) has gone: its own error ends the job
                return
            if self._done.is_set():  # this rank is the one that failed, or it is finishing
                return
            print(f"[rank {rank}] stopping because {message}", file=sys.stderr, flush=True)
            os._exit(1)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if self._store is None:
            return
        self._done.set()
        try:
            self._store.set(self.KEY, f"rank {distributed.rank()} failed: {type(exception).__name__}: {exception}")
        except Exception:  # the store's host has gone already
            return
        if distributed.rank() == 0:  # rank 0 hosts the store: keep it up until the others have read it
            time.sleep(2 * self.poll_seconds)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._done.set()
