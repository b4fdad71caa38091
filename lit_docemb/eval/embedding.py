"""Documents embedded with a method, in memory: :func:`embed_rows` is the one loop (the method's predict collator
and ``embed`` in eval mode, batches sorted by length), and :func:`embed_documents`, :func:`embed_with_ids` and
:func:`embed_sharded` (a corpus split across ranks) read it. Every evaluation embeds through it (retrieval and
search: :mod:`lit_docemb.eval.search`, which ``python -m lit_docemb dense-search`` calls; probes, matching,
held-out retrieval, the figures' embedding map); :func:`predict_rows` gives the same loop's ``predict_step``
outputs (the figures' graph attention).

Embeddings written to files, on one device or several (``python -m lit_docemb embed`` and ``predict``), take
Lightning's predict loop instead so that every rank writes its own shard: :mod:`lit_docemb.eval.embedding_writers`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from lit_docemb import distributed as dist
from lit_docemb.data.core.document import Document
from lit_docemb.methods.base import EmbeddingMethod

log = logging.getLogger(__name__)


@torch.no_grad()
def embed_rows(method: EmbeddingMethod, documents: Sequence[Document], batch_size: int = 64,
               sharded: bool = False, progress: Callable[[int], None] | None = None) -> tuple[Tensor, Tensor]:
    """The one place documents are embedded with a method: (N, D, ...) fp32 embeddings in document order, an (N,)
    bool mask of the documents the method could represent (the others' rows are 0). Through the method's predict
    collator and ``embed`` in eval mode (its mode is restored after), batched by length (less padding). A
    collator may drop documents it cannot represent (CTPE: unsplittable ones; they are reported as its batch's
    ``skipped``).

    Args:
        method: The method, on its device.
        documents: What to embed.
        batch_size: Documents per forward pass.
        sharded: Split the documents across the ranks of the process group (rank r embeds rows
            ``[r*N//W, (r+1)*N//W)``) and gather, so every rank gets all N rows; every rank must call it with the
            same documents. One process, or fewer documents than ranks: each rank embeds them all.
        progress: Called after each batch with the number of this rank's documents it embedded (a progress bar).
    """
    if len(documents) == 0:
        raise ValueError("no documents to embed")
    world, me, n = dist.world_size(), dist.rank(), len(documents)
    if not sharded or world == 1 or n < world:
        return _embed_rows(method, documents, batch_size, progress)
    local, kept = _embed_rows(method, _Rows(documents, me * n // world, (me + 1) * n // world), batch_size, progress)
    return dist.gather_no_grad(local), dist.gather_no_grad(kept)  # (N, D), (N,): rank 0's rows first


def _embed_rows(method: EmbeddingMethod, documents: Sequence[Document], batch_size: int,
                progress: Callable[[int], None] | None = None) -> tuple[Tensor, Tensor]:
    positions, parts = [], []
    for rows, batch in _batches(method, documents, batch_size, progress):
        parts.append(method.embed(batch).float())
        positions += rows
    kept = torch.zeros(len(documents), dtype=torch.bool)
    if not parts:  # none represented: zero rows of the method's width (1 when it cannot say)
        return torch.zeros(len(documents), 1, device=method.device), kept.to(method.device)
    embedded = torch.cat(parts)  # (K, D) in length order
    out = embedded.new_zeros((len(documents), *embedded.shape[1:]))  # a method may give several vectors each
    index = torch.tensor(positions, device=embedded.device)
    out[index] = embedded
    kept[torch.tensor(positions)] = True
    return out, kept.to(embedded.device)


def _batches(method: EmbeddingMethod, documents: Sequence[Document], batch_size: int,
             progress: Callable[[int], None] | None = None) -> Iterator[tuple[list[int], Any]]:
    """The loop: (rows of ``documents`` it holds, batch on the method's device) of each batch of the method's
    predict collator that kept a document, by length, in eval mode (the method's mode restored after)."""
    collate, was_training = method.collator("predict"), method.training
    order = sorted(range(len(documents)), key=lambda i: _size(documents[i]))
    method.eval()
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            batch = collate([documents[i] for i in rows])
            if len(batch) > 0:
                kept = rows if len(batch) == len(rows) else _rows_of(batch.ids, rows, documents)
                yield kept, method.transfer_batch_to_device(batch, method.device, 0)
            if progress is not None:
                progress(len(rows))
    finally:
        method.train(was_training)


@torch.no_grad()
def predict_rows(method: EmbeddingMethod, documents: Sequence[Document],
                 batch_size: int = 64) -> list[tuple[list[int], dict]]:
    """Each batch's ``predict_step`` output with the rows of ``documents`` it holds, through :func:`embed_rows`'
    loop: what a figure draws beside the embeddings (Graph-RoBERTa's graph attention, one map per document)."""
    return [(rows, method.predict_step(batch, 0)) for rows, batch in _batches(method, documents, batch_size)]


def _size(item: Document | Any) -> int:
    """What embedding sorts by: a document's characters, or a method's cached row's token ids (the DataModule hands
    a method with a token cache its rows rather than documents)."""
    return len(item.text) if isinstance(item, Document) else len(item.input_ids)


def embed_with_ids(method: EmbeddingMethod, documents: Sequence[Document],
                   batch_size: int = 64) -> tuple[list[str], Tensor, int]:
    """(ids, embeddings, skipped) of the documents the method can represent, in document order (see
    :func:`embed_rows`); the documents it cannot represent are left out and counted."""
    embeddings, kept = embed_rows(method, documents, batch_size)
    if not kept.any():
        raise ValueError(f"{type(method).__name__} could represent none of {len(documents)} documents")
    rows = kept.cpu().nonzero().flatten().tolist()
    return [documents[i].id for i in rows], embeddings[kept], len(documents) - len(rows)


def _rows_of(ids: Sequence[str], rows: list[int], documents: Sequence[Document]) -> list[int]:
    """The document rows of a batch that kept only some of ``rows``' documents, from the ids it kept."""
    free: dict[str, list[int]] = {}
    for row in reversed(rows):
        free.setdefault(documents[row].id, []).append(row)
    return [free[doc_id].pop() for doc_id in ids]


def embed_documents(method: EmbeddingMethod, documents: Sequence[Document], batch_size: int = 64,
                    sharded: bool = False, progress: Callable[[int], None] | None = None) -> Tensor:
    """(N, D) fp32 embeddings in document order (see :func:`embed_rows`, whose arguments these are); a document
    the method cannot represent is an error."""
    embeddings, kept = embed_rows(method, documents, batch_size, sharded, progress)
    if not kept.all():
        raise ValueError(f"{type(method).__name__} could not represent {int((~kept).sum())} of {len(documents)} "
                         f"documents")
    return embeddings


class _Rows(Sequence):
    """Rows ``start:end`` of a sequence, without copying it (a lazily read Arrow corpus stays lazy)."""

    def __init__(self, items: Sequence, start: int, end: int) -> None:
        self.items, self.start, self.end = items, start, end

    def __len__(self) -> int:
        return self.end - self.start

    def __getitem__(self, i: int):
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.items[self.start + i]


def embed_sharded(method: EmbeddingMethod, documents: Sequence[Document], batch_size: int = 64) -> Tensor:
    """:func:`embed_documents` of a corpus split across the ranks of the process group (``sharded=True``): every
    rank gets the (N, D) embeddings in document order. Every rank must call it with the same documents."""
    return embed_documents(method, documents, batch_size, sharded=True)
