"""The progress bar of every command: Lightning's Rich bar, with a rate that is true for slow steps.

Lightning's Rich bar shows ``<speed>it/s`` with Rich's speed estimate, which only counts the steps of the last 30
seconds and prints ``0.00`` when it has fewer than two: on a CPU, where a step of the quickstart takes longer than
that, the bar sat at ``0.00it/s`` for the whole epoch. :class:`RateProgressBar` shows the mean rate since the bar
started instead, as ``s/it`` when a step takes a second or more (``12.4s/it``) and ``it/s`` otherwise, and ``-``
until the first step ends. (Without Rich installed Lightning shows tqdm's bar, whose rate is right already.)
"""

from __future__ import annotations

import importlib.util

from lightning.pytorch.callbacks import RichProgressBar


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


def rate_progress_bars() -> list[RateProgressBar]:
    """``[RateProgressBar()]`` for a Trainer's ``callbacks`` when Rich is installed, else ``[]`` (Lightning then
    shows tqdm's bar): for the commands that build their own Trainer (``embed``)."""
    return [RateProgressBar()] if importlib.util.find_spec("rich") is not None else []
