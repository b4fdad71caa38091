"""A run's long-lived objects kept out of the garbage collector's full collections."""

from __future__ import annotations

import gc

import lightning as L
from lightning.pytorch.callbacks import Callback


class FrozenHeap(Callback):
    """Freezes (:func:`gc.freeze`) the objects alive when a run's setup starts -- torch's, Lightning's and the
    other modules' -- and again when training starts -- the model, the corpus tables, a vocabulary, an
    augmentation's thesaurus: about a million in DECA's MR run -- and unfreezes them when the run ends or fails.
    Each full collection walked them all again: DECA's DC+SC run on MR spent 4.4 CPU seconds in collections
    without it, 1.3 with it (``docs/performance.md``). Dataloader workers forked after a freeze do not copy those
    pages by walking them either. Garbage made of frozen objects waits for the unfreeze.

    Every lit_docemb method adds it (:meth:`~lit_docemb.methods.base.EmbeddingMethod.configure_callbacks`).
    """

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        gc.freeze()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        gc.freeze()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        gc.unfreeze()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        gc.unfreeze()
