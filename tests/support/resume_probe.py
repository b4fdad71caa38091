"""The exact-resume test's probe: records each training step and, on request, blocks inside one step so that the
test can kill the process there."""

from __future__ import annotations

import os
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback


class StepProbe(Callback):
    """Appends ``<epoch> <global step> <loss bits>`` to ``<default_root_dir>/steps.txt`` after every training step and
    saves the final weights to ``<default_root_dir>/final.pt``. Draws nothing from any random generator.

    Args:
        pause_at_step: Inside the training step that ends with this global step (after backward, before the
            optimizer update), write ``paused`` beside ``steps.txt`` and block until killed.
    """

    def __init__(self, pause_at_step: int | None = None) -> None:
        self.pause_at_step = pause_at_step

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        if self.pause_at_step is not None and trainer.global_step + 1 == self.pause_at_step:
            with open(os.path.join(trainer.default_root_dir, "paused"), "w") as f:
                f.write(str(self.pause_at_step))
            while True:
                time.sleep(60)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        loss = outputs["loss"].detach().float()
        with open(os.path.join(trainer.default_root_dir, "steps.txt"), "a") as f:
            f.write(f"{trainer.current_epoch} {trainer.global_step} {loss.view(torch.int32).item()}\n")  # exact bits

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        torch.save(pl_module.state_dict(), os.path.join(trainer.default_root_dir, "final.pt"))
