"""Exact-once, equal-count, resumable batching of a map-style corpus across DDP ranks and dataloader workers.

Why map-style over a memory-mapped Arrow table meets "streaming at any scale": a big corpus is read once,
as a stream with bounded memory, into a ``datasets`` Arrow cache (``Dataset.from_generator`` writes it in
chunks; :class:`~lit_docemb.data.core.arrow.ArrowDocuments`), and memory-mapped from then on. A rank holds no
documents, only a permutation of the row numbers (8 bytes a document: 64 MB for OpenWebText's 8M), and each
dataloader worker reads, by random access, only the rows of the batches it is handed. Random access is what
buys the guarantees an iterable stream cannot give without padding, dropping or replaying: a global shuffle
per epoch, every document once per epoch, the same number of batches on every rank, and a resume that
jumps straight to the next unseen batch.

:class:`DistributedBatchSampler` decides which rows each rank's batches hold; :class:`ResumableLoader` runs a
``DataLoader`` over it and saves how far the training loop got. Lightning's hooks reach the loader:

* ``set_epoch`` through ``loader.sampler`` (``lightning/fabric/utilities/data.py::_set_sampler_epoch``,
  called by ``FitLoop.on_advance_start`` and for evaluation loaders by ``_process_dataloader``);
* ``state_dict`` / ``load_state_dict``: the fit loop saves the state of every loader that has them in the
  checkpoint (``FitLoop.on_save_checkpoint``, ``CombinedLoader._state_dicts``) and gives it back before the
  first batch of a resumed run (``FitLoop.setup_data`` -> ``_load_combined_loader_states``);
* it is not a ``torch.utils.data.DataLoader``, so Lightning never swaps its sampler for a
  ``DistributedSampler`` (``DataConnector._prepare_dataloader`` leaves non-DataLoaders alone; a DataLoader
  with a custom batch sampler would be re-instantiated or rejected when ``use_distributed_sampler=True``).
  It therefore behaves the same whatever ``Trainer(use_distributed_sampler=...)`` says.

Randomness of a batch (DocSplit's sentence split, DECA's augmentations, Graph-RoBERTa's halves, CTPE's partners,
MLM masks) is a pure function of (seed, epoch, the batch's place in the epoch's order): every batch carries its
seed (:class:`SeededBatch`), and the loader runs the collator with the global random generators of torch,
``random`` and numpy seeded from it (:func:`seeded_random_state`), restoring the caller's state afterwards. So a
batch is the same whichever worker builds it, with any ``num_workers``, in an uninterrupted run and in one
resumed from a mid-epoch checkpoint; and collating never consumes the training process's own random stream
(dropout), which :class:`~lit_docemb.methods.callbacks.RandomStateCheckpoint` saves and restores.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, default_collate

from lit_docemb import distributed
from lit_docemb.data.core.batch_buffer import BufferedCollate, unpack

log = logging.getLogger(__name__)


def _mixed_seed(seed: int, *parts: int) -> int:
    """A 64-bit generator seed for (seed, epoch, ...): unlike ``seed + epoch``, (0, 1) and (1, 0) differ."""
    key = ":".join(str(x) for x in (seed, *parts))
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


class SeededBatch(list):
    """A batch of dataset indices with the seed of its randomness (a list: it pickles to the workers as one)."""

    def __init__(self, indices: list[int], seed: int) -> None:
        super().__init__(indices)
        self.seed = seed


@contextlib.contextmanager
def seeded_random_state(seed: int) -> Iterator[None]:
    """Runs the block with torch's CPU, Python's and numpy's global generators seeded from ``seed`` and gives
    the caller its own states back afterwards, as if the block had drawn nothing. GPU generators are left
    alone (``torch.manual_seed`` would reseed them too): collators run on the CPU."""
    saved = torch.get_rng_state(), random.getstate(), np.random.get_state()
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        torch.set_rng_state(saved[0])
        random.setstate(saved[1])
        np.random.set_state(saved[2])


class DistributedBatchSampler(Sampler[list[int]]):
    """This rank's batches of dataset indices: each index once per epoch, as many batches on every rank.

    An epoch is a permutation of ``range(N)`` drawn from (``seed``, epoch) (``range(N)`` itself without
    shuffling), cut into global steps of W*B indices. Each global step is split across the W ranks in
    contiguous slices as even as possible: in a step of R indices rank r gets R//W + (r < R%W), so B in
    every full step. Every rank thus yields ceil(N / (W*B)) batches (floor with ``drop_last``, which drops the
    last, partial step), the union over ranks is ``range(N)`` exactly once, and only the last batch may be
    smaller -- empty on the last ranks when fewer than W documents remain, so a collator and a loss must
    accept an empty batch (the gathers in ``losses/distributed.py`` do).

    Rank and world size are read when an epoch starts (from ``torch.distributed``), not at construction:
    under LightningCLI the DataModule exists before the process group.

    Args:
        num_documents: N, the size of the dataset.
        batch_size: B, documents per batch and per rank (in full global steps).
        shuffle: Draw a new permutation every epoch; ``False`` keeps dataset order (evaluation).
        seed: Seed of the permutations; the order is a function of (seed, epoch) only.
        drop_last: Drop the last global step when it has fewer than W*B documents.
        rank: Fixed rank instead of the process group's (tests, simulations).
        world_size: Fixed world size instead of the process group's.
    """

    def __init__(self, num_documents: int, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, rank: int | None = None, world_size: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.num_documents = num_documents
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.start = 0  # documents of this epoch's order already trained on, skipped by the next iteration

    def layout(self) -> tuple[int, int]:
        """(rank, world size) now: the fixed values if given, else the process group's."""
        world = self.world_size if self.world_size is not None else distributed.world_size()
        rank = self.rank if self.rank is not None else distributed.rank()
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} outside a world of {world} processes")
        return rank, world

    def documents_per_step(self) -> int:
        """W*B, the documents of one full global step."""
        return self.layout()[1] * self.batch_size

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch's permutation. A new epoch starts at its beginning; setting the current epoch again
        keeps a position restored by :meth:`resume` (Lightning calls it after loading a checkpoint)."""
        if epoch != self.epoch:
            self.epoch, self.start = epoch, 0

    def resume(self, epoch: int, documents: int) -> None:
        """The next iteration is epoch ``epoch``, without the first ``documents`` of its order."""
        if not 0 <= documents <= self.num_documents:
            raise ValueError(f"cannot resume after {documents} of {self.num_documents} documents")
        self.epoch, self.start = epoch, documents

    def order(self, epoch: int) -> torch.Tensor:
        """(N,) the indices of epoch ``epoch`` in visiting order, the same on every rank."""
        if not self.shuffle:
            return torch.arange(self.num_documents)
        generator = torch.Generator().manual_seed(_mixed_seed(self.seed, epoch))
        return torch.randperm(self.num_documents, generator=generator)

    def _end(self, start: int, step: int) -> int:
        """End of the part of the order this epoch visits from ``start``: N, or the last full step's end."""
        if not self.drop_last:
            return self.num_documents
        return start + (self.num_documents - start) // step * step

    def __len__(self) -> int:
        """Batches per rank in a whole epoch (also after :meth:`resume`, as Lightning counts them)."""
        step = self.documents_per_step()
        steps = self.num_documents / step
        return math.floor(steps) if self.drop_last else math.ceil(steps)

    def __iter__(self) -> Iterator[list[int]]:
        rank, world = self.layout()
        step = world * self.batch_size
        start, self.start, epoch = self.start, 0, self.epoch
        order = self.order(epoch)
        end = self._end(start, step)
        for first in range(start, end, step):
            chunk = order[first:min(first + step, end)]  # (R,) one global step
            share, extra = divmod(len(chunk), world)
            lo = rank * share + min(rank, extra)
            # seeded by where the batch starts in the epoch's order: unique per batch and rank, the same on resume
            yield SeededBatch(chunk[lo:lo + share + (rank < extra)].tolist(),
                              _mixed_seed(self.seed, epoch, first + lo))


class _SeededItems(list):
    """The items of one :class:`SeededBatch`, with its seed, on their way from the dataset to the collator."""

    def __init__(self, items: list, seed: int) -> None:
        super().__init__(items)
        self.seed = seed


class _SeededDataset(Dataset):
    """The dataset as the DataLoader sees it: a batch of indices is read at once (``__getitems__``, which the
    DataLoader prefers to per-item reads) and keeps its seed."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        return self.dataset[i]

    def __getitems__(self, indices: SeededBatch) -> _SeededItems:
        if not isinstance(indices, SeededBatch):
            raise TypeError(f"a ResumableLoader's batch sampler must yield SeededBatch, got {type(indices).__name__}"
                            f": keep the seed of DistributedBatchSampler's batches in a subclass")
        return _SeededItems(read_items(self.dataset, list(indices)), indices.seed)


def read_items(dataset, indices: list[int]) -> list:
    """The items of ``dataset`` at ``indices``: in one read where it has ``__getitems__`` (the DataLoader's batched
    read; an Arrow-backed corpus then formats a batch at once, not a row at a time), else one by one."""
    read = getattr(dataset, "__getitems__", None)
    return read(indices) if read is not None else [dataset[i] for i in indices]


def iter_items(dataset, chunk_size: int = 4096) -> Iterator:
    """Every item of ``dataset`` in order, read ``chunk_size`` at a time by :func:`read_items` (a pass over an
    Arrow-backed corpus row by row costs a formatter call per row)."""
    for start in range(0, len(dataset), chunk_size):
        yield from read_items(dataset, list(range(start, min(len(dataset), start + chunk_size))))


class _SeededCollate:
    """Runs the collator on a batch's items under :func:`seeded_random_state` with the batch's seed."""

    def __init__(self, collate_fn: Callable | None) -> None:
        self.collate_fn = default_collate if collate_fn is None else collate_fn

    def __call__(self, items: _SeededItems) -> Any:
        with seeded_random_state(items.seed):
            return self.collate_fn(list(items))


class ResumableLoader:
    """A ``DataLoader`` over a :class:`DistributedBatchSampler` that saves the training loop's position.

    The batch sampler runs in the main process and the DataLoader hands its batches to the workers in turn,
    so workers change nothing about which documents a rank sees. Workers prefetch: the position saved is
    the main process's, the documents in the batches this loader has *returned* (all ranks return equally
    many, so rank 0's state, the one Lightning saves, is every rank's). A resumed loader continues with the
    first batch not returned. The saved position counts documents, not batches, so a run may even resume
    on another number of devices: the rest of the epoch is then cut into the new global steps.

    ``len()`` is the length of a whole epoch, also after a resume (Lightning counts the batches it already
    trained and expects the rest). Iterating starts nothing until the first batch is requested.

    The collator runs with the global generators seeded per batch (see the module docstring), and the
    DataLoader draws its workers' base seed from a generator of its own, so neither building batches nor
    starting an epoch's iteration advances the training process's random state.

    Args:
        dataset: A map-style dataset whose indices the sampler draws.
        batch_sampler: Which indices each batch of this rank holds.
        collate_fn: List of dataset items -> batch (runs in the workers).
        num_workers: Dataloader worker processes.
        persistent_workers: Keep the workers between epochs.
        pin_memory: Pin batches in page-locked memory.
        one_buffer: With workers, each batch leaves its worker as one buffer and is rebuilt here as views into it
            (:mod:`lit_docemb.data.core.batch_buffer`: one shared-memory file per batch instead of one per tensor);
            ``False`` sends the collator's batch as it is.
    """

    def __init__(self, dataset: Dataset, batch_sampler: DistributedBatchSampler, collate_fn: Callable | None = None,
                 num_workers: int = 0, persistent_workers: bool = False, pin_memory: bool = False,
                 one_buffer: bool = True) -> None:
        self.batch_sampler = batch_sampler
        if one_buffer and num_workers > 0:
            collate_fn = BufferedCollate(default_collate if collate_fn is None else collate_fn)
        self.loader = DataLoader(_SeededDataset(dataset), batch_sampler=batch_sampler,
                                 collate_fn=_SeededCollate(collate_fn), num_workers=num_workers,
                                 persistent_workers=persistent_workers and num_workers > 0, pin_memory=pin_memory,
                                 generator=torch.Generator().manual_seed(batch_sampler.seed))
        self._position: tuple[int, int] | None = None  # (epoch, documents returned) of the latest iteration

    @property
    def sampler(self) -> DistributedBatchSampler:
        """The batch sampler, under the name Lightning calls ``set_epoch`` on."""
        return self.batch_sampler

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        sampler = self.batch_sampler
        epoch, position, step = sampler.epoch, sampler.start, sampler.documents_per_step()
        self._position = (epoch, position)
        for batch in self.loader:  # the sampler's iteration starts here, from the same (epoch, start, step)
            position = min(position + step, sampler.num_documents)
            self._position = (epoch, position)
            yield unpack(batch)

    def state_dict(self) -> dict[str, int]:
        """Epoch and documents of it already returned; a new epoch selected by ``set_epoch`` counts 0."""
        sampler = self.batch_sampler
        if self._position is not None and self._position[0] == sampler.epoch:
            epoch, documents = self._position
        else:
            epoch, documents = sampler.epoch, sampler.start
        return {"epoch": epoch, "documents": documents, "num_documents": sampler.num_documents,
                "seed": sampler.seed, "documents_per_step": sampler.documents_per_step()}

    def load_state_dict(self, state: dict[str, int]) -> None:
        sampler = self.batch_sampler
        if state["num_documents"] != sampler.num_documents:
            raise ValueError(f"the checkpoint's loader was over {state['num_documents']} documents, this one has "
                             f"{sampler.num_documents}: resume with the same corpus, split and max_documents")
        if state["documents_per_step"] != sampler.documents_per_step():
            log.warning("resuming with %d documents per global step instead of %d: the rest of epoch %d is cut "
                        "into the new steps, Lightning's batch count for it may be off", sampler.documents_per_step(),
                        state["documents_per_step"], state["epoch"])
        sampler.seed = state["seed"]
        sampler.resume(state["epoch"], state["documents"])
        self._position = None

    # Lightning seeds workers (seed_everything(workers=True)) through `worker_init_fn` and shuts persistent
    # workers down through `_iterator` (lightning/pytorch/utilities/combined_loader.py); both reach the DataLoader.
    @property
    def worker_init_fn(self) -> Callable | None:
        return self.loader.worker_init_fn

    @worker_init_fn.setter
    def worker_init_fn(self, fn: Callable | None) -> None:
        self.loader.worker_init_fn = fn

    @property
    def _iterator(self):
        return self.loader._iterator

    @_iterator.setter
    def _iterator(self, iterator) -> None:
        self.loader._iterator = iterator
