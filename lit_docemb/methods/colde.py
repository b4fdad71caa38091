"""CoLDE (seed paper 003): supervised contrastive learning over the sections of long documents.

§3: each document is cut into n sections (2 by default, 2-5 in §4.5.4) of ≤ 512-token chunks; learned
section and chunk embeddings are added to BERT's input embeddings; chunk vectors, a 4-head chunkwise
attention (section p → section p + 1) and a Bi-LSTM (output 512) give section representations, projected to
256; the supervised contrastive loss (τ 0.5) pulls together the sections of a document and of documents with
the same label or similarity group, over the batch gathered from all devices. §4.2: at evaluation a document
is not split and the data encoder gives one representation (before the projection); pairs are matched by
cosine similarity with a threshold chosen on validation (``val/matching_*``, ``test/matching_*``: the callback
:class:`~lit_docemb.eval.matching.ValidationMatching`; validation and test batches give the loss). §4.3: three
levels of similarity (document, section, chunk) from ``predict`` and :func:`similarity_matrices`. §4.5: the
ablations are switches: −Aug ``augmentation: false`` (one section, no section/chunk embeddings), −LSTM
``aggregation: mean`` (mean of chunk vectors, no chunkwise attention), −CL ``objective: cosine`` (no split,
no projection, cosine similarity regressed onto "same group"; implies −Aug). Adam 5e-5, weight decay 0.01.

Readings where §4.1.2 is loose, settled by the authors' released code (github.com/InterDigitalInc/CoLDE; the
configs' headers and ``docs/reproduce.md``, CoLDE, list every difference): "an Adam optimizer with a weight decay
of 0.01" is ``torch.optim.Adam(weight_decay=0.01)``, the L2 form, as ``document_matching.py`` builds it (not AdamW's
decoupled decay); batch 75 (``config.ini``), of the sizes the paper tried (50, 75, 100, 200); no learning-rate
schedule. A chunk's vector is the chunk encoder's [CLS] (``pooling: cls``; the code takes BERT's pooler output).
At evaluation a document is one section whose chunks are numbered 0 .. n_c - 1 (up to ``max_chunks_per_section``),
further than the chunks of a training section (a half of a document) reach: those chunk embeddings are trained less
or not at all.
"""

from __future__ import annotations

import functools
from typing import Literal

import torch
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import DocumentSectionsBatch, SectionChunkBatch
from lit_docemb.data.core.document import Document
from lit_docemb.data.caches.section_cache import SectionCache
from lit_docemb.errors import BadArgument, require
from lit_docemb.losses import CosineSimilarityLoss, SupConLoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.grad_cache import CacheableBatch
from lit_docemb.models import EncoderSpec
from lit_docemb.methods.retention import Retention
from lit_docemb.models.colde import Aggregation, CoLDEEncoder, HeadInit
from lit_docemb.views.colde import (
    PredictCollator,
    SectionChunkCollator,
    select_documents,
)


class CoLDE(EmbeddingMethod):
    """CoLDE: Contrastive Long Document Encoder over any Hugging Face chunk encoder.

    Args:
        encoder: The chunk encoder (:class:`~lit_docemb.models.EncoderSpec`: ``name``, paper bert-base-uncased;
            ``pooling`` gives a chunk's vector). No ``first_token_global_attention``, ``instruction``,
            ``sentence_transformers_head`` or ``max_length`` (a chunk's length is ``chunk_tokens``).
        num_sections: Sections per training document (paper: 2; §4.5.4 tries 2-5).
        chunk_tokens: Tokens per chunk, special tokens included (paper: 512).
        max_chunks_per_section: Keep at most this many chunks of a section, dropping (and counting, as
            ``train/truncated_chunks``) the rest; ``None`` keeps every chunk.
        max_training_section_tokens: Keep only the first this many tokens of each section in training (``fit``
            batches; special tokens not counted); validation, test and ``predict`` read whole sections. CoLDE's Fig. 7
            (§4.4.2: "we limit the maximum number of tokens in each section during training ... The model is given
            the entire long document during evaluation") at 1,000, 4,000 and 8,000; ``None`` (the paper's other
            runs) cuts nothing. Unlike ``max_chunks_per_section``, which cuts in every stage.
        chunk_embeddings: Chunk ids q embedded: a section keeps its first ``chunk_embeddings`` chunks, the
            others are dropped and counted (``truncated_chunks``), in training, validation and predict alike.
        augmentation: Split documents into sections and add section/chunk embeddings; ``False`` is −Aug.
        aggregation: ``"lstm"``: chunkwise attention + Bi-LSTM (the paper); ``"mean"``: −LSTM.
        objective: ``"supcon"``: supervised contrastive loss over sections; ``"cosine"``: −CL (needs
            ``augmentation: false``).
        num_heads: Heads of the chunkwise attention (paper: 4).
        lstm_output_size: Bi-LSTM output size, both directions (paper: 512).
        projection_size: Projection output for the contrastive loss (paper: 256).
        temperature: Supervised contrastive temperature (paper: 0.5).
        groups: Which sections are positives of each other. ``"labels"`` (the paper): a document's sections and those
            of the documents that share its similarity group (its label; AAN: its matching pairs in the batch).
            ``"documents"``: a document's own sections alone, labels and pairs never read (pretraining without
            supervision, on any corpus); needs ``objective: supcon``.
        gather_across_devices: Contrast with the sections of all devices (exact gather with gradient).
        chunk_token_budget: Chunks of a batch are encoded in sub-batches of at most this many padded tokens.
        predict_similarities: ``predict`` also returns the three levels of similarity between each batch's
            documents (one more forward pass over them, split); ``False``: ids and embeddings only.
        optimizer: Optimizer factory; ``None`` is Adam at the paper's 5e-5 with its weight decay 0.01 in Adam's L2 form
            (``torch.optim.Adam(weight_decay=0.01)``, as the authors' code).
        scheduler: Optional learning-rate scheduler factory.
        grad_cache_token_budget: GradCache sub-batch size in padded tokens (``None``: off); each document is a
            row costing its chunks x their longest length.
        head_init: ``"random"`` (the paper) or ``"identity"``: section and chunk embeddings start at zero and the
            aggregator as the mean of the chunk vectors plus a silent (zero-initialised) Bi-LSTM branch, so that
            step 0 scores the encoder's mean-pooled chunks (see :class:`~lit_docemb.models.colde.CoLDEEncoder`;
            ``docs/retention.md``).
        retention: Options that keep what the pretrained encoder knew (:class:`~lit_docemb.methods.retention.
            Retention`: anchoring, layer-wise learning-rate decay, frozen layers); ``None``: none.
        section_cache_dir: Folder of the tokenized-section cache (:class:`~lit_docemb.data.caches.section_cache.SectionCache`:
            every section tokenized on the first run, chunks cut from its ids on every pass; ``None``: the
            ``datasets`` cache folder).
    """

    default_learning_rate = 5e-5

    def __init__(
        self,
        encoder: EncoderSpec,
        num_sections: int = 2,
        chunk_tokens: int = 512,
        max_chunks_per_section: int | None = None,
        max_training_section_tokens: int | None = None,
        chunk_embeddings: int = 512,
        augmentation: bool = True,
        aggregation: Aggregation = "lstm",
        objective: Literal["supcon", "cosine"] = "supcon",
        num_heads: int = 4,
        lstm_output_size: int = 512,
        projection_size: int = 256,
        temperature: float = 0.5,
        groups: Literal["labels", "documents"] = "labels",
        gather_across_devices: bool = True,
        chunk_token_budget: int = 16384,
        predict_similarities: bool = True,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        grad_cache_token_budget: int | None = None,
        head_init: HeadInit = "random",
        retention: Retention | None = None,
        section_cache_dir: str | None = None,
    ) -> None:
        default = functools.partial(torch.optim.Adam, lr=self.default_learning_rate, weight_decay=0.01)
        super().__init__(optimizer or default, scheduler, grad_cache_token_budget, retention)
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        require(head_init in ("random", "identity"), "head_init", "'random' or 'identity'", head_init)
        require(objective in ("supcon", "cosine"), "objective", "'supcon' or 'cosine'", objective)
        require(groups in ("labels", "documents"), "groups", "'labels' or 'documents'", groups)
        if groups == "documents" and objective == "cosine":
            raise BadArgument("groups", "objective 'cosine' (the −CL ablation) regresses onto \"same group\", which "
                                        "groups: documents never gives: set groups: labels")
        if objective == "cosine" and augmentation:
            raise BadArgument("augmentation", "objective 'cosine' (the −CL ablation) compares whole documents: "
                                              "set augmentation: false")
        require(not augmentation or 2 <= num_sections <= 5, "num_sections", "in 2..5 (§4.5.4)", num_sections)
        require(chunk_tokens >= 1, "chunk_tokens", ">= 1", chunk_tokens)
        require(chunk_embeddings >= 1, "chunk_embeddings", ">= 1", chunk_embeddings)
        require(max_training_section_tokens is None or max_training_section_tokens >= 1,
                "max_training_section_tokens", ">= 1 (tokens) or null", max_training_section_tokens)
        require(max_chunks_per_section is None or 1 <= max_chunks_per_section <= chunk_embeddings,
                "max_chunks_per_section", f"in 1..chunk_embeddings={chunk_embeddings} or null", max_chunks_per_section)
        self.encoder_spec = EncoderSpec.of(encoder)
        self.encoder_spec.refuse(type(self).__name__, "first_token_global_attention", "instruction",
                                 "instruction_in_pooling", "sentence_transformers_head", "max_length",
                                 instead={"max_length": "chunk_tokens"})
        self.tokenizer, chunk_encoder = self.encoder_spec.build(chunk_tokens, "chunk_tokens")
        self.model = CoLDEEncoder(chunk_encoder, augmentation, aggregation, num_sections, chunk_embeddings,
                                  num_heads, lstm_output_size, projection_size if objective == "supcon" else None,
                                  chunk_token_budget, head_init)
        self.contrastive = SupConLoss(temperature, gather_across_devices=gather_across_devices)
        self.cosine = CosineSimilarityLoss(gather_across_devices)
        self.token_cache = SectionCache(self.tokenizer, cache_dir=section_cache_dir)

    def _collator(self, num_sections: int, max_section_tokens: int | None = None) -> SectionChunkCollator:
        hp = self.hparams
        return SectionChunkCollator(self.tokenizer, num_sections, hp.chunk_tokens, hp.max_chunks_per_section,
                                    hp.chunk_embeddings if hp.augmentation else None, self.token_cache,
                                    max_section_tokens, read_groups=hp.groups == "labels")

    def collator(self, stage: str):
        training = self._collator(self.hparams.num_sections if self.hparams.augmentation else 1)
        if stage == "fit":  # the only stage whose sections are cut (Fig. 7)
            return self._collator(training.num_sections, self.hparams.max_training_section_tokens)
        if stage == "predict":
            return PredictCollator(self._collator(1), training if self.hparams.predict_similarities else None)
        return training  # validation/test: the loss (pairs: over their groups); matching is ValidationMatching's

    # --- training ------------------------------------------------------------------------------------
    def _encode(self, batch: SectionChunkBatch):
        return self.model(batch.sections, [batch.sections_per_document] * len(batch))

    def losses(self, batch: SectionChunkBatch) -> dict[str, Tensor]:
        return self._loss_terms(self._encode(batch).projected, batch)

    def _loss_terms(self, projected: Tensor, batch: SectionChunkBatch) -> dict[str, Tensor]:
        n = batch.sections_per_document
        if self.hparams.objective == "cosine":
            terms = self.cosine(projected, batch.labels)
        else:  # every section carries its document's group label (and id)
            terms = self.contrastive(projected, batch.labels.repeat_interleave(n), batch.doc_index.repeat_interleave(n))
        device = projected.device  # torch.full fills on the device; torch.tensor(..., device=) would wait for it
        return terms | {"skipped_documents": torch.full((), float(batch.skipped), device=device),
                        "truncated_chunks": torch.full((), float(batch.truncated_chunks), device=device)}

    def cacheable(self, batch: SectionChunkBatch) -> CacheableBatch:
        """Rows are the B documents; a row's embedding is its n projected sections, concatenated."""
        n, counts = batch.sections_per_document, batch.sections.chunks_per_section
        lengths = batch.sections.chunks.attention_mask.sum(1)  # (C,)
        chunk_doc = torch.repeat_interleave(torch.arange(len(counts), device=counts.device) // n, counts)
        longest = torch.zeros(len(batch), dtype=lengths.dtype, device=lengths.device).scatter_reduce(
            0, chunk_doc.to(lengths.device), lengths, "amax")
        chunks = torch.zeros_like(longest).index_add(0, chunk_doc.to(lengths.device), torch.ones_like(lengths))

        def encode(sub: SectionChunkBatch) -> Tensor:
            return self._encode(sub).projected.reshape(len(sub), -1)  # (rows, n*Dz)

        def loss(embeddings: Tensor) -> dict[str, Tensor]:
            return self._loss_terms(embeddings.reshape(len(batch) * n, -1), batch)

        return CacheableBatch(longest * chunks, lambda index: select_documents(batch, index), encode, loss)

    # --- evaluation: unsplit documents -----------------------------------------------------------------
    def embed(self, batch: SectionChunkBatch | DocumentSectionsBatch) -> Tensor:
        """(B, D_f) representations of unsplit documents (the data encoder, before the projection)."""
        whole = batch.whole if isinstance(batch, DocumentSectionsBatch) else batch
        if whole.sections_per_document != 1:
            raise ValueError("embed takes unsplit documents (sections_per_document=1)")
        return self._encode(whole).sections

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Drops the matching threshold that checkpoints written before
        :class:`~lit_docemb.eval.matching.ValidationMatching` kept as buffers (it is that callback's state now)."""
        state = checkpoint.get("state_dict", {})
        for key in ("matching_threshold", "matching_threshold_chosen"):
            state.pop(key, None)

    # --- interpretability (§4.3, Fig. 4) -----------------------------------------------------------------
    def predict_step(self, batch: DocumentSectionsBatch | SectionChunkBatch, batch_idx: int) -> dict:
        """Embeddings, and the three levels of cosine similarity between the batch's documents: document
        (B, B), section (S, S) over the sections of the split documents, chunk (C, C) over their chunks, with
        labels ``"<id>/S<p>"`` and ``"<id>/S<p>C<q>"``, and each section's chunkwise attention (ids and
        embeddings only with ``predict_similarities: false``)."""
        embeddings = self.embed(batch)
        if not isinstance(batch, DocumentSectionsBatch):
            return {"ids": batch.ids, "embeddings": embeddings.float().cpu()}
        split = batch.split
        encoded = self._encode(split)
        n = split.sections_per_document
        sections = split.sections
        chunk_section = torch.repeat_interleave(torch.arange(len(sections)), sections.chunks_per_section.cpu())
        return {
            "ids": batch.whole.ids,
            "embeddings": embeddings.float().cpu(),
            "document_similarity": cosine_matrix(embeddings),
            "section_labels": [f"{i}/S{p}" for i in split.ids for p in range(n)],
            "section_similarity": cosine_matrix(encoded.sections),
            "chunk_labels": [f"{split.ids[s // n]}/S{s % n}C{q}"
                             for s, q in zip(chunk_section.tolist(), sections.chunk_ids.tolist())],
            "chunk_similarity": cosine_matrix(encoded.chunks),
            "chunk_attention": [m.float().cpu() for m in encoded.attention],
        }


def cosine_matrix(vectors: Tensor) -> Tensor:
    """(N, N) cosine similarities of N vectors, fp32 on CPU."""
    vectors = F.normalize(vectors.detach().float(), dim=-1)
    return (vectors @ vectors.T).cpu()


@torch.no_grad()
def similarity_matrices(method: CoLDE, documents: list[Document]) -> dict:
    """The three levels of similarity (document, section, chunk) between two or more documents, in one batch,
    in eval mode (restored after): :meth:`CoLDE.predict_step`'s output. Draw it with
    :func:`lit_docemb.eval.figures.similarity_heatmaps`."""
    if len(documents) < 2:
        raise ValueError(f"need at least two documents to compare, got {len(documents)}")
    was_training = method.training
    method.eval()
    try:
        collate = PredictCollator(method._collator(1), method.collator("fit"))  # whatever predict_similarities says
        batch = method.transfer_batch_to_device(collate(documents), method.device, 0)
        if len(batch.split) < len(batch.whole):
            missing = sorted(set(batch.whole.ids) - set(batch.split.ids))
            raise ValueError(f"documents too short for {batch.split.sections_per_document} sections: {missing}")
        return method.predict_step(batch, 0)
    finally:
        method.train(was_training)
