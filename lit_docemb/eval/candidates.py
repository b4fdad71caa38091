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
(:func:`evaluate_checkpoint`, or ``python -m lit_docemb.eval.candidates CKPT ROOT``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_only
from torch import Tensor

from lit_docemb.data.document import Document
from lit_docemb.data.jsonl import read_jsonl
from lit_docemb.data.reading import ReadContext
from lit_docemb.data.reading import require_path
from lit_docemb.data.trec import Qrels, read_qrels
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


@torch.no_grad()
def embed_documents(module: EmbeddingMethod, documents: list[Document],
                    batch_size: int = 256) -> tuple[list[str], Tensor, int]:
    """(ids, embeddings, skipped) of the documents the method can represent, through its predict collator."""
    collate = module.collator("predict")
    was_training = module.training
    module.eval()
    ids, chunks, skipped = [], [], 0
    for start in range(0, len(documents), batch_size):
        batch = collate(documents[start:start + batch_size])
        skipped += getattr(batch, "skipped", 0)
        if len(batch):
            chunks.append(module.embed(module.transfer_batch_to_device(batch, module.device, 0)).float().cpu())
            ids.extend(batch.ids)
    module.train(was_training)
    if not chunks:
        raise ValueError(f"{type(module).__name__} could represent none of {len(documents)} documents")
    return ids, torch.cat(chunks), skipped


def evaluate_candidates(module: EmbeddingMethod, task: CandidateTask, k: int = 20,
                        batch_size: int = 256) -> dict[str, float]:
    """Top-``k`` P/R/F1, MAP, NDCG, bpref of the test documents ranking the candidates, plus counts."""
    candidate_ids, candidates, skipped_candidates = embed_documents(module, task.candidates, batch_size)
    query_docs = [d for d in task.queries if d.id in task.qrels]
    query_ids, queries, skipped_queries = embed_documents(module, query_docs, batch_size)
    scores = module.similarity(queries.to(module.device), candidates.to(module.device)).cpu()  # (Q, N)
    qrels = {qid: task.qrels[qid] for qid in query_ids}
    metrics = rank_and_score(scores, query_ids, candidate_ids, qrels, k)
    metrics.update(candidates=float(len(candidate_ids)), skipped_candidates=float(skipped_candidates),
                   skipped_queries=float(skipped_queries))
    return metrics


class CandidateRanking(L.Callback):
    """Candidate ranking on a task folder at the end of training (and every ``every_n_epochs`` epochs),
    logged as ``ranking/<metric>`` (``ranking/P@20``, ``ranking/map``...) and printed; global rank 0 only.

    Args:
        root: The task folder (see :mod:`lit_docemb.eval.candidates`).
        k: Depth of the ranked list (paper: 20).
        batch_size: Documents embedded per forward pass.
        every_n_epochs: Also evaluate after every n-th training epoch; ``None``: only at the end.
    """

    def __init__(self, root: str, k: int = 20, batch_size: int = 256, every_n_epochs: int | None = None) -> None:
        self.root, self.k, self.batch_size, self.every_n_epochs = root, k, batch_size, every_n_epochs
        self.task: CandidateTask | None = None
        self.results: dict[str, float] | None = None

    def _run(self, trainer: L.Trainer, module: EmbeddingMethod) -> None:
        if self.task is None:
            self.task = read_candidate_task(self.root)
        started = time.perf_counter()
        self.results = evaluate_candidates(module, self.task, self.k, self.batch_size)
        self.results["seconds"] = time.perf_counter() - started
        for logger in trainer.loggers:
            logger.log_metrics({f"ranking/{k}": v for k, v in self.results.items()}, step=trainer.global_step)
        print("ranking " + json.dumps({k: round(v, 4) for k, v in self.results.items()}))

    @rank_zero_only
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: EmbeddingMethod) -> None:
        if self.every_n_epochs and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self._run(trainer, pl_module)

    @rank_zero_only
    def on_train_end(self, trainer: L.Trainer, pl_module: EmbeddingMethod) -> None:
        self._run(trainer, pl_module)


def evaluate_checkpoint(checkpoint: str, root: str, method: str = "lit_docemb.methods.CTPE", k: int = 20,
                        batch_size: int = 256) -> dict[str, float]:
    """Loads a checkpoint of ``method`` (a class path) and ranks the task folder ``root`` with it."""
    module_name, _, class_name = method.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    model = cls.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)  # no pickled code
    return evaluate_candidates(model, read_candidate_task(root), k, batch_size)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description="Rank a candidate/test task folder with a checkpoint.")
    parser.add_argument("checkpoint")
    parser.add_argument("root", help=LAYOUT)
    parser.add_argument("--method", default="lit_docemb.methods.CTPE")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args(argv)
    results = evaluate_checkpoint(args.checkpoint, args.root, args.method, args.k, args.batch_size)
    print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
