"""``python -m lit_docemb fit|validate|test|predict --config <yaml> ...``: LightningCLI in subclass mode.

Every :class:`~lit_docemb.methods.base.EmbeddingMethod` is a ``--model`` and every
:class:`~lit_docemb.data.datamodule.DocumentDataModule` a ``--data``; ``--help`` lists the known ones.
"""

from __future__ import annotations

import os

from lightning.pytorch.cli import LightningCLI

import lit_docemb.data  # noqa: F401  (registers the DataModules as known subclasses)
import lit_docemb.methods  # noqa: F401  (registers the methods)
from lit_docemb.callbacks import SaveRunConfig
from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.methods.base import EmbeddingMethod


class DocEmbCLI(LightningCLI):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("save_config_callback", SaveRunConfig)
        kwargs.setdefault("save_config_kwargs", {"save_to_log_dir": False})
        super().__init__(EmbeddingMethod, DocumentDataModule, *args, subclass_mode_model=True,
                         subclass_mode_data=True, auto_configure_optimizers=False, **kwargs)


def main(args: list[str] | None = None) -> DocEmbCLI:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # tokenisation runs in dataloader workers
    return DocEmbCLI(args=args)
