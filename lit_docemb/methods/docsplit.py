"""DocSplit (seed paper 001): two random "summaries" of a document are a positive pair.

§2.2: each sentence of a document is assigned at random to one of two new documents x1+ and x2+, which are
a positive pair for in-batch contrastive learning; a new split is drawn at every pass. §4.1: contrastive loss
with temperature 0.05 plus the masked-language-modelling loss with weight 0.1 on the same backbone (following
SimCSE), AdamW 5e-5, batch 36 (BERT, 512 tokens) or 12 (Longformer, 4,096 tokens), English Wikipedia.

Reading chosen where the paper is silent: similarity is cosine (SimCSE, which the paper follows); the MLM
input is a masked copy of the first view (the same text the contrastive loss sees, one extra forward pass);
a document with a single sentence is split between its words (first half / second half), a document with
fewer than two words cannot make two non-empty views and is dropped from the batch and counted
(``train/skipped_documents``).
"""

from __future__ import annotations

import logging
from typing import Literal

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import (
    DocumentBatch,
    DocumentSentencesBatch,
    MaskedTokenBatch,
    TokenBatch,
    ViewPairBatch,
)
from lit_docemb.data.caches.sentence_cache import SentenceCache
from lit_docemb.data.core.tokens import (
    take_rows,
    token_lengths,
)
from lit_docemb.errors import require
from lit_docemb.losses import InfoNCELoss, MaskedLMLoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.grad_cache import CacheableBatch
from lit_docemb.methods.retention import Retention
from lit_docemb.models import EncoderSpec
from lit_docemb.views.docsplit import SentenceSplitCollator, SentencesCollator, WholeDocumentCollator

log = logging.getLogger(__name__)


class DocSplit(EmbeddingMethod):
    """DocSplit pretraining of any Hugging Face encoder.

    Args:
        encoder: The Hugging Face encoder (:class:`~lit_docemb.models.EncoderSpec`: ``name``, ``pooling``, ...; BERT,
            RoBERTa, Longformer, BigBird...). Its ``max_length`` is the tokens per view (512 for BERT, 4,096 for
            Longformer in the paper); its ``instruction`` counts against it (texts get ``max_length`` minus its
            tokens); the paper (DocSplit Tables 1-2) gives none. ``packed`` also encodes the masked-LM copies without
            padding.
        temperature: InfoNCE temperature (paper: 0.05).
        mlm_weight: Weight of the masked-LM loss in the total (paper: 0.1); 0 disables MLM.
        mlm_probability: Share of tokens masked for the MLM loss.
        symmetric: Also contrast the second view against the first views (the paper's loss is one-sided).
        gather_across_devices: Use the views of all devices as negatives (exact gather with gradient).
        embed_with_title: Prefix the title to the body when embedding whole documents (predict/evaluate).
        optimizer: Optimizer factory; ``None`` is AdamW with lr 1e-5, a fifth of the paper's 5e-5 (which the
            paper's configs set): from a pretrained sentence encoder 5e-5 lowered clustering on BBC where 1e-5
            kept it and raised the few-shot probe more (docs/real-text.md).
        scheduler: Optional learning-rate scheduler factory.
        grad_cache_token_budget: GradCache sub-batch size in padded tokens (``None``: off); each view is a
            row, and a first view's masked-LM copy counts towards its row's cost.
        retention: Options that keep what the pretrained encoder knew (:class:`~lit_docemb.methods.retention.
            Retention`: anchoring, layer-wise learning-rate decay, frozen layers); ``None``: none.
        sentence_cache_dir: Folder of the tokenized-sentence cache
            (:class:`~lit_docemb.data.caches.sentence_cache.SentenceCache`: the corpus split into sentences and tokenized
            on the first run, views assembled from its ids on every pass; ``None``: the ``datasets`` cache folder).
        sentence_cache_num_proc: Processes building that cache on its first run, each over a contiguous range of
            the corpus (``None``: one); the cache is the same for any number.
        sentence_pooling: How a whole document is embedded (predict/evaluate): ``"none"`` encodes its text in one pass
            (title and body, truncated to ``encoder.max_length``); ``"sum"`` / ``"mean"`` encode each of its sentences
            alone (DocSplit's sentences, each truncated to ``encoder.max_length``, pooled by the encoder's ``pooling``)
            and add / average the sentence vectors: DECA's BERT-ST baseline (seed paper 002, §4.1: "uses BERT to learn
            sentence embeddings and then gets document embeddings by summing their sentence embeddings") is ``"sum"``
            with [CLS] pooling, as its BERT row reads a text. Sentences come from the body only, so it requires
            ``embed_with_title: false``; a document with fewer than two words is its whole text, one sentence.
            Training is unchanged.
    """

    default_learning_rate = 1e-5  # not the paper's 5e-5: see ``optimizer``

    def __init__(
        self,
        encoder: EncoderSpec,
        temperature: float = 0.05,
        mlm_weight: float = 0.1,
        mlm_probability: float = 0.15,
        symmetric: bool = False,
        gather_across_devices: bool = True,
        embed_with_title: bool = True,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        grad_cache_token_budget: int | None = None,
        retention: Retention | None = None,
        sentence_cache_dir: str | None = None,
        sentence_cache_num_proc: int | None = None,
        sentence_pooling: Literal["none", "sum", "mean"] = "none",
    ) -> None:
        super().__init__(optimizer, scheduler, grad_cache_token_budget, retention)
        require(sentence_cache_num_proc is None or sentence_cache_num_proc >= 1, "sentence_cache_num_proc",
                ">= 1 (processes) or null", sentence_cache_num_proc)
        require(sentence_pooling in ("none", "sum", "mean"), "sentence_pooling", "none, sum or mean",
                sentence_pooling)
        require(sentence_pooling == "none" or not embed_with_title, "embed_with_title",
                "false when sentence_pooling is sum or mean (the sentences are the body's; the title is not one)",
                embed_with_title)
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        self.encoder_spec = EncoderSpec.of(encoder)
        self.tokenizer, self.encoder = self.encoder_spec.build(with_mlm_head=mlm_weight > 0, mlm_argument="mlm_weight")
        self.contrastive = InfoNCELoss(temperature, similarity="cos", symmetric=symmetric,
                                       gather_across_devices=gather_across_devices)
        self.mlm = MaskedLMLoss()
        self.loss_weights = {"mlm_loss": mlm_weight}
        text_tokens = self.encoder.text_tokens(self.encoder_spec.max_length)  # less the instruction's tokens
        self.token_cache = SentenceCache(self.tokenizer, text_tokens, embed_with_title, cache_dir=sentence_cache_dir,
                                         num_proc=sentence_cache_num_proc)

    def collator(self, stage: str):
        hp = self.hparams
        if stage == "predict":
            if hp.sentence_pooling != "none":
                return SentencesCollator(self.token_cache)
            return WholeDocumentCollator(self.token_cache)
        mlm_probability = hp.mlm_probability if hp.mlm_weight > 0 else 0.0
        return SentenceSplitCollator(self.token_cache, mlm_probability, deterministic=stage != "fit")

    def losses(self, batch: ViewPairBatch) -> dict[str, Tensor]:
        input_ids = torch.cat([batch.view_a.input_ids, batch.view_b.input_ids])  # (2B, T)
        attention_mask = torch.cat([batch.view_a.attention_mask, batch.view_b.attention_mask])
        terms = self._contrastive_terms(self.encoder(input_ids, attention_mask), batch)  # (2B, D) embeddings
        if batch.mlm is not None:
            terms |= self._mlm_terms(batch.mlm)
        return terms

    def _contrastive_terms(self, embeddings: Tensor, batch: ViewPairBatch) -> dict[str, Tensor]:
        n = len(batch)
        terms = self.contrastive(embeddings[:n], embeddings[n:], batch.doc_index, batch.doc_index)
        terms["skipped_documents"] = torch.full((), float(batch.skipped), device=embeddings.device)
        return terms

    def _mlm_terms(self, mlm: MaskedTokenBatch, share: Tensor | float = 1.0) -> dict[str, Tensor]:
        masked = mlm.labels != -100  # (B, T)
        logits = self.encoder.mlm_logits(mlm.input_ids, mlm.attention_mask, masked)  # (K, V)
        return {"mlm_loss": self.mlm(logits, mlm.labels[masked])["mlm_loss"] * share}

    def cacheable(self, batch: ViewPairBatch) -> CacheableBatch:
        """Rows are the 2B views (first views, then second views); row i < B also carries its masked copy,
        whose share of the MLM loss (its masked tokens / the batch's) is an additive term of the row."""
        n = len(batch)
        views = TokenBatch(torch.cat([batch.view_a.input_ids, batch.view_b.input_ids]),
                           torch.cat([batch.view_a.attention_mask, batch.view_b.attention_mask]))  # (2B, T)
        costs = token_lengths(views.attention_mask)  # (2B,)
        mlm = batch.mlm
        if mlm is not None:
            costs[:n] += token_lengths(mlm.attention_mask)
            masked_total = (mlm.labels != -100).sum().clamp(min=1)

        def take(index: Tensor):
            first = index[index < n]
            return take_rows(views, index), None if mlm is None else take_rows(mlm, first)

        def encode(sub) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
            tokens, sub_mlm = sub
            embeddings = self.encoder(tokens.input_ids, tokens.attention_mask)  # (rows, D)
            if sub_mlm is None or not torch.is_grad_enabled():
                return embeddings
            share = (sub_mlm.labels != -100).sum() / masked_total
            return embeddings, self._mlm_terms(sub_mlm, share)

        return CacheableBatch(costs, take, encode, lambda embeddings: self._contrastive_terms(embeddings, batch))

    def embed(self, batch: DocumentBatch | DocumentSentencesBatch) -> Tensor:
        if isinstance(batch, DocumentBatch):
            return self.encoder(batch.tokens.input_ids, batch.tokens.attention_mask)
        self._warn_if_one_cut_sentence(batch)
        sentences = self.encoder(batch.sentences.input_ids, batch.sentences.attention_mask)  # (S, D)
        owner = torch.repeat_interleave(torch.arange(len(batch), device=sentences.device),
                                        batch.sentence_counts)  # (S,)
        documents = sentences.new_zeros(len(batch), sentences.shape[1]).index_add_(0, owner, sentences)  # (B, D)
        if self.hparams.sentence_pooling == "mean":
            documents = documents / batch.sentence_counts.unsqueeze(1).to(documents.dtype)
        return documents

    def _warn_if_one_cut_sentence(self, batch: DocumentSentencesBatch) -> None:
        """One line, once, when every document of a batch of several is a single sentence cut at the encoder's
        length: a text without sentence ends (text_gcn's cleaned corpora), where the sum of sentences is the
        encoder cut at its length and the row is not the sentence-sum baseline it claims to be."""
        lengths = batch.sentences.attention_mask.sum(1)  # (S,)
        if (getattr(self, "_warned_one_sentence", False) or len(batch) < 2
                or not bool((batch.sentence_counts == 1).all()) or int(lengths.min()) < self.encoder_spec.max_length):
            return
        self._warned_one_sentence = True
        log.warning("sentence_pooling: every document of a batch is one sentence cut at encoder.max_length=%d tokens, "
                    "so the sum of sentences is the encoder on each document's first %d tokens: the text has no "
                    "sentence ends (text_gcn's cleaned corpora: read the raw one, data.init_args.text_gcn_corpus: "
                    "raw)", self.encoder_spec.max_length, self.encoder_spec.max_length)
