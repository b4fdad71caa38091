"""Linear-probe error rate and k-means NMI of a method's embeddings at the end of ``fit`` (DECA Tables 3-5)."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.utilities import rank_zero_only

from lit_docemb.data.document import Document
from lit_docemb.eval.classification import kmeans_clustering, linear_probe
from lit_docemb.eval.dense_search import embed_documents


def evaluate_labelled(module: L.LightningModule, train: list[Document], test: list[Document], batch_size: int = 256,
                      c: float = 1.0, seed: int = 0) -> dict[str, float]:
    """``probe/{accuracy,error_rate,macro_f1}`` of a logistic regression fitted on the embeddings of ``train``
    and scored on ``test``, and ``cluster/{nmi,purity}`` of k-means (k = number of labels) fitted on ``train``
    and applied to ``test`` (:mod:`lit_docemb.eval.classification`). Documents without a label are an error."""
    for name, docs in (("train", train), ("test", test)):
        unlabelled = sum(d.label is None for d in docs)
        if not docs or unlabelled:
            raise ValueError(f"the {name} documents must be labelled and non-empty ({len(docs)} documents, "
                             f"{unlabelled} without a label)")
    train_x, test_x = embed_documents(module, train, batch_size), embed_documents(module, test, batch_size)
    train_y, test_y = [d.label for d in train], [d.label for d in test]
    metrics = {f"probe/{k}": v for k, v in linear_probe(train_x, train_y, test_x, test_y, c=c).items()}
    metrics |= {f"cluster/{k}": v for k, v in kmeans_clustering(train_x, train_y, test_x, test_y, seed=seed).items()}
    return metrics


class LabelledEmbeddingEvaluation(L.Callback):
    """After training, on global rank 0: :func:`evaluate_labelled` with the DataModule's labelled training
    documents (its train and validation sets) and its test set (a
    :class:`~lit_docemb.data.LabelledTextDataModule` with a test split), logged as ``probe/error_rate``,
    ``cluster/nmi``, ... and kept in :attr:`metrics`.

    Args:
        batch_size: Documents embedded per forward pass.
        max_documents: Use at most this many training and this many test documents (``None``: all).
        c: Inverse regularisation strength of the logistic regression.
        seed: Seed of k-means.
    """

    def __init__(self, batch_size: int = 256, max_documents: int | None = None, c: float = 1.0, seed: int = 0) -> None:
        if batch_size < 1 or (max_documents is not None and max_documents < 2):
            raise ValueError(f"need batch_size >= 1 and max_documents >= 2 or null, got {batch_size}, {max_documents}")
        self.batch_size, self.max_documents, self.c, self.seed = batch_size, max_documents, c, seed
        self.metrics: dict[str, float] | None = None

    def _documents(self, *datasets) -> list[Document]:
        docs = [d[i] for d in datasets if d is not None for i in range(len(d))]
        return docs[:self.max_documents] if self.max_documents is not None else docs

    @rank_zero_only
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        data = trainer.datamodule
        if getattr(data, "test_set", None) is None:
            raise ValueError(f"{type(self).__name__} needs a DataModule with a labelled test split (test_set), "
                             f"got {type(data).__name__} without one")
        self.metrics = evaluate_labelled(pl_module, self._documents(data.train_set, data.val_set),
                                         self._documents(data.test_set), self.batch_size, self.c, self.seed)
        for logger in trainer.loggers:
            logger.log_metrics(self.metrics, step=trainer.global_step)
        print(" ".join(f"{k}={v:.4f}" for k, v in sorted(self.metrics.items())))
