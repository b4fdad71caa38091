"""What every run uses: checkpoints in a fixed run folder written atomically, and the resolved config saved
beside them (and handed to the loggers)."""

from __future__ import annotations

import glob
import logging
import os
import tempfile
from typing import Any

import lightning as L
import torch
import yaml
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.plugins.io import TorchCheckpointIO

log = logging.getLogger(__name__)


def run_dir(trainer: L.Trainer) -> str:
    return trainer.default_root_dir


class RunCheckpoint(ModelCheckpoint):
    """A ModelCheckpoint whose folder defaults to ``<trainer.default_root_dir>/checkpoints``.

    Lightning's default folder contains the logger's version (a new wandb id per run), so a requeued job
    could not find its own ``last.ckpt``; a fixed folder per run makes ``--ckpt_path last`` work. With
    ``--ckpt_path last`` the newest of ``checkpoints/last.ckpt`` and the checkpoints Lightning writes into
    ``<default_root_dir>`` when SLURM signals a preemption (``hpc_ckpt_<n>.ckpt``) is resumed; with none, the
    run starts from scratch. Arguments are those of :class:`~lightning.pytorch.callbacks.ModelCheckpoint`
    (``save_last`` defaults on).
    """

    def __init__(self, *args, save_last: bool | None = True, **kwargs) -> None:
        super().__init__(*args, save_last=save_last, **kwargs)

    def _default_dirpath(self, trainer: L.Trainer) -> None:
        if self.dirpath is None:
            self.dirpath = os.path.join(run_dir(trainer), "checkpoints")

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._default_dirpath(trainer)
        super().setup(trainer, pl_module, stage)

    def _find_last_checkpoints(self, trainer: L.Trainer) -> set[str]:
        self._default_dirpath(trainer)  # ckpt_path="last" is resolved before the callbacks' setup
        preempted = glob.glob(os.path.join(glob.escape(run_dir(trainer)), "hpc_ckpt_*.ckpt"))
        return super()._find_last_checkpoints(trainer) | {os.path.normpath(p) for p in preempted}


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes each checkpoint to a temporary file in its own folder, flushes it to disk and renames it over
    the target, so that ``last.ckpt`` is always either the previous or the new complete checkpoint, also when
    the job is killed while saving. (Lightning's own save stages the file in the system's temporary folder and
    moves it, which is a copy — not atomic — when the checkpoint folder is on another file system, as on
    clusters.) Remote paths (``s3://`` ...) keep Lightning's write. The DeepSpeed strategy writes its sharded
    checkpoint folders itself and does not use this.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        if not isinstance(get_filesystem(path), LocalFileSystem):
            return super().save_checkpoint(checkpoint, path)
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)  # mkstemp's files are private (0o600)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


class SaveRunConfig(SaveConfigCallback):
    """Writes the resolved config of a run to ``<trainer.default_root_dir>/config.yaml``, beside the
    ``checkpoints`` folder, once: a resumed or requeued run keeps the file its first start wrote. Every start
    also hands the resolved config it runs with to the loggers (``log_hyperparams({"config": ...})``: the
    wandb run's config, TensorBoard's hparams, the CSV logger's ``hparams.yaml``)."""

    def save_config(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        path = os.path.join(run_dir(trainer), "config.yaml")
        if os.path.exists(path):
            log.info("config already saved at %s (resumed run): kept", path)
        else:
            os.makedirs(run_dir(trainer), exist_ok=True)
            self.parser.save(self.config, path, skip_none=False, overwrite=True, multifile=False)
        resolved = yaml.safe_load(self.parser.dump(self.config, skip_none=False))  # what config.yaml holds
        for logger in trainer.loggers:
            logger.log_hyperparams({"config": resolved})
