"""Dense-retrieval fine-tuning of any method's document encoder on (query, relevant document) pairs.

Graph-RoBERTa §3.3: the query is embedded by the same model as a one-passage document -- a single-node graph,
its initial node representation -- and scored against documents by the dot product; the loss is the
contrastive loss of pretraining over the actual query-document pairs, with in-batch negatives plus sampled
ones (uniform for Robust04, from BM25's top 100 for MSMARCO and WIKIR, then from a run of the 5-epoch
checkpoint for MSMARCO's second phase). The examples and their negatives come from the ranking DataModules in
``mode: retrieval`` (:mod:`lit_docemb.data.retrieval.datamodule`).
"""

from __future__ import annotations

import logging
from typing import Literal

from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import QueryDocumentBatch
from lit_docemb.losses import InfoNCELoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.checkpoints import load_method_checkpoint
from lit_docemb.views.dense_retrieval import QueryDocumentCollator

log = logging.getLogger(__name__)


class DenseRetrieval(EmbeddingMethod):
    """Fine-tunes a method's encoder as a bi-encoder: queries and documents embedded by the same model.

    Logged: ``*/info_nce_loss`` and ``*/negatives_per_anchor`` (in-batch, from every device, plus sampled).

    Args:
        backbone: The pretraining method whose encoder is fine-tuned (``class_path`` + ``init_args``).
        checkpoint: A Lightning checkpoint of the backbone method to start from.
        similarity: ``"dot"`` (Graph-RoBERTa §3.3) or ``"cos"``.
        temperature: Divides the similarities (1.0: none, as in the paper).
        gather_across_devices: Use the documents of all devices as negatives.
        optimizer: Optimizer factory; ``None`` is AdamW at 5e-5.
        scheduler: Optional learning-rate scheduler factory (paper: 10% warm-up).
    """

    default_learning_rate = 5e-5

    def __init__(self, backbone: EmbeddingMethod, checkpoint: str | None = None,
                 similarity: Literal["dot", "cos"] = "dot", temperature: float = 1.0,
                 gather_across_devices: bool = True, optimizer: OptimizerCallable | None = None,
                 scheduler: LRSchedulerCallable | None = None) -> None:
        super().__init__(optimizer, scheduler)
        self.save_method_hyperparameters(ignore=["backbone", "optimizer", "scheduler"])
        self.backbone = backbone
        if checkpoint is not None:
            load_method_checkpoint(backbone, checkpoint, "model.init_args.checkpoint")
        self.contrastive = InfoNCELoss(temperature, similarity=similarity, gather_across_devices=gather_across_devices)

    def check_corpus(self, datamodule) -> None:
        self.backbone.check_corpus(datamodule)

    def collator(self, stage: str):
        inner = self.backbone.document_collator(stage)  # Graph-RoBERTa: max_passages in training
        return inner if stage == "predict" else QueryDocumentCollator(inner)

    def losses(self, batch: QueryDocumentBatch) -> dict[str, Tensor]:
        queries = self.backbone.embed(batch.queries)  # (B, D)
        documents = self.backbone.embed(batch.documents)  # (B*(1+k), D): positives first
        return self.contrastive(queries, documents, batch.query_ids, batch.candidate_ids)

    def embed(self, batch) -> Tensor:
        return self.backbone.embed(batch)

    def similarity(self, queries: Tensor, candidates: Tensor) -> Tensor:
        if self.hparams.similarity == "cos":
            return super().similarity(queries, candidates)
        return queries.float() @ candidates.float().T
