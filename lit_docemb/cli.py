"""``python -m lit_docemb fit|validate|test|predict --config <yaml> ...``: LightningCLI in subclass mode.

Every :class:`~lit_docemb.methods.base.EmbeddingMethod` is a ``--model`` and every
:class:`~lit_docemb.data.datamodule.DocumentDataModule` a ``--data``; ``--help`` lists the known ones.
A fit keeps one wandb run id per run folder (:mod:`lit_docemb.loggers`) and writes checkpoints atomically
(:class:`~lit_docemb.callbacks.AtomicCheckpointIO`, unless the config names another CheckpointIO) and logs
documents/s, tokens/s and peak memory (:class:`~lit_docemb.callbacks.Throughput`, unless the config has one).
``python -m lit_docemb slurm ...`` writes and submits a SLURM job (:mod:`lit_docemb.slurm`).
"""

from __future__ import annotations

import os
import sys

import lightning as L
from lightning.pytorch.cli import LightningCLI
from lightning.fabric.plugins.environments import ClusterEnvironment, SLURMEnvironment
from lightning.pytorch.plugins.io import CheckpointIO

import lit_docemb.data  # noqa: F401  (registers the DataModules as known subclasses)
import lit_docemb.methods  # noqa: F401  (registers the methods)
from lit_docemb.callbacks import AtomicCheckpointIO, SaveRunConfig, SlurmRequeue, Throughput
from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.loggers import configure_wandb_loggers
from lit_docemb.methods.base import EmbeddingMethod


class DocEmbCLI(LightningCLI):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("save_config_callback", SaveRunConfig)
        kwargs.setdefault("save_config_kwargs", {"save_to_log_dir": False})
        super().__init__(EmbeddingMethod, DocumentDataModule, *args, subclass_mode_model=True,
                         subclass_mode_data=True, auto_configure_optimizers=False, **kwargs)

    def before_instantiate_classes(self) -> None:
        if self.subcommand == "fit":
            configure_wandb_loggers(self.config.fit.trainer)

    def instantiate_trainer(self, **kwargs) -> L.Trainer:
        plugins = kwargs.pop("plugins", self._get(self.config_init, "trainer", default={}).get("plugins"))
        plugins = [] if plugins is None else list(plugins) if isinstance(plugins, list) else [plugins]
        if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
            plugins.append(AtomicCheckpointIO())
        requeue = SLURMEnvironment.detect() and not any(isinstance(p, ClusterEnvironment) for p in plugins)
        if requeue:  # preemption handled by SlurmRequeue at a batch end, not inside Lightning's signal handler
            plugins.append(SLURMEnvironment(auto_requeue=False))
        trainer = super().instantiate_trainer(plugins=plugins, **kwargs)
        if requeue:
            trainer.callbacks.append(SlurmRequeue())
        if not any(isinstance(c, Throughput) for c in trainer.callbacks):  # documents/s, tokens/s, peak memory
            trainer.callbacks.append(Throughput())
        return trainer


def main(args: list[str] | None = None) -> DocEmbCLI | None:
    argv = sys.argv[1:] if args is None else args
    if argv[:1] == ["slurm"]:
        from lit_docemb.slurm import submit_main

        submit_main(argv[1:])
        return None
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # tokenisation runs in dataloader workers
    return DocEmbCLI(args=args)
