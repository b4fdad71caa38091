"""Per-step logging at a lower cost: in training the terms, the total loss (and the guard's count) are logged only
at the steps whose values reach the loggers and at the ends of epochs and of the run, so the loggers and
``trainer.callback_metrics`` at the end receive what logging every step gives them; the progress bar still shows
every step's loss (lit_docemb's bar reads it from the method, another bar gets it logged every step)."""

from __future__ import annotations

import csv

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger

from lit_docemb.data.corpora.jsonl import JSONLDataModule
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.methods.progress import RateProgressBar
from lit_docemb.models import EncoderSpec


class CountedDocSplit(DocSplit):
    """DocSplit recording, for every ``self.log`` of a training step, the global step and the name."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[int, str]] = []
        self.last_batch_steps: list[int] = []

    def log(self, name, value, *args, **kwargs) -> None:
        if self.trainer.training:
            self.calls.append((self.global_step, name))
        super().log(name, value, *args, **kwargs)

    def training_step(self, batch, batch_idx: int):
        if self.trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            self.last_batch_steps.append(self.global_step)
        loss = super().training_step(batch, batch_idx)
        self.step_losses.append(float(loss))
        return loss


class ShownRateProgressBar(RateProgressBar):
    """RateProgressBar recording the ``train/loss`` it shows after each training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        self.shown.append(self.get_metrics(trainer, pl_module)["train/loss"])


@pytest.mark.parametrize("bar", ["none", "rate", "tqdm"])
def test_terms_are_logged_where_the_loggers_read_them(tiny_encoder_dir, corpus_jsonl, tmp_path, bar):
    torch.manual_seed(0)
    model = CountedDocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))
    model.step_losses = []
    data = JSONLDataModule([corpus_jsonl], batch_size=4, num_workers=0, val_fraction=0.0)
    steps = 7
    progress = {"none": [], "rate": [ShownRateProgressBar()], "tqdm": [TQDMProgressBar()]}[bar]
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, log_every_n_steps=3,
                        logger=CSVLogger(tmp_path, name="", version=""), enable_progress_bar=bar != "none",
                        callbacks=progress, enable_checkpointing=False, enable_model_summary=False)
    trainer.fit(model, data)

    def steps_of(name: str) -> list[int]:
        return [step for step, logged in model.calls if logged == name]

    # Lightning hands on-step values to the loggers at every 3rd step (global steps 2, 5), then the run's last
    expected = sorted({2, 5, steps - 1, *model.last_batch_steps})
    # logged every step only for a progress bar that shows logged values alone (tqdm's)
    assert steps_of("train/loss") == (list(range(steps)) if bar == "tqdm" else expected)
    if bar == "rate":  # lit_docemb's bar shows every step's loss all the same
        assert progress[0].shown == pytest.approx(model.step_losses)
    assert steps_of("train/info_nce_loss") == expected
    assert steps_of("train/mlm_loss") == expected
    assert steps_of("train/nonfinite_skipped_steps") == expected
    assert len(expected) < steps  # the point: fewer self.log calls
    with open(tmp_path / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    written = [row["step"] for row in rows if row.get("train/loss")]
    assert written and [row["step"] for row in rows if row.get("train/info_nce_loss")] == written
    assert {"train/info_nce_loss", "train/mlm_loss", "train/nonfinite_skipped_steps"} <= set(trainer.callback_metrics)
