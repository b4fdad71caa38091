"""Runs several 2-process CPU DDP fits in one launch (imports paid once): ``python ddp_fits.py spec.json``.

``spec.json`` maps a name to the CLI arguments of one ``fit``. Lightning's DDP launcher re-runs this script for
rank 1, so both ranks go through the fits in the same order. Each fit uses ``strategy=ddp`` as shipped
(``find_unused_parameters=False``): a weight that gets no gradient fails the second step. After each fit every
rank saves a checksum of each trainable parameter and the largest change from its initial value to
``<out>/<name>.rank<r>.pt``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning as L
import torch

from lit_docemb.commands.cli import DocEmbCLI


class ParameterRecord(L.Callback):
    """Records the parameters at the start of training; writes checksums and movement at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.initial: dict[str, torch.Tensor] = {}

    def on_train_start(self, trainer, pl_module) -> None:
        self.initial = {n: p.detach().clone() for n, p in pl_module.named_parameters() if p.requires_grad}

    def on_train_end(self, trainer, pl_module) -> None:
        now = {n: p.detach() for n, p in pl_module.named_parameters() if p.requires_grad}
        torch.save({"sums": {n: float(p.double().sum()) for n, p in now.items()},
                    "moved": {n: float((now[n] - self.initial[n]).abs().max()) for n in now},
                    "world_size": trainer.world_size, "global_step": trainer.global_step},
                   self.path.with_suffix(f".rank{trainer.global_rank}.pt"))


def run(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec_path).parent
    for name, args in spec.items():
        cli = DocEmbCLI(args=[*args, "--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp",
                              "--trainer.max_steps=2", "--trainer.precision=32-true",
                              "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
                              f"--trainer.logger.save_dir={out / name}",
                              "--trainer.enable_progress_bar=false",
                              f"--trainer.default_root_dir={out / name}"], run=False)
        cli.trainer.callbacks.append(ParameterRecord(out / name))
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)


if __name__ == "__main__":
    run(sys.argv[1])
