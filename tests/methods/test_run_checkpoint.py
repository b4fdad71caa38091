"""RunCheckpoint without a ``monitor`` keeps the best checkpoint by the measure the method declares
(``checkpoint_monitor``), so configs name ``configs/trainer/run_checkpoint.yaml`` instead of restating the callback
with the method's monitor; a given ``monitor`` wins, and a method that declares none keeps the latest."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from lit_docemb.methods import DenseRetrieval, DocumentClassifier
from lit_docemb.methods.callbacks import RunCheckpoint

SCORES = [0.2, 0.9, 0.5]  # val/score logged at the end of epochs 0, 1, 2


class Scored(L.LightningModule):
    """Logs ``val/score`` = ``SCORES[epoch]`` and declares it as its checkpoint measure (``mode``)."""

    def __init__(self, mode: str | None = "max") -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        if mode is not None:
            self.checkpoint_monitor = ("val/score", mode)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).square().mean()

    def validation_step(self, batch, batch_idx):
        self.log("val/score", SCORES[self.current_epoch])
        self.log("val/other", -SCORES[self.current_epoch])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(folder: Path, checkpoint: RunCheckpoint, module: L.LightningModule, epochs: int,
        ckpt_path: str | None = None) -> RunCheckpoint:
    trainer = L.Trainer(default_root_dir=folder, accelerator="cpu", devices=1, logger=False, max_epochs=epochs,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        callbacks=[checkpoint])
    trainer.fit(module, DataLoader(torch.randn(4, 4), batch_size=2), DataLoader(torch.randn(2, 4), batch_size=2),
                ckpt_path=ckpt_path)
    return checkpoint


def kept(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "checkpoints").glob("*.ckpt") if p.name != "last.ckpt")


@pytest.mark.parametrize("mode, best_epoch", [("max", 1), ("min", 0)])
def test_without_a_monitor_the_best_checkpoint_is_by_the_methods_measure(tmp_path, mode, best_epoch):
    checkpoint = fit(tmp_path, RunCheckpoint(), Scored(mode), epochs=3)
    assert (checkpoint.monitor, checkpoint.mode) == ("val/score", mode)
    assert checkpoint.best_model_score.item() == pytest.approx(SCORES[best_epoch])
    assert kept(tmp_path) == [f"epoch={best_epoch}-step={2 * (best_epoch + 1)}.ckpt"]
    # the callback's state is keyed as that of a RunCheckpoint given the same monitor: runs that wrote it out resume
    assert checkpoint.state_key == RunCheckpoint(monitor="val/score", mode=mode).state_key


def test_a_given_monitor_wins_over_the_methods(tmp_path):
    checkpoint = fit(tmp_path, RunCheckpoint(monitor="val/other", mode="max"), Scored("max"), epochs=3)
    assert (checkpoint.monitor, checkpoint.mode) == ("val/other", "max")
    assert kept(tmp_path) == ["epoch=0-step=2.ckpt"]  # -0.2, the highest of val/other


def test_a_method_that_declares_no_measure_keeps_the_latest(tmp_path):
    checkpoint = fit(tmp_path, RunCheckpoint(), Scored(mode=None), epochs=3)
    assert checkpoint.monitor is None
    assert kept(tmp_path) == ["epoch=2-step=6.ckpt"]


def test_a_run_that_wrote_the_monitor_out_resumes_with_the_piece(tmp_path):
    """A run folder saved by a config that restated ``monitor``/``mode`` resumes with the piece: its best so far
    (epoch 1's 0.9) is restored and still the best after epoch 2's 0.5."""
    fit(tmp_path, RunCheckpoint(monitor="val/score", mode="max"), Scored("max"), epochs=2)
    resumed = fit(tmp_path, RunCheckpoint(), Scored("max"), epochs=3, ckpt_path="last")
    assert resumed.best_model_score.item() == pytest.approx(0.9)
    assert kept(tmp_path) == ["epoch=1-step=4.ckpt"]


def test_the_fine_tuning_methods_declare_the_measures_their_configs_checkpointed_by():
    assert DocumentClassifier.checkpoint_monitor == ("val/macro_f1", "max")
    assert DenseRetrieval.checkpoint_monitor == ("val/info_nce_loss", "min")
