"""Fine-tuning any method's document encoder for classification: a linear head on its document embedding.

Graph-RoBERTa (seed 000, Table 2, Appendix A Table 6) fine-tunes its graph document model with a head on the
document node; DocSplit (seed 001, Table 1) does the same with its encoder. The backbone is the pretraining
method itself (same class, same arguments, optionally its checkpoint), so whatever it embeds -- tokens, a
passage graph -- is what the head sees; its own pretraining losses are not used.

For the paper's batches of long documents (Graph-RoBERTa: 32 documents of up to 50 passages) see
``grad_cache_token_budget`` and ``activation_checkpointing`` below; figures in docs/performance.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassF1Score

from lit_docemb.data.core.batches import LabelledBatch
from lit_docemb.data.core.contract import LabelledDocuments
from lit_docemb.data.core.document import Document
from lit_docemb.errors import BadArgument, ConfigError, require
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.checkpoints import KeepsBackboneState
from lit_docemb.methods.fine_tuning import checkpoint_activations, document_rows, refuse_own_budget
from lit_docemb.methods.grad_cache import CacheableBatch
from lit_docemb.views.classifier import LabelledCollator

log = logging.getLogger(__name__)


class DocumentClassifier(KeepsBackboneState, EmbeddingMethod):
    """A linear classifier on a method's document embeddings, fine-tuned end to end with cross-entropy.

    Logged: ``*/ce_loss``, ``*/accuracy``, ``*/skipped_documents`` (per step in training; in validation and
    test the epoch's mean weighted by batch size, so ``test/accuracy`` is the accuracy over the split), and
    ``val/macro_f1``, ``test/macro_f1`` computed over the whole epoch. A run's best checkpoint is the one of the
    highest ``val/macro_f1`` (:attr:`checkpoint_monitor`, read by RunCheckpoint).

    Args:
        backbone: The pretraining method whose encoder is fine-tuned (``class_path`` + ``init_args`` in
            YAML, e.g. ``GraphRoBERTa`` with the pretraining config's arguments). Switch its auxiliary heads
            off (DocSplit: ``mlm_weight: 0``): unused weights make DDP fail.
        labels: The class names, in the order of the head's outputs. Documents with other labels are skipped
            and counted; a training set without any of these labels is an error at setup.
        checkpoint: A Lightning checkpoint of the backbone method (its pretraining run), or of a fine-tuning run of
            it, to start from: the backbone as it left it (its own ``on_load_checkpoint``: DECA's and CTPE's
            vocabularies, which size their tables; then its weights).
        dropout: Dropout on the embedding before the head.
        freeze_backbone: Train the head only, on the backbone's embeddings as they are (its weights fixed, its
            dropout off): DocSplit's Appendix A.1 ("we fine-tune the last MLP layer", lr 3e-4, batch 8).
            ``False`` fine-tunes end to end (Graph-RoBERTa, Table 2).
        optimizer: Optimizer factory; ``None`` is AdamW at 5e-5.
        scheduler: Optional learning-rate scheduler factory (Table 6: 10% warm-up).
        grad_cache_token_budget: Train with GradCache: the batch's documents are its rows, encoded by the backbone
            in sub-batches of at most this many padded tokens (a document costs its passages x their longest length
            for Graph-RoBERTa, its tokens for DocSplit); the head and cross-entropy run once on the whole batch's
            embeddings. The same loss and gradients (dropout masks replayed), the memory of one sub-batch.
            ``None``: plain training. Set it here, not on the backbone. With ``freeze_backbone`` it only encodes
            in sub-batches (there is no backbone gradient).
        head_learning_rate_scale: The head's learning rate as a multiple of the optimizer's (and the scheduler's
            at each step): a randomly initialised head trained with the backbone's small fine-tuning rate learns
            slowly on a short run. 1 (Table 6) trains everything at one rate.
        activation_checkpointing: Recompute the backbone's transformer layers in the backward pass instead of
            keeping their activations (Hugging Face gradient checkpointing; the same gradients, about one more
            forward pass of compute). Alone or with ``grad_cache_token_budget``. A backbone without a Hugging Face
            encoder that supports it is refused, and so is a frozen backbone (it keeps no activations).
    """

    default_learning_rate = 5e-5
    checkpoint_monitor = ("val/macro_f1", "max")
    vector_outputs = ("embeddings", "probabilities")

    def __init__(self, backbone: EmbeddingMethod, labels: list[str], checkpoint: str | None = None,
                 dropout: float = 0.1, freeze_backbone: bool = False, optimizer: OptimizerCallable | None = None,
                 scheduler: LRSchedulerCallable | None = None, grad_cache_token_budget: int | None = None,
                 activation_checkpointing: bool = False, head_learning_rate_scale: float = 1.0) -> None:
        super().__init__(optimizer, scheduler, grad_cache_token_budget)
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise BadArgument("labels", f"must name at least 2 distinct classes, got {labels}")
        refuse_own_budget(backbone)
        require(head_learning_rate_scale > 0, "head_learning_rate_scale", "a positive multiple of the learning rate",
                head_learning_rate_scale)
        require(not (activation_checkpointing and freeze_backbone), "activation_checkpointing",
                "false with freeze_backbone (a frozen backbone keeps no activations to recompute)",
                activation_checkpointing)
        self.save_method_hyperparameters(ignore=["backbone", "optimizer", "scheduler"])
        self.backbone = backbone
        if checkpoint is not None:
            self.restore_backbone(checkpoint)
        backbone.eval()  # one empty document through the backbone gives the embedding size
        with torch.no_grad():
            dim = backbone.embed(backbone.collator("predict")([Document("probe", sections=[])])).shape[-1]
        backbone.train()
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(dim, len(labels)))
        self.freeze_backbone = freeze_backbone
        if freeze_backbone:
            backbone.requires_grad_(False)
            backbone.eval()
        if activation_checkpointing:
            checkpoint_activations(backbone)
        self.val_f1 = MulticlassF1Score(len(labels), average="macro")
        self.test_f1 = MulticlassF1Score(len(labels), average="macro")

    def train(self, mode: bool = True) -> DocumentClassifier:
        """Lightning switches the whole module to training mode each epoch; a frozen backbone stays in eval mode."""
        super().train(mode)
        if self.freeze_backbone:
            self.backbone.eval()
        return self

    def setup(self, stage: str) -> None:
        super().setup(stage)
        datamodule = getattr(self.trainer, "datamodule", None)
        if stage == "fit" and isinstance(datamodule, LabelledDocuments):
            found = set(datamodule.labels)
            if not found & set(self.hparams.labels):
                raise ConfigError(f"none of model.init_args.labels {self.hparams.labels} occurs in the training "
                                  f"data, whose labels are {sorted(found)[:20]}: set labels to those")
            if found - set(self.hparams.labels):
                log.warning("training labels not in model.init_args.labels are skipped: %s",
                            sorted(found - set(self.hparams.labels))[:20])

    def optimizer_parameters(self) -> Iterator[Tensor] | list[dict]:
        """The backbone's trainable parameters at the optimizer's rate, the head's at ``head_learning_rate_scale``
        times it (one group when that is 1)."""
        scale = self.hparams.head_learning_rate_scale
        if scale == 1.0:
            return super().optimizer_parameters()
        head = {id(p) for p in self.head.parameters()}
        backbone = [p for p in self.parameters() if p.requires_grad and id(p) not in head]
        groups = [{"params": backbone, "lr_scale": 1.0}, {"params": list(self.head.parameters()), "lr_scale": scale}]
        return [group for group in groups if group["params"]]  # a frozen backbone has none

    def check_corpus(self, datamodule) -> None:
        self.backbone.check_corpus(datamodule)

    def collator(self, stage: str):
        inner = self.backbone.document_collator(stage)  # Graph-RoBERTa: max_passages in training
        return inner if stage == "predict" else LabelledCollator(inner, self.hparams.labels)

    def logits(self, inputs) -> Tensor:
        return self.head(self.backbone.embed(inputs)).float()  # (B, classes)

    def losses(self, batch: LabelledBatch) -> dict[str, Tensor]:
        return self._terms(self.logits(batch.inputs), batch)

    def cacheable(self, batch: LabelledBatch) -> CacheableBatch:
        """Rows are the B documents, embedded by the backbone; the loss is the head and cross-entropy on their
        embeddings (the head's gradient comes from that one pass)."""
        rows = document_rows(batch.inputs)
        return CacheableBatch(rows.costs, rows.take, self.backbone.embed,
                              lambda embeddings: self._terms(self.head(embeddings).float(), batch))

    def _terms(self, logits: Tensor, batch: LabelledBatch) -> dict[str, Tensor]:
        if len(batch) == 0:  # an exact 0 that keeps every weight in the graph (DDP)
            ce, accuracy = logits.sum() * 0.0, logits.new_zeros(())
        else:
            ce = F.cross_entropy(logits, batch.targets)
            accuracy = (logits.argmax(-1) == batch.targets).float().mean()
        return {"ce_loss": ce, "accuracy": accuracy,
                "skipped_documents": torch.full((), float(batch.skipped), device=logits.device)}

    def _evaluate(self, batch: LabelledBatch, stage: str, metrics: dict[str, Metric]) -> Tensor:
        logits = self.logits(batch.inputs)
        terms = self._terms(logits, batch)
        loss = self.total_loss(terms)
        self._log_terms(stage, loss, terms, len(batch))
        for name, metric in metrics.items():  # over the whole epoch, not averaged per batch
            if len(batch):  # a rank's share of the last batch may be empty under DDP; torchmetrics rejects it
                metric.update(logits.argmax(-1), batch.targets)
            self.log(f"{stage}/{name}", metric, on_epoch=True)
        return loss

    def validation_step(self, batch: LabelledBatch, batch_idx: int) -> Tensor:
        return self._evaluate(batch, "val", {"macro_f1": self.val_f1})

    def test_step(self, batch: LabelledBatch, batch_idx: int) -> Tensor:
        return self._evaluate(batch, "test", {"macro_f1": self.test_f1})

    def embed(self, batch) -> Tensor:
        return self.backbone.embed(batch)

    def predict_step(self, batch, batch_idx: int) -> dict:
        embeddings = self.embed(batch)
        probabilities = self.head(embeddings).float().softmax(-1)
        return {"ids": batch.ids, "embeddings": embeddings.float().cpu(), "probabilities": probabilities.cpu(),
                "labels": [self.hparams.labels[i] for i in probabilities.argmax(-1).tolist()]}
