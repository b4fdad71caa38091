"""Dense-retrieval fine-tuning of any method's document encoder on (query, relevant document) pairs.

Graph-RoBERTa §3.3: the query is embedded by the same model as a single-node graph, its initial node
representation (the collator hands it over as a :class:`~lit_docemb.data.core.document.Query`; a one-passage
document is still a graph of two nodes through the graph layers), and scored against documents by the dot product;
the loss is the contrastive loss of pretraining over the actual query-document pairs, with in-batch negatives plus
sampled ones (uniform for Robust04, from BM25's top 100 for MSMARCO and WIKIR, then from a run of the 5-epoch
checkpoint for MSMARCO's second phase). The examples and their negatives come from the ranking DataModules in
``mode: retrieval`` (:mod:`lit_docemb.data.retrieval.datamodule`).

The paper's batches (128 queries, each with its positive and a hard negative: 256 documents of up to 50 passages)
do not fit one accelerator's activation memory as a plain step. ``grad_cache_token_budget`` encodes queries and
documents in sub-batches (GradCache) with the same loss and gradients; ``activation_checkpointing`` recomputes the
encoder's layers in the backward pass. Figures: ``benchmarks/fine_tuning_memory.py``, docs/performance.md.
"""

from __future__ import annotations

import logging
from typing import Literal

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import QueryDocumentBatch
from lit_docemb.losses import InfoNCELoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.checkpoints import KeepsBackboneState
from lit_docemb.methods.fine_tuning import checkpoint_activations, document_rows, refuse_own_budget
from lit_docemb.methods.grad_cache import CacheableBatch
from lit_docemb.views.dense_retrieval import QueryDocumentCollator

log = logging.getLogger(__name__)


class DenseRetrieval(KeepsBackboneState, EmbeddingMethod):
    """Fine-tunes a method's encoder as a bi-encoder: queries and documents embedded by the same model.

    Logged: ``*/info_nce_loss`` and ``*/negatives_per_anchor`` (in-batch, from every device, plus sampled). A run's
    best checkpoint is the one of the lowest ``val/info_nce_loss`` (:attr:`checkpoint_monitor`, read by RunCheckpoint).

    Args:
        backbone: The pretraining method whose encoder is fine-tuned (``class_path`` + ``init_args``).
        checkpoint: A Lightning checkpoint of the backbone method, or of a fine-tuning run of it (MSMARCO's first
            phase), to start from: the backbone as it left it (its own ``on_load_checkpoint``: DECA's and CTPE's
            vocabularies, which size their tables; then its weights).
        similarity: ``"dot"`` (Graph-RoBERTa §3.3) or ``"cos"``.
        temperature: Divides the similarities (1.0: none, as in the paper).
        gather_across_devices: Use the documents of all devices as negatives.
        optimizer: Optimizer factory; ``None`` is AdamW at 5e-5.
        scheduler: Optional learning-rate scheduler factory (paper: 10% warm-up).
        grad_cache_token_budget: Train with GradCache: the B queries and B*(1+k) documents of a batch are its rows,
            encoded in sub-batches of at most this many padded tokens (a query or document costs its passages x
            their longest length for Graph-RoBERTa, its tokens for DocSplit), and the InfoNCE loss is still taken
            over the whole batch (and across devices): the same loss and gradients, the memory of one sub-batch.
            ``None``: plain training. Set it here, not on the backbone.
        activation_checkpointing: Recompute the backbone's transformer layers in the backward pass instead of
            keeping their activations (Hugging Face gradient checkpointing; the same gradients, about one more
            forward pass of compute). Alone or with ``grad_cache_token_budget`` (then it shrinks each sub-batch's
            memory). A backbone without a Hugging Face encoder that supports it is refused.
    """

    default_learning_rate = 5e-5
    checkpoint_monitor = ("val/info_nce_loss", "min")

    def __init__(self, backbone: EmbeddingMethod, checkpoint: str | None = None,
                 similarity: Literal["dot", "cos"] = "dot", temperature: float = 1.0,
                 gather_across_devices: bool = True, optimizer: OptimizerCallable | None = None,
                 scheduler: LRSchedulerCallable | None = None, grad_cache_token_budget: int | None = None,
                 activation_checkpointing: bool = False) -> None:
        super().__init__(optimizer, scheduler, grad_cache_token_budget)
        refuse_own_budget(backbone)
        self.save_method_hyperparameters(ignore=["backbone", "optimizer", "scheduler"])
        self.backbone = backbone
        if checkpoint is not None:
            self.restore_backbone(checkpoint)
        self.contrastive = InfoNCELoss(temperature, similarity=similarity, gather_across_devices=gather_across_devices)
        if activation_checkpointing:
            checkpoint_activations(backbone)

    def check_corpus(self, datamodule) -> None:
        self.backbone.check_corpus(datamodule)

    def collator(self, stage: str):
        inner = self.backbone.document_collator(stage)  # Graph-RoBERTa: max_passages in training
        return inner if stage == "predict" else QueryDocumentCollator(inner)

    def losses(self, batch: QueryDocumentBatch) -> dict[str, Tensor]:
        queries = self.backbone.embed(batch.queries)  # (B, D)
        documents = self.backbone.embed(batch.documents)  # (B*(1+k), D): positives first
        return self.contrastive(queries, documents, batch.query_ids, batch.candidate_ids)

    def cacheable(self, batch: QueryDocumentBatch) -> CacheableBatch:
        """Rows are the B queries, then the B*(1+k) documents; a sub-batch is a batch of each (either may be
        missing), embedded by the backbone as in :meth:`losses`."""
        queries, documents = document_rows(batch.queries), document_rows(batch.documents)
        n = len(batch)

        def take(index: Tensor):
            is_query = index < n
            first, rest = index[is_query], index[~is_query] - n
            order = torch.argsort(torch.cat([torch.where(is_query)[0], torch.where(~is_query)[0]]))
            return (queries.take(first) if len(first) or not len(rest) else None,
                    documents.take(rest) if len(rest) else None, order)

        def encode(sub) -> Tensor:  # (rows, D) in the sub-batch's row order (its queries and documents embedded apart)
            *parts, order = sub
            embeddings = torch.cat([self.backbone.embed(part) for part in parts if part is not None])
            return embeddings[order.to(embeddings.device)]

        def loss(embeddings: Tensor) -> dict[str, Tensor]:
            return self.contrastive(embeddings[:n], embeddings[n:], batch.query_ids, batch.candidate_ids)

        return CacheableBatch(torch.cat([queries.costs, documents.costs.to(queries.costs.device)]), take, encode, loss)

    def embed(self, batch) -> Tensor:
        return self.backbone.embed(batch)

    def similarity(self, queries: Tensor, candidates: Tensor) -> Tensor:
        if self.hparams.similarity == "cos":
            return super().similarity(queries, candidates)
        return queries.float() @ candidates.float().T
