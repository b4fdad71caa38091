"""Exact dense search with a trained method: embed a corpus and queries, rank by the method's similarity, write
a TREC run -- e.g. the checkpoint-mined negatives of Graph-RoBERTa's second MSMARCO phase (§3.3).

Usage (any config whose data is a ranking DataModule; the checkpoint of that config's method)::

    python -m lit_docemb.eval.dense_search --config configs/graph_roberta/retrieval_msmarco_bm25.yaml \\
        --ckpt runs/graph_roberta_retrieval_msmarco_bm25/checkpoints/last.ckpt --split train --depth 100 \\
        --output runs/graph_roberta_retrieval_msmarco_bm25/train-top100.run [config overrides ...]

One process, exact search (the corpus embeddings in memory, scored in chunks with a running top-k).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from lit_docemb.data.document import Document, Section
from lit_docemb.data.trec import write_run
from lit_docemb.losses import distributed as dist
from lit_docemb.methods.base import EmbeddingMethod, load_method_checkpoint

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
    embedded as an untitled one-section document (a single-node graph for Graph-RoBERTa)."""
    query_ids = list(queries)
    query_docs = [Document(f"query:{q}", sections=[Section("", queries[q])]) for q in query_ids]
    scores, rows = top_k(method, embed_documents(method, query_docs, batch_size),
                         embed_documents(method, corpus, batch_size), depth)
    ids = [d.id for d in corpus]
    return {q: {ids[r]: s for r, s in zip(rows[i].tolist(), scores[i].tolist())} for i, q in enumerate(query_ids)}


def main(args: list[str] | None = None) -> None:
    from lit_docemb.cli import DocEmbCLI

    parser = argparse.ArgumentParser(description="Rank a ranking corpus's queries with a trained method.")
    parser.add_argument("--config", required=True, help="the run's config (method and ranking DataModule)")
    parser.add_argument("--ckpt", required=True, help="a checkpoint of the config's method")
    parser.add_argument("--split", choices=["train", "val", "test"], default="test")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--output", required=True, help="TREC run file to write (.gz compresses)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    options, overrides = parser.parse_known_args(args)  # the rest: config overrides, e.g. --data.init_args.root
    cli = DocEmbCLI(args=["--config", options.config, *overrides, "--data.init_args.mode", "retrieval"], run=False)
    method, data = cli.model, cli.datamodule
    load_method_checkpoint(method, options.ckpt)
    method.to(options.device).eval()
    data.setup("fit")
    split = data.query_split(options.split)
    if split is None:
        raise SystemExit(f"{type(data).__name__} has no {options.split} split")
    run = rank(method, data.corpus, {q: query.text for q, query in split.queries.items()}, options.depth,
               options.batch_size)
    write_run(run, options.output, run_name=type(method).__name__)
    log.info("wrote %d queries x %d documents to %s", len(run), options.depth, options.output)


if __name__ == "__main__":
    main()
