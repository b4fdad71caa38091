"""The progress bar of every command: Lightning's Rich bar, with a rate that is true for slow steps.

Lightning's Rich bar shows ``<speed>it/s`` with Rich's speed estimate, which only counts the steps of the last 30
seconds and prints ``0.00`` when it has fewer than two: on a CPU, where a step of the quickstart takes longer than
that, the bar sat at ``0.00it/s`` for the whole epoch. :class:`RateProgressBar` shows the mean rate since the bar
started instead, as ``s/it`` when a step takes a second or more (``12.4s/it``) and ``it/s`` otherwise, and ``-``
until the first step ends. (Without Rich installed Lightning shows tqdm's bar, whose rate is right already.)

It also shows each training step's loss without a ``self.log`` per step: it reads the method's
``last_train_loss`` (the step's total loss, kept detached on its device), so a method logs ``train/loss`` only at
the steps whose values reach the loggers (:func:`shows_step_loss`; docs/performance.md).
"""

from __future__ import annotations

import importlib.util

import lightning as L
import torch
from lightning.pytorch.callbacks import RichProgressBar
from lightning.pytorch.trainer.states import TrainerFn


def rate_text(completed: float, elapsed: float | None) -> str:
    """The rate of ``completed`` steps in ``elapsed`` seconds: ``"3.21it/s"``, ``"12.4s/it"``, or ``"-"`` before
    the first step."""
    if not completed or not elapsed or elapsed <= 0:
        return "-"
    per_second = completed / elapsed
    if per_second >= 1:
        return f"{per_second:.2f}it/s"
    return f"{elapsed / completed:.1f}s/it"


class RateProgressBar(RichProgressBar):
    """Lightning's :class:`~lightning.pytorch.callbacks.RichProgressBar` whose last column is the mean rate since
    the bar started (:func:`rate_text`). Arguments are those of ``RichProgressBar``."""

    def configure_columns(self, trainer) -> list:
        from rich.progress import ProgressColumn
        from rich.text import Text

        style = self.theme.processing_speed

        class MeanRateColumn(ProgressColumn):
            def render(self, task) -> Text:
                return Text(rate_text(task.completed, task.elapsed), style=style)

        return [*super().configure_columns(trainer)[:-1], MeanRateColumn()]

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict:
        """Lightning's metrics, with ``train/loss`` the last training step's loss (``pl_module.last_train_loss``)
        while fitting, where the method has one."""
        metrics = super().get_metrics(trainer, pl_module)
        loss = getattr(pl_module, "last_train_loss", None)
        if trainer.state.fn == TrainerFn.FITTING and isinstance(loss, torch.Tensor):
            metrics["train/loss"] = loss.item()
        return metrics


def shows_step_loss(trainer: L.Trainer | None) -> bool:
    """Whether no progress bar of ``trainer`` needs ``train/loss`` logged every step: it has none, or a
    :class:`RateProgressBar`, which reads the step's loss itself. (Another bar, tqdm's when Rich is not installed or
    one a config names, shows only logged values.) ``False`` without a trainer."""
    if trainer is None:
        return False
    bar = trainer.progress_bar_callback
    return bar is None or isinstance(bar, RateProgressBar)


def rate_progress_bars() -> list[RateProgressBar]:
    """``[RateProgressBar()]`` for a Trainer's ``callbacks`` when Rich is installed, else ``[]`` (Lightning then
    shows tqdm's bar): for the commands that build their own Trainer (``embed``)."""
    return [RateProgressBar()] if importlib.util.find_spec("rich") is not None else []
