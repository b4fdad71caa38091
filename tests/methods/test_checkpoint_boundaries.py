"""With gradient accumulation, checkpoints are written only after the micro-batch that completes an optimizer
step (issue 18): a validation inside an accumulation window and a SLURM preemption signal wait for its end."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader

from lit_docemb.methods import callbacks
from lit_docemb.methods.callbacks import (
    RunCheckpoint,
    SlurmRequeue,
    inside_accumulation_window,
)

BATCHES = 8  # per epoch


class Regression(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).square().mean()

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.layer(batch).square().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Saves(Callback):
    """(micro-batches so far, global step, inside an accumulation window) at every checkpoint written."""

    def __init__(self, signal_at: int | None = None) -> None:
        self.batches, self.saves, self.signal_at = 0, [], signal_at

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.batches += 1
        if self.batches == self.signal_at:  # as SLURM's SIGUSR1 does, between two batches
            next(c for c in trainer.callbacks if isinstance(c, SlurmRequeue)).signalled = True

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        save = (self.batches, trainer.global_step, inside_accumulation_window(trainer))
        if save not in self.saves:  # a top-k checkpoint and last.ckpt are two saves
            self.saves.append(save)


def fit(tmp_path, *extra: Callback, **trainer_args) -> L.Trainer:
    """Seeded: a validation whose loss is not the best yet writes no top-k checkpoint, so random data and weights
    made the saves a run writes differ from run to run."""
    torch.manual_seed(0)
    data = DataLoader(torch.randn(BATCHES * 2, 4), batch_size=2)
    trainer = L.Trainer(default_root_dir=tmp_path, accelerator="cpu", devices=1, logger=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        callbacks=[*extra], **trainer_args)
    trainer.fit(Regression(), data, DataLoader(torch.randn(4, 4), batch_size=2))
    return trainer


def test_a_validation_inside_an_accumulation_window_saves_at_the_windows_end(tmp_path):
    saves = Saves()
    fit(tmp_path, RunCheckpoint(monitor="val_loss"), saves, max_epochs=1, accumulate_grad_batches=2,
        val_check_interval=3)
    # validations after micro-batches 3 (inside a window) and 6; each one's save at the end of its window
    assert saves.saves == [(4, 2, False), (6, 3, False)]
    assert len(list((tmp_path / "checkpoints").glob("epoch=0-step=*.ckpt"))) == 1


def test_without_accumulation_a_validation_saves_at_once(tmp_path):
    saves = Saves()
    fit(tmp_path, RunCheckpoint(monitor="val_loss"), saves, max_epochs=1, val_check_interval=3)
    assert [batches for batches, _, _ in saves.saves] == [3, 6]


@pytest.mark.parametrize("signal_at, saved_at", [(3, 4), (4, 4), (5, 6)])
def test_a_preemption_inside_an_accumulation_window_saves_at_the_windows_end(tmp_path, monkeypatch, signal_at,
                                                                            saved_at):
    requeued = []
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setattr(callbacks.subprocess, "run", lambda command, **kwargs: requeued.append(command) or
                        type("Done", (), {"returncode": 0, "stderr": ""})())
    saves = Saves(signal_at=signal_at)
    trainer = fit(tmp_path, SlurmRequeue(), saves, max_epochs=1, accumulate_grad_batches=2, limit_val_batches=0,
                  enable_checkpointing=False)
    assert saves.saves == [(saved_at, saved_at // 2, False)]
    assert (tmp_path / "hpc_ckpt_1.ckpt").exists() and requeued == [["scontrol", "requeue", "77"]]
    assert trainer.global_step == saved_at // 2
