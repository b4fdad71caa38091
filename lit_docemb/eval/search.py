"""Nearest-neighbour search over document embeddings: exact (torch, chunked top-k) or FAISS.

:class:`ExactSearch` scores with any method's own similarity (:meth:`EmbeddingMethod.similarity`, CTPE's pairs
included). :class:`FaissSearch` needs an inner-product space: cosine (the vectors are L2-normalised first) or a
dot product; its ``flat`` index is exact, ``hnsw`` and ``ivf`` are approximate (see ``benchmarks/search.py`` for
their recall against exact search and their speed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from lit_docemb.data.core.document import Document, query_document
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.methods.base import EmbeddingMethod

Space = Literal["cos", "dot"]


def inner_product_space(method: EmbeddingMethod) -> Space:
    """The space FAISS searches for ``method``: ``"cos"`` for the base similarity, a :class:`DenseRetrieval`'s own
    choice; a method with its own similarity (CTPE's pairs) has none and is refused."""
    from lit_docemb.methods.dense_retrieval import DenseRetrieval

    if type(method).similarity is EmbeddingMethod.similarity:
        return "cos"
    if isinstance(method, DenseRetrieval):
        return method.hparams.similarity
    raise ValueError(f"{type(method).__name__} ranks with its own similarity, which FAISS cannot index: "
                     "use exact search")


def _as_numpy(x: Tensor) -> np.ndarray:
    return np.ascontiguousarray(x.detach().float().cpu().numpy())


class ExactSearch:
    """Exact top-k by the method's similarity, the corpus scored in chunks of ``chunk`` rows (running top-k).

    Args:
        chunk: Corpus rows scored at once (memory: queries x chunk scores).
    """

    def __init__(self, chunk: int = 65536) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.chunk = chunk

    def __call__(self, method: EmbeddingMethod, queries: Tensor, documents: Tensor,
                 depth: int) -> tuple[Tensor, Tensor]:
        """Scores and corpus rows (Q, k) of each query's ``depth`` best documents."""
        return top_k(method, queries, documents, depth, self.chunk)


class FaissSearch:
    """FAISS search in the method's inner-product space (:func:`inner_product_space`).

    Args:
        index: ``"flat"`` (``IndexFlatIP``, exact), ``"hnsw"`` (``IndexHNSWFlat``, graph, approximate) or
            ``"ivf"`` (``IndexIVFFlat``, inverted lists over k-means cells, approximate).
        hnsw_neighbours: HNSW graph degree (``M``).
        ef_construction: HNSW build-time beam width.
        ef_search: HNSW query-time beam width (raised to the depth when smaller).
        nlist: IVF cells; None: about 4 * sqrt(N).
        nprobe: IVF cells visited per query.
        seed: Seed of the IVF k-means.
    """

    def __init__(self, index: Literal["flat", "hnsw", "ivf"] = "flat", hnsw_neighbours: int = 32,
                 ef_construction: int = 200, ef_search: int = 128, nlist: int | None = None, nprobe: int = 16,
                 seed: int = 0) -> None:
        if index not in ("flat", "hnsw", "ivf"):
            raise ValueError(f"unknown FAISS index {index!r}: 'flat', 'hnsw' or 'ivf'")
        self.index, self.hnsw_neighbours, self.ef_construction = index, hnsw_neighbours, ef_construction
        self.ef_search, self.nlist, self.nprobe, self.seed = ef_search, nlist, nprobe, seed

    def build(self, vectors: np.ndarray, depth: int = 100):
        """A FAISS index of (N, D) float32 ``vectors`` by inner product, trained when it needs to be."""
        import faiss

        n, dim = vectors.shape
        if self.index == "flat":
            index = faiss.IndexFlatIP(dim)
        elif self.index == "hnsw":
            index = faiss.IndexHNSWFlat(dim, self.hnsw_neighbours, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            index.hnsw.efSearch = max(self.ef_search, depth)
        else:
            nlist = self.nlist or max(1, min(n // 39, int(4 * n ** 0.5)))  # FAISS wants >= 39 points per cell
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = self.seed
            index.train(vectors)
            index.nprobe = min(self.nprobe, nlist)
        index.add(vectors)
        return index

    def search_vectors(self, queries: np.ndarray, documents: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), each (Q, k), of (Q, D) ``queries`` against (N, D) ``documents`` by inner product; a row
        of -1 (fewer than ``depth`` hits from an approximate index) is dropped by :func:`to_run` callers."""
        depth = min(depth, len(documents))
        return self.build(documents, depth).search(queries, depth)

    def __call__(self, method: EmbeddingMethod, queries: Tensor, documents: Tensor,
                 depth: int) -> tuple[Tensor, Tensor]:
        """Scores and corpus rows (Q, k) of each query's ``depth`` best documents (row -1: no hit)."""
        space = inner_product_space(method)
        if space == "cos":
            queries, documents = F.normalize(queries.float(), dim=-1), F.normalize(documents.float(), dim=-1)
        scores, rows = self.search_vectors(_as_numpy(queries), _as_numpy(documents), depth)
        return torch.from_numpy(scores), torch.from_numpy(rows).long()


@torch.no_grad()
def top_k(method: EmbeddingMethod, queries: Tensor, documents: Tensor, depth: int,
          chunk: int = 65536) -> tuple[Tensor, Tensor]:
    """Scores and row indices (Q, k) of each query's ``depth`` best documents by ``method.similarity``."""
    depth = min(depth, len(documents))
    best_scores = queries.new_full((len(queries), 0), float("-inf"))
    best_rows = torch.zeros(len(queries), 0, dtype=torch.long, device=queries.device)
    for start in range(0, len(documents), chunk):
        scores = method.similarity(queries, documents[start:start + chunk])  # (Q, chunk)
        scores, rows = torch.cat([best_scores, scores], 1), torch.cat(
            [best_rows, torch.arange(start, start + scores.shape[1], device=queries.device).expand_as(scores)], 1)
        best_scores, index = scores.topk(min(depth, scores.shape[1]), dim=1)
        best_rows = rows.gather(1, index)
    return best_scores, best_rows


def rank(method: EmbeddingMethod, corpus: Sequence[Document], queries: dict[str, str], depth: int,
         batch_size: int = 64) -> dict[str, dict[str, float]]:
    """A run ``{query id: {document id: score}}`` of the ``depth`` best corpus documents per query; a query is
    embedded as a :class:`~lit_docemb.data.core.document.Query`, an untitled one-section document (a single-node
    graph for Graph-RoBERTa; its documents are graphs of n + 1 nodes, one passage included)."""
    query_ids = list(queries)
    query_docs = [query_document(q, queries[q]) for q in query_ids]
    scores, rows = top_k(method, embed_documents(method, query_docs, batch_size),
                         embed_documents(method, corpus, batch_size), depth)
    ids = [d.id for d in corpus]
    return {q: {ids[r]: s for r, s in zip(rows[i].tolist(), scores[i].tolist())} for i, q in enumerate(query_ids)}
