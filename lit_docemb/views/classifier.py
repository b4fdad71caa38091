"""The classifier's batches: a backbone's batch plus each document's label index."""

from __future__ import annotations

from collections.abc import Callable

import torch

from lit_docemb.data.core.batches import LabelledBatch
from lit_docemb.data.core.document import Document


class LabelledCollator:
    """Documents -> :class:`LabelledBatch`: the backbone's document batch and the label indices. A document
    whose label is missing or not among ``labels`` is left out and counted (``skipped``)."""

    def __init__(self, collate: Callable, labels: list[str]) -> None:
        self.collate = collate
        self.index = {label: i for i, label in enumerate(labels)}

    def __call__(self, documents: list[Document]) -> LabelledBatch:
        kept = [d for d in documents if d.label in self.index]
        targets = torch.tensor([self.index[d.label] for d in kept], dtype=torch.long)
        return LabelledBatch(self.collate(kept), targets, skipped=len(documents) - len(kept))
