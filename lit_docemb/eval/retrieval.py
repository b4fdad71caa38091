"""Ranking evaluation on a retrieval DataModule (MSMARCO documents, Robust04, WIKIR; Graph-RoBERTa Tables 3-5):
dense search with the method, BM25, and their hybrid, scored with trec_eval's measures.

The corpus is embedded once per pass (in shards across ranks, then gathered), each query of the split as a
:class:`~lit_docemb.data.core.document.Query`, an untitled one-section document (as
:func:`lit_docemb.eval.search.rank` does; Graph-RoBERTa embeds it as a single-node graph), and every query's ``depth``
best documents are found by exact search or FAISS (:mod:`lit_docemb.eval.search`). Measures
(:func:`lit_docemb.eval.ranking.retrieval_metrics`) are averaged over the split's queries that have a relevant
document in the qrels; a query that retrieves nothing scores 0 (``trec_eval -c``).

Metric names: ``<split>/<measure>`` for the method (``val/ndcg@10``, ``test/mrr@10``), ``<split>/bm25/<measure>``
and ``<split>/hybrid/<measure>`` plus ``<split>/hybrid/weight`` (the dense weight; with cross-validation the
mean of the folds' weights). Run files: ``<split>.dense.run``, ``<split>.bm25.run``, ``<split>.hybrid.run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from lit_docemb.data.core.document import Document, query_document
from lit_docemb.data.retrieval.datamodule import QuerySplit, RetrievalDataModule, corpus_ids
from lit_docemb.data.retrieval.trec import Qrels, Run, read_folds, write_run
from lit_docemb.data.retrieval.bm25 import BM25Index
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext
from lit_docemb.eval.fusion import choose_weight, cross_validated_fusion, hashed_folds, interpolate
from lit_docemb.eval.ranking import RETRIEVAL_MEASURES, retrieval_metrics, trec_measure
from lit_docemb.eval.search import ExactSearch, FaissSearch


def retrieval_corpus(data: RetrievalDataModule) -> Sequence[Document]:
    """The DataModule's corpus (read once, cut to its ``max_documents``), in either mode."""
    if data.ranked_split() is None:
        raise TypeError(f"retrieval needs a ranking DataModule (MSMARCO, Robust04, WIKIR), got {type(data).__name__}")
    if data.corpus is None:
        documents = data.load_documents()
        data.corpus = documents[: data.max_documents] if data.max_documents is not None else documents
    return data.corpus


def split_qrels(split: QuerySplit) -> Qrels:
    """The judgements of the split's own queries."""
    return {q: split.qrels[q] for q in split.queries if q in split.qrels}


class RetrievalEvaluation(Evaluation):
    """Dense retrieval (and optionally BM25 and the hybrid) on one query split of a ranking DataModule.

    Args:
        split: Query split to rank: ``"val"`` (during training; logs ``val/ndcg@10``...) or ``"test"``.
        search: ``"exact"`` (torch, the method's own similarity) or ``"faiss"``.
        faiss_index: FAISS index: ``"flat"`` (exact), ``"hnsw"`` or ``"ivf"`` (approximate).
        depth: Documents retrieved per query (and fused per query for the hybrid).
        measures: Measure names (``mrr@10``, ``ndcg@20``, ``P@5``, ``recall@100``, ``map``, ``bpref``...); None: the
            default set (MRR@10/@100, nDCG@10/@20, P@5/10/20, MAP, Recall@100, bpref).
        bm25: Also rank with BM25 (:class:`~lit_docemb.data.retrieval.bm25.BM25Index`) and report it.
        hybrid: Fuse dense and BM25 (:mod:`lit_docemb.eval.fusion`): ``"none"``; ``"dev"``: the weight that
            maximises ``fusion_measure`` on the validation split (Robust04 with ``val_fold: next``: the next fold,
            so five runs over ``test_fold`` 1-5 are the paper's cross-validation; with ``split: val`` the weight is
            tuned on the queries it is reported on, an optimistic figure for monitoring); ``"cross_validation"``: k-fold
            over this split's queries (each fold's weight chosen on the others).
        fusion_measure: Measure the weight maximises.
        weights: Grid of dense weights; None: 0, 0.05, ..., 1.
        normalisation: Per-query score normalisation before fusing: ``"min_max"`` or ``"z_score"``.
        folds: Folds of ``"cross_validation"`` (by a hash of the query ids) when ``folds_file`` is None.
        folds_file: Folds of query ids (JSON or text, :func:`~lit_docemb.data.retrieval.trec.read_folds`), e.g. Robust04's.
        bm25_k1: BM25 ``k1``.
        bm25_b: BM25 ``b``.
        write_runs: Write the TREC run files into the output folder.
        **kwargs: See :class:`~lit_docemb.eval.evaluation.Evaluation`.
    """

    name = "retrieval"

    def __init__(self, split: Literal["val", "test"] = "val", search: Literal["exact", "faiss"] = "exact",
                 faiss_index: Literal["flat", "hnsw", "ivf"] = "flat", depth: int = 100,
                 measures: list[str] | None = None, bm25: bool = False,
                 hybrid: Literal["none", "dev", "cross_validation"] = "none", fusion_measure: str = "ndcg@20",
                 weights: list[float] | None = None, normalisation: Literal["min_max", "z_score"] = "min_max",
                 folds: int = 5, folds_file: str | None = None, bm25_k1: float = 1.5, bm25_b: float = 0.75,
                 write_runs: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        if split not in ("val", "test") or search not in ("exact", "faiss") or depth < 1:
            raise ValueError(f"need split val|test, search exact|faiss, depth >= 1; got {split}, {search}, {depth}")
        if hybrid not in ("none", "dev", "cross_validation"):
            raise ValueError(f"hybrid must be 'none', 'dev' or 'cross_validation', got {hybrid!r}")
        self.split, self.depth, self.bm25, self.hybrid = split, depth, bm25, hybrid
        self.searcher = ExactSearch() if search == "exact" else FaissSearch(faiss_index)
        self.measures = list(RETRIEVAL_MEASURES if measures is None else measures)
        self.fusion_measure, self.weights, self.normalisation = fusion_measure, weights, normalisation
        self.folds, self.folds_file, self.write_runs = folds, folds_file, write_runs
        self.bm25_k1, self.bm25_b = bm25_k1, bm25_b
        self._bm25: tuple[int, BM25Index] | None = None  # (id of the corpus it indexes, index)
        self._bm25_runs: dict[str, Run] = {}
        for name in [*self.measures, fusion_measure]:  # unknown names fail now, not after an epoch
            trec_measure(name)

    def _split(self, data: RetrievalDataModule, name: str) -> QuerySplit:
        split = data.query_split(name)
        if split is None or not split.queries:
            raise ValueError(f"{type(data).__name__} has no {name} queries to rank")
        return split

    def dense_run(self, context: EvaluationContext, name: str) -> Run:
        """The method's top ``depth`` documents for each query of split ``name``."""
        corpus = retrieval_corpus(context.data)
        split = self._split(context.data, name)
        query_ids = list(split.queries)
        queries = [query_document(q, split.queries[q].text) for q in query_ids]
        documents = context.embed("retrieval/corpus", corpus)
        scores, rows = self.searcher(context.method, context.embed(f"retrieval/queries/{name}", queries).to(
            context.method.device), documents.to(context.method.device), self.depth)
        ids = corpus_ids(corpus)
        return {q: {ids[r]: s for r, s in zip(rows[i].tolist(), scores[i].tolist(), strict=True) if r >= 0}
                for i, q in enumerate(query_ids)}

    def bm25_run(self, context: EvaluationContext, name: str) -> Run:
        """BM25's top ``depth`` documents for each query of split ``name`` (index and runs kept across epochs)."""
        corpus = retrieval_corpus(context.data)
        if self._bm25 is None or self._bm25[0] != id(corpus):
            self._bm25, self._bm25_runs = (id(corpus), BM25Index(corpus, self.bm25_k1, self.bm25_b)), {}
        if name not in self._bm25_runs:
            self._bm25_runs[name] = self._bm25[1].run(self._split(context.data, name).queries, self.depth)
        return self._bm25_runs[name]

    def _fold_ids(self, qrels: Qrels) -> list[list[str]]:
        """The cross-validation folds restricted to this split's judged queries (empty folds dropped)."""
        judged = [q for q, rels in qrels.items() if any(r > 0 for r in rels.values())]
        folds = hashed_folds(judged, self.folds) if self.folds_file is None else read_folds(self.folds_file)
        folds = [kept for kept in ([q for q in fold if q in qrels] for fold in folds) if kept]
        if len(folds) < 2:
            raise ValueError(f"cross-validation needs judged {self.split} queries in at least 2 folds, got "
                             f"{len(folds)}")
        return folds

    def hybrid_run(self, context: EvaluationContext, dense: Run, sparse: Run, qrels: Qrels) -> tuple[Run, float]:
        """The fused run of this split and its dense weight (see ``hybrid``)."""
        grid = {} if self.weights is None else {"weights": self.weights}
        if self.hybrid == "dev":
            if self.split == "val":
                dev_dense, dev_sparse, dev_qrels = dense, sparse, qrels
            else:
                dev_qrels = split_qrels(self._split(context.data, "val"))
                dev_dense, dev_sparse = self.dense_run(context, "val"), self.bm25_run(context, "val")
            weight, _ = choose_weight(dev_dense, dev_sparse, dev_qrels, self.fusion_measure, how=self.normalisation,
                                      depth=self.depth, **grid)
            return interpolate(dense, sparse, weight, self.normalisation, self.depth), weight
        fused, weights = cross_validated_fusion(dense, sparse, qrels, self._fold_ids(qrels), self.fusion_measure,
                                                how=self.normalisation, depth=self.depth, **grid)
        return fused, sum(weights) / len(weights)

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        qrels = split_qrels(self._split(context.data, self.split))
        runs = {"dense": self.dense_run(context, self.split)}
        if self.bm25 or self.hybrid != "none":
            runs["bm25"] = self.bm25_run(context, self.split)
        metrics = {f"{self.split}/{k}": v for k, v in retrieval_metrics(runs["dense"], qrels, self.measures).items()}
        if self.bm25:
            bm25 = retrieval_metrics(runs["bm25"], qrels, self.measures)
            metrics |= {f"{self.split}/bm25/{k}": v for k, v in bm25.items() if k != "queries"}
        if self.hybrid != "none":
            runs["hybrid"], weight = self.hybrid_run(context, runs["dense"], runs["bm25"], qrels)
            hybrid = retrieval_metrics(runs["hybrid"], qrels, self.measures)
            metrics |= {f"{self.split}/hybrid/{k}": v for k, v in hybrid.items() if k != "queries"}
            metrics[f"{self.split}/hybrid/weight"] = weight
        if self.write_runs and context.writes():
            for system, run in runs.items():
                write_run(run, context.output_dir / f"{self.split}.{system}.run", run_name=system)
        return metrics
