"""Shared LightningDataModule for document corpora.

A corpus DataModule only says how to read its documents (:meth:`DocumentDataModule.load_documents`); this
base splits them into train/validation by a stable hash of the document id (independent of order and size,
so the same document is always held out), drops empty documents with a count, and builds the dataloaders.
The *method* decides what a batch is, and says so with one explicit call, :meth:`DocumentDataModule.connect`:
its collator factory (``collator(stage)``), and, for a method that reads token ids cached on disk rather than
documents, its :class:`~lit_docemb.data.caches.token_cache.TokenCache` built with its tokenizer (Graph-RoBERTa's
passages, DocSplit's sentences, CoLDE's sections). Every lit_docemb method makes that call in its ``setup`` (Lightning
runs it after the DataModule's ``setup``); code that uses a DataModule's loaders without a Trainer calls it itself.
With a token cache, the cache is opened over the corpus (tokenizing once, on the first run) and the collator receives
its rows (:class:`~lit_docemb.data.caches.passage_cache.TokenizedPassages` for Graph-RoBERTa), in the same splits and
order.

Training, validation and test batches come from a :class:`~lit_docemb.data.core.sampling.ResumableLoader`: under
DDP every rank gets as many batches as the others (no hang on an uneven tail), every document is seen once per
epoch (no padding duplicates), the training order is reshuffled every epoch from (seed, epoch), and a run
resumed from a mid-epoch checkpoint continues with the next unseen batch. See ``sampling.py`` for why
map-style datasets over memory-mapped Arrow tables are how this scales.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import logging
import os
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader, Dataset

from lit_docemb.data.core.batch_buffer import to_device_in_one_copy
from lit_docemb.data.core.contract import EvaluationData, MethodBatches
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.kept_items import KeptItems
from lit_docemb.data.caches.token_cache import TokenCache
from lit_docemb.data.core.reading import READ_COUNT_KEYS, is_decoding_count, reading_summary
from lit_docemb.data.core.sampling import DistributedBatchSampler, ResumableLoader, read_items
from lit_docemb.errors import ConfigError, require

log = logging.getLogger(__name__)

Collator = Callable[[list[Document]], Any]

STATS_FILE = "data_stats.json"  # what a run read and skipped, in its run folder


def stable_fraction(doc_id: str, seed: int = 0) -> float:
    """Maps a document id to [0, 1) deterministically across processes, machines and Python versions."""
    digest = hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class DocumentDataset(Dataset):
    """A map-style dataset over a sequence of documents (a list, or a lazily indexed corpus), or of any items
    aligned with them (their cached tokenized passages).

    The indices are one numpy array (8 bytes a document), not a list of Python ints: forked dataloader
    workers would copy a list page by page as they touch its reference counts.
    """

    def __init__(self, documents: Sequence[Document], indices: Sequence[int] | np.ndarray | None = None) -> None:
        self.documents = documents
        self.indices = np.arange(len(documents)) if indices is None else np.asarray(indices, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> Document:
        return self.documents[int(self.indices[i])]

    def __getitems__(self, rows: Sequence[int]) -> list:
        """The items at ``rows``, in one read where the documents support it (an Arrow-backed corpus)."""
        return read_items(self.documents, self.indices[np.asarray(rows, dtype=np.int64)].tolist())


class ConcatDocuments(ConcatDataset):
    """Splits served as one dataset (``fit_on: all``) whose batched read asks each split for its rows at once
    (torch's ``ConcatDataset`` reads item by item, one Arrow row at a time). The first ``labelled`` splits keep their
    labels; the others (held-out validation and test documents) are served without them, so that a method that reads
    labels in training (a classifier's targets, CoLDE's similarity groups) reads the training split's alone."""

    def __init__(self, datasets: Sequence[Dataset], labelled: int) -> None:
        super().__init__(datasets)
        self.labelled = labelled

    def __getitem__(self, index: int):
        return self.__getitems__([index + len(self) if index < 0 else index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list:
        out: list = [None] * len(indices)
        by_part: dict[int, list[tuple[int, int]]] = {}
        for position, index in enumerate(indices):
            part = bisect.bisect_right(self.cumulative_sizes, index)
            by_part.setdefault(part, []).append((position, index - (self.cumulative_sizes[part - 1] if part else 0)))
        for part, rows in by_part.items():
            items = read_items(self.datasets[part], [row for _, row in rows])
            for (position, _), item in zip(rows, items, strict=True):
                out[position] = item if part < self.labelled else without_label(item)
        return out


def without_label(item):
    """``item`` (a document, or a cache's row of one) with no label."""
    return dataclasses.replace(item, label=None) if getattr(item, "label", None) is not None else item


def documents_at(dataset, rows: Sequence[int], corpus: Sequence[Document] | None = None) -> list[Document]:
    """The documents at ``rows`` of a split: its items, or, where a method's cache has replaced them by cached rows
    (Graph-RoBERTa's passages, DocSplit's sentences, CoLDE's sections, DECA's word types in training), the documents
    of ``corpus`` (the DataModule's ``documents``, which the split's indices index) behind them; read in one batch."""
    rows = list(rows)
    if rows and corpus is not None and hasattr(dataset, "indices") and not isinstance(dataset[rows[0]], Document):
        return read_items(corpus, [int(dataset.indices[i]) for i in rows])
    return read_items(dataset, rows)


class DocumentDataModule(L.LightningDataModule, ABC, EvaluationData, MethodBatches):
    """Base class of every corpus DataModule; it declares what evaluation asks of one
    (:class:`~lit_docemb.data.core.contract.EvaluationData`), with the answers of a corpus of documents without
    queries, labels or pairs, which a subclass changes, and batches with the method's collators
    (:class:`~lit_docemb.data.core.contract.MethodBatches`).

    Args:
        batch_size: Documents per batch and per device (default 16). Give it or ``global_batch_size``, not both.
        global_batch_size: Documents per optimizer step over all devices, as a paper states its batch: each device
            takes ``global_batch_size / (devices x trainer.accumulate_grad_batches)`` documents a batch, so the
            in-batch negatives gathered from all devices (and the step) are the same on 1 GPU or 8. A count that
            does not divide is refused in one line when the trainer starts.
        num_workers: Dataloader worker processes (view building and tokenisation run there).
        val_fraction: Share of documents held out for validation, chosen by a hash of the id.
        max_val_documents: Upper bound on held-out documents (evaluation cost stays bounded on huge corpora).
        seed: Seed of the train/validation split and of the training order (a new permutation every epoch,
            a function of seed and epoch; a resumed run keeps the seed its checkpoint was trained with).
        max_documents: Read at most this many documents (quick experiments); ``None`` reads all.
        predict_split: Documents that ``predict`` embeds: the held-out ``"val"`` set or ``"all"``.
        drop_last: Drop an epoch's last global step when it holds fewer than ``batch_size`` documents per
            device. By default every training document is seen once per epoch, and the last batch may be
            smaller, even empty on some devices (collators and losses must accept an empty batch).
    """

    def __init__(
        self,
        batch_size: int | None = None,
        global_batch_size: int | None = None,
        num_workers: int = 2,
        val_fraction: float = 0.01,
        max_val_documents: int | None = 10_000,
        seed: int = 0,
        max_documents: int | None = None,
        predict_split: Literal["val", "all"] = "all",
        drop_last: bool = False,
    ) -> None:
        super().__init__()
        if batch_size is not None and global_batch_size is not None:
            raise ConfigError(f"data.init_args.batch_size ({batch_size}, per device) and global_batch_size "
                              f"({global_batch_size}, over all devices) are both set: keep one")
        require(batch_size is None or batch_size >= 1, "batch_size", ">= 1 (documents per batch and device)",
                batch_size)
        require(global_batch_size is None or global_batch_size >= 1, "global_batch_size",
                ">= 1 (documents per optimizer step over all devices)", global_batch_size)
        require(num_workers >= 0, "num_workers", ">= 0 (0 reads in the main process)", num_workers)
        require(0.0 <= val_fraction < 1.0, "val_fraction", "in [0, 1)", val_fraction)
        require(max_val_documents is None or max_val_documents >= 0, "max_val_documents", ">= 0 or null",
                max_val_documents)
        require(max_documents is None or max_documents >= 1, "max_documents", ">= 1 or null", max_documents)
        self._batch_size = 16 if batch_size is None and global_batch_size is None else batch_size
        self.global_batch_size = global_batch_size
        self.num_workers = num_workers
        self.val_fraction = val_fraction
        self.max_val_documents = max_val_documents
        self.seed = seed
        self.max_documents = max_documents
        self.predict_split = predict_split
        self.drop_last = drop_last
        self.all_set: DocumentDataset | None = None
        self.collate_fn: Collator | dict[str, Collator] | None = None  # set directly: wins over connect's
        self.collator_factory: Callable[[str], Collator] | None = None
        self.token_cache: TokenCache | None = None
        self.documents: Sequence[Document] | None = None  # the corpus the datasets index (after setup)
        self.stats: Counter = Counter()
        self.data_stats: dict[str, Any] = {}
        #: The run folder that ``data_stats.json`` goes to; the CLI sets it to ``trainer.default_root_dir``.
        self.stats_dir: str | None = None
        self.train_set: DocumentDataset | None = None
        self.val_set: DocumentDataset | None = None
        self.test_set: Dataset | None = None  # a corpus with a test split sets it up

    @property
    def fit_set(self) -> DocumentDataset | None:
        """What ``train_dataloader`` serves: the training split."""
        return self.train_set

    @property
    def batch_size(self) -> int:
        """Documents per batch on this device: ``batch_size``, or ``global_batch_size`` divided over the trainer's
        devices and accumulated batches (the whole of it without a trainer: one process)."""
        if self.global_batch_size is None:
            return self._batch_size
        trainer = self.trainer
        shares = 1 if trainer is None else trainer.world_size * trainer.accumulate_grad_batches
        if self.global_batch_size % shares:
            raise ConfigError(f"data.init_args.global_batch_size {self.global_batch_size} does not divide over "
                              f"{trainer.world_size} device(s) x {trainer.accumulate_grad_batches} accumulated "
                              f"batch(es): choose devices and trainer.accumulate_grad_batches whose product divides "
                              f"it, or set data.init_args.batch_size (per device) instead")
        return self.global_batch_size // shares

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        """A per-device batch set after construction (as a tuner or a test does) replaces a global one."""
        self._batch_size, self.global_batch_size = value, None

    def config_paths(self) -> dict[str, tuple[str | list[str] | None, str]]:
        """The init arguments that name local files or folders which must exist: argument name → (its value, what
        it should point at). A subclass adds its own; an argument that may also be a hub name is listed only when
        it looks like a local path."""
        return {}

    def prepare_data(self) -> None:
        """Checks :meth:`config_paths` before anything is read, so that a missing path fails the run before its
        first step with one message naming the config key."""
        for key, (value, what) in self.config_paths().items():
            paths = [] if value is None else [value] if isinstance(value, str | os.PathLike) else value
            for path in paths:
                if not os.path.exists(os.path.expanduser(path)):
                    raise ConfigError(f"data.init_args.{key}: {str(path)!r} does not exist; set it to {what} "
                                      f"(layout: python -m lit_docemb fit --data.help {type(self).__name__})")

    @abstractmethod
    def load_documents(self) -> Sequence[Document]:
        """Returns the corpus as an indexable sequence of documents (a list or a lazily indexed corpus)."""

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        documents = self.load_documents()
        if self.max_documents is not None:
            documents = documents[: self.max_documents]
        ids = self._usable_ids(documents)
        usable = np.fromiter((doc_id is not None for doc_id in ids), dtype=bool, count=len(ids))
        held_out = np.fromiter((doc_id is not None and stable_fraction(doc_id, self.seed) < self.val_fraction
                                for doc_id in ids), dtype=bool, count=len(ids))
        train, val = np.flatnonzero(usable & ~held_out), np.flatnonzero(held_out)
        if self.max_val_documents is not None:
            val = val[: self.max_val_documents]
        if not len(train):
            raise ValueError(f"{type(self).__name__}: no non-empty training documents (read {len(documents)})")
        self.documents = documents
        self.train_set, self.val_set = DocumentDataset(documents, train), DocumentDataset(documents, val)
        self.all_set = DocumentDataset(documents, np.sort(np.concatenate([train, val])))
        self._open_token_cache()
        splits = {"train": len(train), "validation": len(val)}
        self.report_reading("documents", int(usable.sum()), splits, self.stats)

    def report_reading(self, part: str, documents_read: int, splits: dict[str, int], skipped: Counter) -> None:
        """Makes a read visible, cached or not: one WARNING line (documents read and kept, per split, skipped by
        reason: a skipped record is in no count but its reason's; kept documents whose bytes the encoding could not
        decode counted apart, under ``decoded`` in ``data_stats``), and, when the DataModule runs in a trainer,
        ``<stats_dir>/data_stats.json`` (rank 0, when a run folder was set as ``stats_dir``, as the CLI does; every
        part read so far, under ``part``) and a
        ``data_stats`` hyper-parameter of each of the trainer's loggers."""
        counted = {reason: int(n) for reason, n in sorted(skipped.items()) if n and reason not in READ_COUNT_KEYS}
        self.data_stats[part] = {"documents_read": int(documents_read), **{k: int(v) for k, v in splits.items()},
                                 "skipped": {k: n for k, n in counted.items() if not is_decoding_count(k)}}
        decoded = {k: n for k, n in counted.items() if is_decoding_count(k)}
        if decoded:  # kept documents, not skipped ones
            self.data_stats[part]["decoded"] = decoded
        log.warning(reading_summary(f"{type(self).__name__} {part}", documents_read, splits, counted))
        trainer = self.trainer
        if trainer is None:
            return
        report = {"corpus": type(self).__name__, **self.data_stats}
        for logger in trainer.loggers:
            logger.log_hyperparams({"data_stats": report})
        root = self.stats_dir
        if trainer.is_global_zero and root and "://" not in str(root):
            os.makedirs(root, exist_ok=True)
            with open(os.path.join(root, STATS_FILE), "w", encoding="utf-8") as f:
                f.write(json.dumps(report, indent=2) + "\n")

    def setup_evaluation(self) -> None:
        """Readies the DataModule for ``evaluate`` and ``interpolate``: the splits of ``fit`` (``setup("fit")``), which
        the evaluations score and a method without a checkpoint prepares from (its ``train_set``)."""
        self.setup("fit")

    def report_evaluation_reading(self) -> None:
        """Reports, after the evaluations, what they read themselves: nothing here, ``setup`` read the documents and
        reported them."""

    def ranked_split(self) -> Literal["test", "val"] | None:
        """The query split evaluations rank by default; None: these documents come with no queries, and evaluations
        score the documents themselves (held out, labelled, paired)."""
        return None

    def pair_splits(self) -> bool:
        """Whether validation and test are labelled document pairs: not here, the splits hold documents."""
        return False

    def connect(self, collator: Callable[[str], Collator], token_cache: TokenCache | None = None) -> None:
        """Wires the method in: its collators, and where it reads cached token ids, its token cache.

        Args:
            collator: The method's collator factory: stage (``"fit"``, ``"validate"``, ``"predict"``) → the
                function turning a list of dataset items into a batch (run in dataloader workers).
            token_cache: The method's token cache: the datasets then hold each document's row of it (a
                :class:`~lit_docemb.data.caches.passage_cache.TokenizedPassages` for a passage cache; opened now if
                ``setup`` already ran, else by ``setup``); ``None``: the datasets hold the documents.
        """
        self.collator_factory = collator
        if token_cache is not self.token_cache:
            self.token_cache = token_cache
            self._open_token_cache()

    def _open_token_cache(self) -> None:
        """Points the datasets of ``setup`` at the documents, or at their rows of the token cache (same order)."""
        if self.documents is None:
            return
        items = self.documents if self.token_cache is None else self.token_cache.open(self.documents)
        for dataset in (self.train_set, self.val_set, self.all_set):
            dataset.documents = items

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
        if self.collator_factory is None:
            raise RuntimeError(f"{type(self).__name__} needs a collator: call datamodule.connect(method.collator) "
                               "before asking for a dataloader (a lit_docemb method does it in its setup when a "
                               "Trainer runs it), or set datamodule.collate_fn")
        return self.collator_factory(stage)

    def _loader(self, dataset: DocumentDataset, stage: str, shuffle: bool) -> ResumableLoader:
        """Every document of ``dataset`` once, the same number of batches on every rank; its workers (if any) live
        from its first epoch to the end of the run, in validation as in training (the collators seed each batch).
        A collator that reads a compact form of its items (``kept_item``) gets them kept from one epoch to the next
        (:mod:`~lit_docemb.data.core.kept_items`)."""
        sampler = DistributedBatchSampler(len(dataset), self.batch_size, shuffle=shuffle, seed=self.seed,
                                          drop_last=self.drop_last and stage == "fit")
        collate = self._collator(stage)
        keep = getattr(collate, "kept_item", None)
        return ResumableLoader(dataset if keep is None else KeptItems(dataset, keep), sampler, collate_fn=collate,
                               num_workers=self.num_workers, persistent_workers=True)

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """A batch whose tensors view one buffer (a worker's, :mod:`lit_docemb.data.core.batch_buffer`) reaches the
        device in one copy; any other batch moves as Lightning moves it. (Here rather than in the methods: Lightning
        warns when a module overrides this hook and a DataModule is passed.)"""
        moved = to_device_in_one_copy(batch, device, non_blocking=device.type == "cuda")
        return super().transfer_batch_to_device(batch, device, dataloader_idx) if moved is None else moved

    def train_dataloader(self) -> ResumableLoader:
        return self._loader(self.train_set, "fit", shuffle=True)

    def val_dataloader(self) -> ResumableLoader:
        return self._loader(self.val_set, "validate", shuffle=False)

    def test_dataloader(self) -> ResumableLoader:
        return self._loader(self.val_set, "validate", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        """A plain DataLoader: under DDP Lightning shards it without repeats (``UnrepeatedDistributedSampler``)
        and keeps track of each prediction's index."""
        dataset = self.all_set if self.predict_split == "all" else self.val_set
        return DataLoader(dataset, batch_size=self.batch_size, num_workers=self.num_workers,
                          collate_fn=self._collator("predict"))
