"""Training's long-lived objects kept out of the garbage collector's full collections."""

from __future__ import annotations

import gc

import lightning as L
from lightning.pytorch.callbacks import Callback


class FrozenHeap(Callback):
    """Freezes (:func:`gc.freeze`) every object alive when training starts -- the model, the corpus tables, a
    vocabulary, an augmentation's thesaurus, torch's and Lightning's modules: about a million in DECA's MR run --
    and unfreezes them when it ends or fails. Each full collection during training walked them all again: 2 of the
    35 CPU seconds of DECA's DC+SC run on MR (``docs/performance.md``). Dataloader workers forked after the
    freeze do not copy those pages by walking them either. Garbage made of frozen objects waits for the unfreeze.

    Every lit_docemb method adds it (:meth:`~lit_docemb.methods.base.EmbeddingMethod.configure_callbacks`).
    """

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        gc.freeze()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        gc.unfreeze()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        gc.unfreeze()
