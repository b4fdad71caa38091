"""Unsupervised SimCSE (Gao et al. 2021) on whole documents: DocSplit's SimCSE_long baseline (seed paper 001,
Table 2: "SimCSE_long", SimCSE pretrained on the same long documents as DocSplit).

Each training document is encoded twice in one forward pass (the batch stacked on itself, as SimCSE's code does);
dropout, active in training, makes the two embeddings of a document differ, and they are a positive pair for the
in-batch contrastive loss (cosine, temperature 0.05), the other documents of the (gathered) batch its negatives.
The only difference from :class:`~lit_docemb.methods.docsplit.DocSplit` is the views: the whole document twice
instead of two random halves of its sentences; the loss, the optional masked-LM term (weight 0.1 in DocSplit's
recipe, which §4.1 takes from Gao et al.) and the embedding of a document are the same.

Reading chosen where the paper is silent: no MLP over the [CLS] vector in training (SimCSE's unsupervised models
train with one and drop it at test time; DocSplit has none, so the comparison changes only the views); a document
is its title and body cut to ``encoder.max_length`` tokens, as it is embedded.
"""

from __future__ import annotations

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import DocumentBatch, ViewPairBatch
from lit_docemb.errors import require
from lit_docemb.losses import InfoNCELoss, MaskedLMLoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.retention import Retention
from lit_docemb.models import EncoderSpec
from lit_docemb.views.common import DocumentCollator
from lit_docemb.views.simcse import SameDocumentCollator


class SimCSE(EmbeddingMethod):
    """Unsupervised SimCSE of any Hugging Face encoder on whole documents.

    Args:
        encoder: The Hugging Face encoder (:class:`~lit_docemb.models.EncoderSpec`: ``name``, ``pooling``, ...); its
            ``instruction``, ``instruction_in_pooling``, ``sentence_transformers_head`` and ``packed`` are not used.
            Its ``max_length`` is the tokens per document (both views and the embedding).
        temperature: InfoNCE temperature (SimCSE and DocSplit: 0.05).
        mlm_weight: Weight of the auxiliary masked-LM loss (DocSplit's recipe: 0.1; SimCSE's default: 0).
        mlm_probability: Share of tokens masked for the masked-LM loss.
        gather_across_devices: Use the documents of all devices as negatives (exact gather with gradient).
        embed_with_title: Put the title before the body, in training and when embedding.
        optimizer: Optimizer factory; ``None`` is AdamW with lr 1e-5, DocSplit's default (the paper's config sets
            5e-5). From a sentence encoder SimCSE lowers clustering at any of the rates measured: its two views of a
            document differ only by dropout, so they teach no topic, and the in-batch loss pushes documents of one
            topic apart. From all-MiniLM-L6-v2, 60 steps on BBC News lowered k-means NMI by 0.60 at 5e-5 and by 0.09
            at 1e-5, by 0.11 at 1e-5 with temperature 0.2, all without the anchoring of ``retention``'s default
            (docs/real-text.md): to gain from such an encoder train DocSplit.
        scheduler: Optional learning-rate scheduler factory.
        retention: Options that keep what the pretrained encoder knew (:class:`~lit_docemb.methods.retention.
            Retention`). ``None`` (the default) anchors the pooled embeddings of each batch to the starting
            encoder's at weight 1 (``Retention(anchor_weight=1.0)``): with it, 60 steps from all-MiniLM-L6-v2 on BBC
            News at 1e-5 moved no measure beyond its interval, where without it k-means NMI fell by 0.09
            (docs/real-text.md). ``Retention`` with ``anchor_weight: 0`` trains SimCSE's loss alone (the paper's
            SimCSE_long config).
    """

    default_learning_rate = 1e-5  # see ``optimizer``
    default_anchor_weight = 1.0  # see ``retention``

    def __init__(
        self,
        encoder: EncoderSpec,
        temperature: float = 0.05,
        mlm_weight: float = 0.0,
        mlm_probability: float = 0.15,
        gather_across_devices: bool = True,
        embed_with_title: bool = True,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        retention: Retention | None = None,
    ) -> None:
        super().__init__(optimizer, scheduler, None, retention)
        require(mlm_weight >= 0, "mlm_weight", ">= 0", mlm_weight)
        require(0.0 < mlm_probability < 1.0, "mlm_probability", "between 0 and 1 (exclusive)", mlm_probability)
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        self.encoder_spec = EncoderSpec.of(encoder)
        self.encoder_spec.refuse(type(self).__name__, "instruction", "instruction_in_pooling",
                                 "sentence_transformers_head", "packed")
        self.tokenizer, self.encoder = self.encoder_spec.build(with_mlm_head=mlm_weight > 0, mlm_argument="mlm_weight")
        self.contrastive = InfoNCELoss(temperature, similarity="cos", symmetric=False,
                                       gather_across_devices=gather_across_devices)
        self.mlm = MaskedLMLoss()
        self.loss_weights = {"mlm_loss": mlm_weight}

    def collator(self, stage: str):
        hp = self.hparams
        if stage == "predict":
            return DocumentCollator(self.tokenizer, self.encoder_spec.max_length, hp.embed_with_title)
        return SameDocumentCollator(self.tokenizer, self.encoder_spec.max_length, hp.embed_with_title,
                                    hp.mlm_probability if hp.mlm_weight > 0 else 0.0, deterministic=stage != "fit")

    def losses(self, batch: ViewPairBatch) -> dict[str, Tensor]:
        n = len(batch)
        input_ids = torch.cat([batch.view_a.input_ids, batch.view_b.input_ids])  # (2B, T): each document twice
        attention_mask = torch.cat([batch.view_a.attention_mask, batch.view_b.attention_mask])
        embeddings = self.encoder(input_ids, attention_mask)  # (2B, D), a dropout mask per row
        terms = self.contrastive(embeddings[:n], embeddings[n:], batch.doc_index, batch.doc_index)
        if batch.mlm is not None:
            masked = batch.mlm.labels != -100  # (B, T)
            logits = self.encoder.mlm_logits(batch.mlm.input_ids, batch.mlm.attention_mask, masked)  # (K, V)
            terms |= self.mlm(logits, batch.mlm.labels[masked])
        return terms

    def embed(self, batch: DocumentBatch) -> Tensor:
        return self.encoder(batch.tokens.input_ids, batch.tokens.attention_mask)
