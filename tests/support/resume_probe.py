"""The exact-resume test's probe: records each training micro-batch and, on request, blocks inside one so that the
test can kill the process there."""

from __future__ import annotations

import os
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback


def micro_batch(trainer: L.Trainer) -> int:
    """1-based number of the training micro-batch running now, counted over the whole run (all epochs)."""
    return trainer.fit_loop.epoch_loop.total_batch_idx + 1


class StepProbe(Callback):
    """Appends ``<micro-batch> <epoch> <global step> <loss bits>`` to ``<default_root_dir>/steps.txt`` after every
    training micro-batch (the global step after it: the same for the micro-batches of one accumulation window) and
    saves the final weights to ``<default_root_dir>/final.pt``. Draws nothing from any random generator.

    Args:
        pause_at_batch: Inside this micro-batch (after its forward, before its backward), write ``paused`` beside
            ``steps.txt`` and block until killed.
    """

    def __init__(self, pause_at_batch: int | None = None) -> None:
        self.pause_at_batch = pause_at_batch

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss) -> None:
        if self.pause_at_batch is not None and micro_batch(trainer) == self.pause_at_batch:
            with open(os.path.join(trainer.default_root_dir, "paused"), "w") as f:
                f.write(str(self.pause_at_batch))
            while True:
                time.sleep(60)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        loss = outputs["loss"].detach().float()
        with open(os.path.join(trainer.default_root_dir, "steps.txt"), "a") as f:  # the loss's exact bits
            f.write(f"{micro_batch(trainer)} {trainer.current_epoch} {trainer.global_step} "
                    f"{loss.view(torch.int32).item()}\n")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        torch.save(pl_module.state_dict(), os.path.join(trainer.default_root_dir, "final.pt"))
