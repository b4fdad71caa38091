"""Guards every run has.

* :class:`NonFiniteGuard`: a step whose loss or gradients are NaN/Inf is skipped, counted and logged, and the
  run stops with a clear error after ``max_consecutive`` such steps in a row; no checkpoint stores non-finite
  weights. With a fused Adam/AdamW the skip is decided on the device and read only at logging steps (no
  per-step host synchronisation); with other optimizers the decision is read every step.
* :class:`FailFast`: an exception on one rank ends every rank within seconds, each printing which rank failed
  and why, instead of the others waiting in a collective until its timeout (30 minutes by default; with NCCL
  a dead peer is not noticed before that).

Every :class:`~lit_docemb.methods.base.EmbeddingMethod` adds both with their defaults (``configure_callbacks``)
unless the trainer's callbacks already hold one of the type, so ``--trainer.callbacks+=lit_docemb.methods.guards.
NonFiniteGuard --trainer.callbacks.max_consecutive=3`` configures it.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from lit_docemb import distributed
from lit_docemb.errors import ConfigError
from lit_docemb.methods.callbacks import logging_step

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


def finite_on_device(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Whether every element of every tensor is finite, as a 0-dim bool tensor on the tensors' device: exact, and
    without waiting for the device. On a CPU, where reading a value costs nothing, :func:`all_finite`; on an
    accelerator, :func:`finite_by_max_norm`."""
    if not tensors:
        return torch.ones((), dtype=torch.bool)
    if tensors[0].device.type == "cpu":
        return torch.tensor(all_finite(tensors))
    return finite_by_max_norm(tensors)


def finite_by_max_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Whether every element is finite, from each tensor's largest magnitude (``_foreach_norm`` of order
    infinity, one fused kernel per dtype on CUDA): a maximum propagates NaN and infinity and, unlike a sum or a
    2-norm, never overflows, so the answer is exact. A 0-dim bool tensor on the tensors' device."""
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        if t.numel():  # the maximum of nothing is undefined; an empty tensor holds nothing non-finite
            by_dtype.setdefault(t.dtype, []).append(t)
    flags = [torch.isfinite(torch.stack(torch._foreach_norm(group, ord=math.inf))).all() for group in by_dtype.values()]
    return torch.stack(flags).all() if flags else torch.ones((), dtype=torch.bool, device=tensors[0].device)


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer.step`` can skip an update on a device flag: fused Adam and AdamW read
    ``optimizer.found_inf`` (the attribute ``torch.amp.GradScaler`` sets) and, where it is 1, leave parameters,
    moments and step counts as they were. (Fused SGD also reads it, but a skipped first step leaves its momentum
    buffers uninitialised, so it is not used.)"""
    return isinstance(optimizer, torch.optim.Adam) and bool(optimizer.defaults.get("fused"))


#: The most steps whose device flags :class:`NonFiniteGuard` keeps unread (when logging steps are further apart).
MAX_UNREAD_STEPS = 100


class NonFiniteGuard(Callback):
    """Skips optimizer updates whose gradients are not finite (a NaN/Inf loss gives such gradients).

    The check runs after backward and, under DDP, after the gradient all-reduce, so every rank sees the same
    gradients and skips the same step. It is exact (every element of every gradient; :func:`finite_on_device`)
    and the skipped update changes nothing: no parameter, no optimizer state (moments, step counts). The
    learning-rate scheduler still advances, as for any step Lightning counts. How a step is skipped depends on
    the optimizer (docs/performance.md):

    * a fused Adam or AdamW (``fused: true``; the default optimizer on CUDA): the decision stays on the device,
      handed to the optimizer as ``found_inf`` (:func:`skips_on_device`), and the host reads the flags of the
      steps since the last read only at logging steps (:func:`~lit_docemb.methods.callbacks.logging_step`), at
      most every :data:`MAX_UNREAD_STEPS` steps, and before a checkpoint is saved: no step waits for the device.
      Warnings, the count and the stop after ``max_consecutive`` come at that read, naming the skipped steps;
    * any other optimizer: the decision is read every step (one wait for the device on an accelerator) and the
      gradients of a non-finite step are set to ``None``, which torch optimizers skip.

    Logged at logging steps: ``train/nonfinite_skipped_steps`` (total since the run started, kept across resumes).

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
        self._unread: list[tuple[int, torch.Tensor]] = []  # (global step, 0-dim float found_inf on the device)
        self._found_inf_set: list[torch.optim.Optimizer] = []

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        logging = logging_step(trainer)
        if skips_on_device(optimizer):
            found_inf = (~finite_on_device(grads)).to(torch.float32)  # on the gradients' device, as the kernels read it
            optimizer.found_inf = found_inf
            if optimizer not in self._found_inf_set:
                self._found_inf_set.append(optimizer)
            self._unread.append((trainer.global_step, found_inf))
            if logging or len(self._unread) >= MAX_UNREAD_STEPS:
                self._read()
        else:
            on_cpu = not grads or grads[0].device.type == "cpu"
            skipped = not (all_finite(grads) if on_cpu else bool(finite_by_max_norm(grads)))  # one wait for the device
            if skipped:
                optimizer.zero_grad(set_to_none=True)
            self._count([(trainer.global_step, skipped)])
        if logging:
            pl_module.log("train/nonfinite_skipped_steps", torch.full((), float(self.skipped), device=pl_module.device),
                          on_step=True)

    def _read(self) -> None:
        """Counts the steps whose device flags are not read yet (one wait for the device)."""
        if not self._unread:
            return
        flags = torch.stack([found_inf for _, found_inf in self._unread]).tolist()
        steps = [(step, bool(flag)) for (step, _), flag in zip(self._unread, flags)]
        self._unread = []
        self._count(steps)

    def _count(self, steps: list[tuple[int, bool]]) -> None:
        """Updates the counts from ``(global step, skipped)`` pairs in order; warns of the skipped steps and
        stops the run when a streak reaches ``max_consecutive``."""
        for step, skipped in steps:
            if not skipped:
                self.consecutive = 0
                continue
            self.skipped += 1
            self.consecutive += 1
            log.warning("non-finite gradients at global step %d: update skipped (%d in a row, %d in all)",
                        step, self.consecutive, self.skipped)
            if self.consecutive >= self.max_consecutive:
                raise RuntimeError(
                    f"{self.consecutive} consecutive training steps had non-finite (NaN/Inf) gradients, up to "
                    f"global step {step}: stopping. Usual causes: a learning rate too high, fp16 overflow "
                    f"(use bf16-mixed), a temperature near 0, or corrupt inputs. Resume from the last checkpoint "
                    f"after the fix; raise NonFiniteGuard.max_consecutive to tolerate longer streaks.")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._read()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Takes back the ``found_inf`` flags handed to optimizers, so that a later step outside this fit is not
        skipped by a stale one."""
        for optimizer in self._found_inf_set:
            optimizer.__dict__.pop("found_inf", None)
        self._found_inf_set = []
        self._unread = []

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        bad = non_finite_names(checkpoint["state_dict"])
        if bad:
            raise RuntimeError(f"refusing to save a checkpoint with non-finite weights in {len(bad)} tensors "
                               f"(first: {bad[0]}) at global step {trainer.global_step}")

    def state_dict(self) -> dict:
        self._read()  # a checkpoint holds the counts up to its step
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
