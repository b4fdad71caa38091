"""Callbacks every run uses: checkpoints in a fixed run folder, and the resolved config saved beside them."""

from __future__ import annotations

import logging
import os

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import SaveConfigCallback

log = logging.getLogger(__name__)


def run_dir(trainer: L.Trainer) -> str:
    return trainer.default_root_dir


class RunCheckpoint(ModelCheckpoint):
    """A ModelCheckpoint whose folder defaults to ``<trainer.default_root_dir>/checkpoints``.

    Lightning's default folder contains the logger's version (a new wandb id per run), so a requeued job
    could not find its own ``last.ckpt``; a fixed folder per run makes ``--ckpt_path last`` work.
    Arguments are those of :class:`~lightning.pytorch.callbacks.ModelCheckpoint` (``save_last`` defaults on).
    """

    def __init__(self, *args, save_last: bool | None = True, **kwargs) -> None:
        super().__init__(*args, save_last=save_last, **kwargs)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = os.path.join(run_dir(trainer), "checkpoints")
        super().setup(trainer, pl_module, stage)


class SaveRunConfig(SaveConfigCallback):
    """Writes the resolved config of a run to ``<trainer.default_root_dir>/config.yaml``, beside the
    ``checkpoints`` folder, once: a resumed or requeued run keeps the file its first start wrote."""

    def save_config(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        path = os.path.join(run_dir(trainer), "config.yaml")
        if os.path.exists(path):
            log.info("config already saved at %s (resumed run): kept", path)
            return
        os.makedirs(run_dir(trainer), exist_ok=True)
        self.parser.save(self.config, path, skip_none=False, overwrite=True, multifile=False)
