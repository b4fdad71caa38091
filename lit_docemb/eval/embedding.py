"""Exact dense search with a trained method: embed a corpus and queries, rank by the method's similarity, write
a TREC run -- e.g. the checkpoint-mined negatives of Graph-RoBERTa's second MSMARCO phase (§3.3).

Usage (any config whose data is a ranking DataModule; the checkpoint of that config's method)::

    python -m lit_docemb dense-search --config configs/graph_roberta/retrieval_msmarco_bm25.yaml \\
        --ckpt runs/graph_roberta_retrieval_msmarco_bm25/checkpoints/last.ckpt --split train --depth 100 \\
        --output runs/graph_roberta_retrieval_msmarco_bm25/train-top100.run [config overrides ...]

One process, exact search (the corpus embeddings in memory, scored in chunks with a running top-k).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from lit_docemb import distributed as dist
from lit_docemb.data.document import Document
from lit_docemb.methods.base import EmbeddingMethod

log = logging.getLogger(__name__)


@torch.no_grad()
def embed_with_ids(method: EmbeddingMethod, documents: Sequence[Document],
                   batch_size: int = 64) -> tuple[list[str], Tensor, int]:
    """(ids, embeddings, skipped) of the documents the method can represent, in document order: through the
    method's predict collator and ``embed`` in eval mode (its mode is restored after), batched by length (less
    padding). A collator may drop documents it cannot represent (CTPE: unsplittable ones) and report them as
    its batch's ``skipped``; they are left out and counted."""
    if len(documents) == 0:
        raise ValueError("no documents to embed")
    collate, was_training = method.collator("predict"), method.training
    order = sorted(range(len(documents)), key=lambda i: len(documents[i].text))
    positions, ids, parts, skipped = [], [], [], 0
    method.eval()
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            batch = collate([documents[i] for i in rows])
            skipped += getattr(batch, "skipped", 0)
            if len(batch) == 0:
                continue
            parts.append(method.embed(method.transfer_batch_to_device(batch, method.device, 0)).float())
            kept = rows if len(batch) == len(rows) else _rows_of(batch.ids, rows, documents)
            positions += kept
            ids += list(batch.ids) if hasattr(batch, "ids") else [documents[i].id for i in kept]
    finally:
        method.train(was_training)
    if not parts:
        raise ValueError(f"{type(method).__name__} could represent none of {len(documents)} documents")
    embeddings, positions = torch.cat(parts), torch.tensor(positions)
    order_back = torch.argsort(positions)
    return [ids[i] for i in order_back.tolist()], embeddings[order_back.to(embeddings.device)], skipped


def _rows_of(ids: Sequence[str], rows: list[int], documents: Sequence[Document]) -> list[int]:
    """The document rows of a batch that kept only some of ``rows``' documents, from the ids it kept."""
    free: dict[str, list[int]] = {}
    for row in reversed(rows):
        free.setdefault(documents[row].id, []).append(row)
    return [free[doc_id].pop() for doc_id in ids]


def embed_documents(method: EmbeddingMethod, documents: Sequence[Document], batch_size: int = 64) -> Tensor:
    """(N, D) fp32 embeddings in document order (see :func:`embed_with_ids`); a document the method cannot
    represent is an error."""
    _, embeddings, skipped = embed_with_ids(method, documents, batch_size)
    if skipped:
        raise ValueError(f"{type(method).__name__} could not represent {skipped} of {len(documents)} documents")
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
    """:func:`embed_documents` of a corpus split across the ranks of the process group: rank r embeds rows
    ``[r*N//W, (r+1)*N//W)``, and every rank gets the (N, D) embeddings in document order. One process (or fewer
    documents than ranks): plain :func:`embed_documents`. Every rank must call it with the same documents."""
    world, me = dist.world_size(), dist.rank()
    if world == 1 or len(documents) < world:
        return embed_documents(method, documents, batch_size)
    n = len(documents)
    local = embed_documents(method, _Rows(documents, me * n // world, (me + 1) * n // world), batch_size)
    return dist.gather_no_grad(local)  # (N, D): rank 0's rows first
