"""Candidate ranking for test documents read from files (CTPE §4.1/§4.3: arXiv, DBLP, USPTO): every test
document ranks the candidate pool with the method's own similarity (:meth:`EmbeddingMethod.similarity`; eq. 2
for CTPE), and the top ``k`` are scored against the ground truth (:mod:`lit_docemb.eval.ranking`).

Layout of a task folder (one per corpus)::

  <root>/candidates.jsonl   candidate documents, lit_docemb JSONL (one {"id", "title", "sections": [{"heading",
                            "text"}]} per line; .jsonl.gz accepted): arXiv/DBLP: sections "Abstract";
                            USPTO: "Abstract" then "Claims"
  <root>/test.jsonl         test (query) documents, the same format
  <root>/qrels.txt          ground truth, TREC qrels "<test id> 0 <candidate id> <relevance>" (relevance > 0:
                            same subject for arXiv, cited for DBLP and USPTO)

The paper trains on candidates and test documents together (§4.3: "all documents in the dataset"): the
configs train a :class:`~lit_docemb.data.JSONLDataModule` on both files. Documents a method cannot represent
(CTPE: unsplittable) are dropped and counted; a test document without a relevant candidate is not a query.

Run it as a callback during ``fit`` (:class:`CandidateRanking`) or on a checkpoint
(:func:`evaluate_checkpoint`, or ``python -m lit_docemb candidates CKPT ROOT``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from lit_docemb.data.core.document import Document
from lit_docemb.data.corpora.jsonl import read_jsonl
from lit_docemb.data.core.reading import ReadContext, require_path
from lit_docemb.data.retrieval.trec import Qrels, read_qrels
from lit_docemb.distributed import rank
from lit_docemb.eval.embedding import embed_with_ids
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext
from lit_docemb.eval.ranking import rank_and_score
from lit_docemb.methods.base import EmbeddingMethod

LAYOUT = ("<root>/candidates.jsonl and <root>/test.jsonl (lit_docemb JSONL documents) and <root>/qrels.txt "
          "(TREC qrels '<test id> 0 <candidate id> <relevance>')")


@dataclass
class CandidateTask:
    """Test documents, the candidate pool and the ground truth of one task folder, with skip counts."""

    candidates: list[Document]
    queries: list[Document]
    qrels: Qrels
    stats: Counter


def _jsonl(root: Path, name: str, stats: Counter) -> list[Document]:
    path = root / name if (root / name).exists() or not (root / f"{name}.gz").exists() else root / f"{name}.gz"
    return read_jsonl(require_path(path, name, LAYOUT), ReadContext(stats=stats))


def read_candidate_task(root: str | Path) -> CandidateTask:
    """Reads a task folder (see the module docstring); qrels of unknown test documents are dropped and counted."""
    root = Path(root).expanduser()
    stats: Counter = Counter()
    candidates, queries = _jsonl(root, "candidates.jsonl", stats), _jsonl(root, "test.jsonl", stats)
    qrels = read_qrels(require_path(root / "qrels.txt", "qrels.txt", LAYOUT), stats)
    test_ids, candidate_ids = {d.id for d in queries}, {d.id for d in candidates}
    stats["qrels_unknown_test_document"] += sum(qid not in test_ids for qid in qrels)
    stats["qrels_unknown_candidate"] += sum(cid not in candidate_ids for rels in qrels.values() for cid in rels)
    qrels = {qid: rels for qid, rels in qrels.items() if qid in test_ids}
    if not candidates or not qrels:
        raise ValueError(f"{root}: {len(candidates)} candidates and {len(qrels)} judged test documents; need both")
    return CandidateTask(candidates, queries, qrels, +stats)


def evaluate_candidates(module: EmbeddingMethod, task: CandidateTask, k: int = 20,
                        batch_size: int = 256) -> dict[str, float]:
    """Top-``k`` P/R/F1 and trec_eval's MAP, NDCG, bpref of the test documents ranking the candidates, the paper's
    formulas of MAP, NDCG and bpref beside them (``paper_map@k``, ``paper_ndcg@k``, ``paper_bpref``, see
    :mod:`lit_docemb.eval.ranking`), plus counts."""
    candidate_ids, candidates, skipped_candidates = embed_with_ids(module, task.candidates, batch_size)
    query_docs = [d for d in task.queries if d.id in task.qrels]
    query_ids, queries, skipped_queries = embed_with_ids(module, query_docs, batch_size)
    scores = module.similarity(queries.to(module.device), candidates.to(module.device)).cpu()  # (Q, N)
    qrels = {qid: task.qrels[qid] for qid in query_ids}
    metrics = rank_and_score(scores, query_ids, candidate_ids, qrels, k)
    metrics.update(candidates=float(len(candidate_ids)), skipped_candidates=float(skipped_candidates),
                   skipped_queries=float(skipped_queries))
    return metrics


class CandidateRanking(Evaluation):
    """Candidate ranking on a task folder at the end of training (and every ``every_n_epochs`` epochs), logged as
    ``ranking/<metric>`` (``ranking/P@20``, trec_eval's ``ranking/map``, the paper's ``ranking/paper_map@20``...) and
    printed as ``ranking {json}``; usable by
    ``python -m lit_docemb evaluate`` as ``{class_path: lit_docemb.eval.candidates.CandidateRanking, init_args:
    {root: ...}}``. Every rank ranks the whole task (the figures are the same on all); rank 0 prints.

    Args:
        root: The task folder (see :mod:`lit_docemb.eval.candidates`).
        k: Depth of the ranked list (paper: 20).
        batch_size: Documents embedded per forward pass.
        every_n_epochs: Also evaluate after every n-th training epoch; ``None``: only at the end.
    """

    name = "candidate_ranking"

    def __init__(self, root: str, k: int = 20, batch_size: int = 256, every_n_epochs: int | None = None) -> None:
        super().__init__(every_n_epochs=every_n_epochs, at_train_end=True, batch_size=batch_size)
        self.root, self.k = root, k
        self.task: CandidateTask | None = None
        self.results: dict[str, float] | None = None

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        if self.task is None:
            self.task = read_candidate_task(self.root)
        started = time.perf_counter()
        self.results = evaluate_candidates(context.method, self.task, self.k, self.batch_size)
        self.results["seconds"] = time.perf_counter() - started
        if rank() == 0:
            print("ranking " + json.dumps({k: round(v, 4) for k, v in self.results.items()}))
        return {f"ranking/{k}": v for k, v in self.results.items()}
