"""Items that a collator reads in a compact form, kept in the process from one epoch to the next.

A collator that needs less of an item than the item holds -- DECA's Doc2VecC collators read a document's id and its
words as ids, not its text -- says so with a method ``kept_item(item)``: the item's compact form, with a ``len``
(what it costs to keep), or ``None`` where it needs the item itself. The DataModule's loaders then serve the dataset
through :class:`KeptItems`: the first epoch reads each item (from Arrow, from a token cache) and keeps its compact
form; later epochs read nothing from the dataset. The items are kept where the dataset is read: in the main process,
or in each persistent dataloader worker, for the batches that worker reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch.utils.data import Dataset

from lit_docemb.data.core.sampling import read_items

#: Total ``len`` of the compact items kept per process (DECA's: words, 400 MB of int64 ids); beyond it an item is
#: read again every epoch.
KEPT_SIZE = 50_000_000


class KeptItems(Dataset):
    """``dataset`` served as ``keep`` makes its items, each read once and kept while the kept items' total ``len``
    stays within ``max_size`` (see the module docstring).

    Args:
        dataset: A map-style dataset (its batched ``__getitems__`` is used where it has one).
        keep: Item → its compact form (``len`` = its cost), or ``None`` to serve (and read) the item itself.
        max_size: The most that is kept, in ``len`` of the compact items.
    """

    def __init__(self, dataset: Dataset, keep: Callable[[Any], Any], max_size: int = KEPT_SIZE) -> None:
        self.dataset, self.keep, self.max_size = dataset, keep, max_size
        self.kept: dict[int, Any] = {}
        self.size = 0

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list:
        missing = [i for i in dict.fromkeys(indices) if i not in self.kept]
        served = {}
        for index, item in zip(missing, read_items(self.dataset, missing), strict=True):
            compact = self.keep(item)
            served[index] = item if compact is None else compact
            if compact is not None and self.size + len(compact) <= self.max_size:
                self.kept[index], self.size = compact, self.size + len(compact)
        return [self.kept[i] if i in self.kept else served[i] for i in indices]
