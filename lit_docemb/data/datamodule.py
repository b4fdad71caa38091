"""Shared LightningDataModule for document corpora.

A corpus DataModule only says how to read its documents (:meth:`DocumentDataModule.load_documents`); this
base splits them into train/validation by a stable hash of the document id (independent of order and size,
so the same document is always held out), drops empty documents with a count, and builds the dataloaders.
The *method* decides what a batch is: the dataloaders use the collator of the LightningModule being trained
(``lightning_module.collator(stage)``), so DataModules stay method-agnostic.
"""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

import lightning as L
from torch.utils.data import DataLoader, Dataset

from lit_docemb.data.document import Document

log = logging.getLogger(__name__)

Collator = Callable[[list[Document]], Any]


def stable_fraction(doc_id: str, seed: int = 0) -> float:
    """Maps a document id to [0, 1) deterministically across processes, machines and Python versions."""
    digest = hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class DocumentDataset(Dataset):
    """A map-style dataset over a sequence of documents (a list, or a lazily indexed corpus)."""

    def __init__(self, documents: Sequence[Document], indices: Sequence[int] | None = None) -> None:
        self.documents = documents
        self.indices = list(range(len(documents))) if indices is None else list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> Document:
        return self.documents[self.indices[i]]


class DocumentDataModule(L.LightningDataModule, ABC):
    """Base class of every corpus DataModule.

    Args:
        batch_size: Documents per batch and per device.
        num_workers: Dataloader worker processes (view building and tokenisation run there).
        val_fraction: Share of documents held out for validation, chosen by a hash of the id.
        max_val_documents: Upper bound on held-out documents (evaluation cost stays bounded on huge corpora).
        seed: Seed of the train/validation split.
        max_documents: Read at most this many documents (quick experiments); ``None`` reads all.
        predict_split: Documents that ``predict`` embeds: the held-out ``"val"`` set or ``"all"``.
    """

    def __init__(
        self,
        batch_size: int = 16,
        num_workers: int = 2,
        val_fraction: float = 0.01,
        max_val_documents: int | None = 10_000,
        seed: int = 0,
        max_documents: int | None = None,
        predict_split: Literal["val", "all"] = "all",
    ) -> None:
        super().__init__()
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.val_fraction = val_fraction
        self.max_val_documents = max_val_documents
        self.seed = seed
        self.max_documents = max_documents
        self.predict_split = predict_split
        self.all_set: DocumentDataset | None = None
        self.collate_fn: Collator | dict[str, Collator] | None = None
        self.stats: Counter = Counter()
        self.train_set: DocumentDataset | None = None
        self.val_set: DocumentDataset | None = None

    @abstractmethod
    def load_documents(self) -> Sequence[Document]:
        """Returns the corpus as an indexable sequence of documents (a list or a lazily indexed corpus)."""

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        documents = self.load_documents()
        if self.max_documents is not None:
            documents = documents[: self.max_documents]
        train, val = [], []
        for i, doc_id in enumerate(self._usable_ids(documents)):
            if doc_id is None:
                continue
            held_out = stable_fraction(doc_id, self.seed) < self.val_fraction
            (val if held_out else train).append(i)
        if self.max_val_documents is not None:
            val = val[: self.max_val_documents]
        if not train:
            raise ValueError(f"{type(self).__name__}: no non-empty training documents (read {len(documents)})")
        self.train_set, self.val_set = DocumentDataset(documents, train), DocumentDataset(documents, val)
        self.all_set = DocumentDataset(documents, sorted(train + val))
        log.info("%s: %d train / %d validation documents, skipped %s", type(self).__name__, len(train), len(val),
                 dict(self.stats) or "none")

    def _usable_ids(self, documents: Sequence[Document]) -> list[str | None]:
        """Ids of the documents, ``None`` for empty ones (counted). Lazy corpora expose an ``ids`` column, read
        without converting every row; their empty documents are counted later, by the method's collator."""
        ids = getattr(documents, "ids", None)
        if ids is not None:
            return ids
        usable = []
        for doc in documents:
            if doc.is_empty():
                self.stats["empty_document"] += 1
            usable.append(None if doc.is_empty() else doc.id)
        return usable

    def _collator(self, stage: str) -> Collator:
        if self.collate_fn is not None:
            return self.collate_fn[stage] if isinstance(self.collate_fn, dict) else self.collate_fn
        module = self.trainer.lightning_module if self.trainer is not None else None
        if module is None or not hasattr(module, "collator"):
            raise RuntimeError(f"{type(self).__name__} needs a collator: train a lit_docemb method with it, "
                               "or set `datamodule.collate_fn`")
        return module.collator(stage)

    def _loader(self, dataset: Dataset, stage: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=self._collator(stage),
            drop_last=stage == "fit",
            persistent_workers=self.num_workers > 0 and stage == "fit",
            pin_memory=False,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, "fit", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, "validate", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, "validate", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        dataset = self.all_set if self.predict_split == "all" else self.val_set
        return self._loader(dataset, "predict", shuffle=False)
