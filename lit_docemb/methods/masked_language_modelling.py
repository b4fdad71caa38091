"""Masked-language-model fine-tuning of an encoder on the target corpus alone: DECA's BERT-mlm and LF-mlm baselines.

Seed paper 002 (DECA), §4.1: "A BERT model fine-tuned with masked language modeling on the target dataset is also
included, denoted by BERT-mlm" and "LF-mlm is fine-tuned with masked language modeling"; the document embedding is
the "[CLS]" embedding, as for the BERT row. The paper gives no epochs, learning rate, batch or masking rate: the
defaults here are the usual masked-LM fine-tuning values (BERT's 15% masking with its 80/10/10 rule, AdamW at 5e-5,
as Hugging Face's ``run_mlm.py``), and ``configs/deca/r8_bert_mlm.yaml`` states the rest.

Reading chosen where the paper is silent: one document is one training row (title and body, cut to
``encoder.max_length``), not a stream of documents concatenated into blocks, so every document is seen as it is
later embedded; no contrastive term (DocSplit with a contrastive weight of 0 would not be the same: its masked input
is a random half of the sentences, :mod:`lit_docemb.methods.docsplit`).
"""

from __future__ import annotations

from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import DocumentBatch, MaskedTokenBatch
from lit_docemb.errors import require
from lit_docemb.losses import MaskedLMLoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.retention import Retention
from lit_docemb.models import EncoderSpec
from lit_docemb.views.common import DocumentCollator
from lit_docemb.views.masked_language_modelling import MaskedDocumentCollator


class MaskedLanguageModelling(EmbeddingMethod):
    """Fine-tunes any Hugging Face encoder with the masked-LM loss only; a document's vector is its pooled output.

    Args:
        encoder: The Hugging Face encoder (:class:`~lit_docemb.models.EncoderSpec`: ``name``, ``pooling``, ...); its
            tokenizer needs a mask token. DECA's BERT rows pool ``"cls"``. No ``instruction`` or
            ``sentence_transformers_head``. Its ``max_length`` is the tokens per document in training and embedding
            (512 for BERT, 4,096 for Longformer).
        mlm_probability: Share of each document's real tokens chosen for prediction (BERT: 0.15).
        embed_with_title: Prefix the title to the body, in training and when embedding.
        optimizer: Optimizer factory; ``None`` is AdamW with lr 1e-5 (the DECA configs set their 5e-5): from
            all-MiniLM-L6-v2, whose checkpoint has no masked-LM head, 60 steps on BBC News at 5e-5 lowered k-means
            NMI by 0.07, at 1e-5 by 0.02 (within its interval) and the 5-shot probe by 1.3 points
            (docs/real-text.md).
        scheduler: Optional learning-rate scheduler factory.
        retention: Options that keep what the pretrained encoder knew (:class:`~lit_docemb.methods.retention.
            Retention`). ``None`` (the default) anchors the pooled embeddings of each batch to the starting
            encoder's at weight 1 (``Retention(anchor_weight=1.0)``): from all-MiniLM-L6-v2, 60 steps on BBC News
            at 1e-5 lowered the 5-shot probe by 1.3 points without it and moved no measure beyond its interval with
            it (docs/real-text.md). Where the encoder's checkpoint has no masked-LM head (sentence-transformers
            checkpoints such as all-MiniLM-L6-v2), the default also trains the fresh head alone for the first 30
            steps (half the run where the run has 30 optimizer steps or fewer) and at 300 times the rate
            throughout (``head_warmup_steps``, ``head_learning_rate_scale``), anchored at weight 5: from
            all-MiniLM-L6-v2, 60 steps on 20 Newsgroups at 1e-5 anchored at 1 lowered the linear probe by 2.2 points
            with the head trained from step 0 alongside the encoder, and k-means NMI by 0.007 over three seeds with
            the head first; at weight 5 with the head first nothing fell on 20 Newsgroups (3 seeds) or BBC News (2)
            (docs/real-text.md).
            ``Retention`` with ``anchor_weight: 0`` trains the masked-LM loss alone (the DECA configs, as the
            paper).
    """

    default_learning_rate = 1e-5  # see ``optimizer``
    default_anchor_weight = 1.0  # see ``retention``
    #: Where the checkpoint has no masked-LM head, the default ``retention`` also trains the fresh head first, at
    #: its own rate, and anchors at weight 5 (see ``retention``).
    fresh_head_retention = {"anchor_weight": 5.0, "head_warmup_steps": 30, "head_learning_rate_scale": 300.0}

    def __init__(
        self,
        encoder: EncoderSpec,
        mlm_probability: float = 0.15,
        embed_with_title: bool = True,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        retention: Retention | None = None,
    ) -> None:
        super().__init__(optimizer, scheduler, None, retention)
        require(0.0 < mlm_probability < 1.0, "mlm_probability", "between 0 and 1 (exclusive)", mlm_probability)
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        self.encoder_spec = EncoderSpec.of(encoder)
        self.encoder_spec.refuse(type(self).__name__, "instruction", "instruction_in_pooling",
                                 "sentence_transformers_head")
        self.tokenizer, self.encoder = self.encoder_spec.build(with_mlm_head=True)
        require(self.tokenizer.mask_token_id is not None, "encoder.name",
                "an encoder whose tokenizer has a mask token", self.encoder_spec.name)
        self.mlm = MaskedLMLoss()
        if retention is None and self.encoder.fresh_head:
            self.retention = Retention(**self.fresh_head_retention)
            self.head_warmup_follows_run = True

    def collator(self, stage: str):
        hp = self.hparams
        if stage == "predict":
            return DocumentCollator(self.tokenizer, self.encoder_spec.max_length, hp.embed_with_title)
        return MaskedDocumentCollator(self.tokenizer, self.encoder_spec.max_length, hp.embed_with_title,
                                      hp.mlm_probability, deterministic=stage != "fit")

    def losses(self, batch: MaskedTokenBatch) -> dict[str, Tensor]:
        masked = batch.labels != -100  # (B, T)
        logits = self.encoder.mlm_logits(batch.input_ids, batch.attention_mask, masked)  # (K, V)
        return self.mlm(logits, batch.labels[masked])

    def embed(self, batch: DocumentBatch) -> Tensor:
        return self.encoder(batch.tokens.input_ids, batch.tokens.attention_mask)
