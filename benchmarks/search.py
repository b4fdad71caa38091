"""Exact and FAISS search over a large corpus of document vectors (issue 9, item 6): build time, query time and the
recall of the approximate indexes against exact search.

Backends, each through lit_docemb's own code path (:mod:`lit_docemb.eval.search`):

* **torch exact**: :class:`~lit_docemb.eval.search.ExactSearch`, the chunked matmul + running top-k that
  ``evaluate`` uses with ``search: exact`` (no index to build);
* **FAISS flat**: ``IndexFlatIP`` (exact; build = copying the vectors in);
* **FAISS IVF**: ``IndexIVFFlat`` (k-means cells trained on the corpus, ``nprobe`` cells visited per query);
* **FAISS HNSW**: ``IndexHNSWFlat`` (graph; its build is the slow part: ``--hnsw_documents`` builds it on the first
  that many vectors only, and its recall is then measured against exact search over those same vectors).

Vectors: a synthetic stand-in for document embeddings (no corpus or model is needed): ``--documents`` points drawn
around ``--clusters`` random centres in ``--dim`` dimensions, L2-normalised (cosine = inner product); queries are
corpus points plus noise, so each has real near neighbours. Recall@k = |approximate top-k ∩ exact top-k| / k,
averaged over queries. Times are wall-clock seconds of one run on the threads given (``--threads``, default: every
core); the machine's load average is printed beside the table.

Usage::

    python benchmarks/search.py                                  # 1M x 384, 1,000 queries, top-100
    python benchmarks/search.py --documents 100000 --hnsw_documents 100000
"""

from __future__ import annotations

import argparse
import os
import time
from types import SimpleNamespace

import numpy as np
import torch


def synthetic_vectors(documents: int, queries: int, dim: int, clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(documents, D) and (queries, D) float32 unit vectors: clustered corpus points, queries near corpus points."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(clusters, dim, generator=gen)
    corpus = torch.empty(documents, dim)
    for start in range(0, documents, 100_000):  # in blocks: one temporary of 1M x 384 would double the memory
        end = min(documents, start + 100_000)
        assign = torch.randint(clusters, (end - start,), generator=gen)
        corpus[start:end] = centres[assign] + torch.randn(end - start, dim, generator=gen)
    corpus = torch.nn.functional.normalize(corpus, dim=-1)
    picked = torch.randint(documents, (queries,), generator=gen)
    query = torch.nn.functional.normalize(corpus[picked] + 0.05 * torch.randn(queries, dim, generator=gen), dim=-1)
    return corpus.numpy(), query.numpy()


def recall(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    return float(np.mean([len(set(a[:k]) & set(b[:k])) / k for a, b in zip(found, exact, strict=True)]))


class Rows(list):
    """The table's rows, each also printed as soon as it is measured (a long run shows its progress)."""

    def append(self, row) -> None:
        super().append(row)
        print("measured: " + ", ".join(str(x) for x in row), flush=True)


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--nlist", type=int, default=1024, help="IVF cells")
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 64], help="IVF cells visited per query")
    parser.add_argument("--hnsw_documents", type=int, default=200_000, help="HNSW index size (0: skip HNSW)")
    parser.add_argument("--ef_search", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import faiss

    from lit_docemb.eval.search import ExactSearch, FaissSearch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    (corpus, queries), generated = timed(lambda: synthetic_vectors(args.documents, args.queries, args.dim,
                                                                   args.clusters, args.seed))
    print(f"{args.documents:,} x {args.dim} float32 vectors ({corpus.nbytes / 2**30:.2f} GiB), {args.queries:,} "
          f"queries, top-{args.depth}, {args.threads} threads; generated in {generated:.1f} s")
    rows = Rows()
    dot = SimpleNamespace(similarity=lambda q, d: q @ d.T)  # unit vectors: cosine = inner product
    q_t, c_t = torch.from_numpy(queries), torch.from_numpy(corpus)
    (_, exact), seconds = timed(lambda: ExactSearch()(dot, q_t, c_t, args.depth))
    exact = exact.numpy()
    rows.append(("torch exact", f"{args.documents:,}", 0.0, seconds, 1.0, 1.0))

    flat = FaissSearch("flat")
    index, build = timed(lambda: flat.build(corpus, args.depth))
    (_, found), seconds = timed(lambda: index.search(queries, args.depth))
    rows.append(("FAISS flat (IndexFlatIP)", f"{args.documents:,}", build, seconds, recall(found, exact, 10),
                 recall(found, exact, args.depth)))
    del index

    ivf = FaissSearch("ivf", nlist=args.nlist, seed=args.seed)
    index, build = timed(lambda: ivf.build(corpus, args.depth))
    for nprobe in args.nprobe:
        index.nprobe = nprobe
        (_, found), seconds = timed(lambda: index.search(queries, args.depth))
        rows.append((f"FAISS IVF{args.nlist},Flat nprobe={nprobe}", f"{args.documents:,}", build, seconds,
                     recall(found, exact, 10), recall(found, exact, args.depth)))
        build = float("nan")  # built once
    del index

    if args.hnsw_documents:
        n = min(args.hnsw_documents, args.documents)
        subset = np.ascontiguousarray(corpus[:n])
        (_, exact_subset), _ = timed(lambda: ExactSearch()(dot, q_t, torch.from_numpy(subset), args.depth))
        hnsw = FaissSearch("hnsw")
        index, build = timed(lambda: hnsw.build(subset, args.depth))
        for ef in args.ef_search:
            index.hnsw.efSearch = ef
            (_, found), seconds = timed(lambda: index.search(queries, args.depth))
            rows.append((f"FAISS HNSW32,Flat efSearch={ef}", f"{n:,}", build, seconds,
                         recall(found, exact_subset.numpy(), 10), recall(found, exact_subset.numpy(), args.depth)))
            build = float("nan")

    print(f"\n| backend | vectors | build s | {args.queries:,} queries s | queries/s | recall@10 | "
          f"recall@{args.depth} |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, n, build, seconds, r10, rk in rows:
        built = "—" if np.isnan(build) else f"{build:.1f}"  # NaN: the index row above built it
        print(f"| {name} | {n} | {built} | {seconds:.2f} | {args.queries / seconds:,.0f} | {r10:.3f} | {rk:.3f} |")
    print(f"\nload average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
