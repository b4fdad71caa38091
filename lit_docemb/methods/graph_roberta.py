"""Graph-RoBERTa (seed paper 000): contrastive pretraining of a graph attention network over passages.

§2.2: each document's passages (up to 50, about 100 words each, §3.1) are split at random into two halves,
two sub-documents that are each other's positive; the loss is the symmetric InfoNCE of eq. 5-6 with the
plain dot product over the batch gathered from all devices (``objective="halves"``). §3.3, the retrieval
variant: one passage (the first one half of the time, a uniform one otherwise) against the rest, the passage
being a single-node graph (its initial node) like a query, and the loss computed over the long
sub-documents only (``objective="one_passage"``: the long side is the anchor, scored against every
document's passage). The paper pretrains on OpenWebText, batch 1,536 (1,024 for retrieval), Adam 5e-5 with
10% warm-up: turn on ``grad_cache_token_budget`` to reach such batches.

Readings where the paper is silent: a document with fewer than 2 passages cannot make two sub-documents and
is dropped from the pretraining batch and counted (``train/skipped_documents``); each sub-document keeps the
graph type's structure restricted to its passages, and a sub-document of one passage (``"halves"`` of 2 or 3
passages) is a document of n + 1 = 2 nodes through the graph layers, like any one-passage document (only the
pseudo-query of ``"one_passage"`` is a single node); passages are truncated to ``passages.max_passage_tokens``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import (
    GraphDocumentBatch,
    SubDocumentPairBatch,
)
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.caches.passage_cache import PassageCache
from lit_docemb.data.core.contract import DocumentSplits
from lit_docemb.data.core.tokens import token_lengths
from lit_docemb.errors import ConfigError, require
from lit_docemb.losses import InfoNCELoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.grad_cache import CacheableBatch
from lit_docemb.models import EncoderSpec
from lit_docemb.methods.retention import Retention
from lit_docemb.models.graph_document import GraphDocumentEncoder
from lit_docemb.views.graph_roberta import (
    GraphDocumentCollator,
    Objective,
    PassageGraphBuilder,
    SubDocumentCollator,
    concat_graphs,
    select_graphs,
)


def _sections_with_text(item) -> int:
    """Sections of a document (or of its cached passages) that hold text."""
    if isinstance(item, Document):
        return sum(1 for section in item.sections if section.text.strip())
    return len(np.unique(item.section_index))


class GraphRoBERTa(EmbeddingMethod):
    """Graph-RoBERTa contrastive pretraining over any Hugging Face passage encoder.

    Args:
        encoder: The passage encoder (:class:`~lit_docemb.models.EncoderSpec`: ``name``, paper roberta-base;
            ``pooling`` gives a passage's vector, the paper's ``"cls"``). No ``first_token_global_attention``,
            ``instruction``, ``sentence_transformers_head`` or ``max_length`` (a passage's length is
            ``passages.max_passage_tokens``).
        node_dim: Size of passage and document nodes (paper: 512); ``None``: the encoder's hidden size.
        num_graph_layers: Graph attention layers T (paper: 2).
        num_heads: Attention heads per graph layer (paper: 2).
        attention_dropout: Dropout on the graph attention coefficients.
        passages: How a document becomes passages and a graph (:class:`~lit_docemb.data.PassageSpec`:
            ``words_per_passage``, ``max_passage_tokens``, ``max_passages`` in training, ``max_passages_inference``
            when embedding, ``title_passage``, ``graph``); ``None``: the paper's (100 words, 192 tokens, 50 and 100
            passages, the full graph) with a title as the first passage.
        objective: ``"halves"`` (§2.2, eq. 4-6) or ``"one_passage"`` (§3.3, the retrieval pretraining).
        temperature: Divides the dot products (paper: none, i.e. 1.0).
        gather_across_devices: Use the sub-documents of all devices as negatives (exact gather with gradient).
        passage_token_budget: Passages are encoded in sub-batches of at most this many padded tokens.
        bucket_passages: Form those sub-batches from the passages of the whole batch sorted by length, each
            padded to its own longest passage (less padding); ``False`` keeps document order.
        cache_passages: Have the DataModule split and tokenize the corpus's passages once into an on-disk
            cache (:class:`~lit_docemb.data.caches.passage_cache.PassageCache`), read by every later epoch and run.
        passage_cache_dir: Folder of that cache (``None``: the ``datasets`` cache folder).
        passage_cache_num_proc: Processes building that cache on its first run, each over a contiguous range of the
            corpus (``None``: one); the cache is the same for any number.
        optimizer: Optimizer factory; ``None`` is AdamW with lr 1e-5, a fifth of the paper's 5e-5 (which the
            paper's configs set): from a pretrained sentence encoder, 60 steps at 5e-5 took back some of what reading
            more of each document gave (against the untrained graph: 20 Newsgroups' probes -4.5 points, BBC's k-means
            NMI -0.05), where 1e-5 raised clustering and the 5-shot probe over it (docs/real-text.md).
        scheduler: Optional learning-rate scheduler factory (paper: 10% warm-up).
        grad_cache_token_budget: GradCache sub-batch size in padded tokens (``None``: off); each sub-document
            graph is a row costing its passages x their longest length.
        head_init: ``"random"`` (the paper's eq. 1: ``tanh`` of a randomly initialised projection, random graph
            layers), ``"identity"`` (projection and graph layers start so that the document vector is the mean of the
            encoder's passage vectors, no ``tanh``; needs ``node_dim`` >= the encoder's hidden size; see
            :class:`~lit_docemb.models.graph_document.GraphDocumentEncoder`), or ``"auto"`` (the default):
            ``"identity"`` when ``node_dim`` is at least the encoder's hidden size, else ``"random"``. A run from a
            good encoder then starts from what it knows: from all-MiniLM-L6-v2, 60 steps on BBC News with the random
            head lowered k-means NMI by 0.04 and raised nothing beyond its interval, with the identity head raised
            the 5-shot probe by 6.3 points (``docs/real-text.md``). The paper's configs say ``random``.
        retention: Options that keep what the pretrained encoder knew (:class:`~lit_docemb.methods.retention.
            Retention`: anchoring, layer-wise learning-rate decay, frozen layers); ``None``: none.
    """

    default_learning_rate = 1e-5  # not the paper's 5e-5: see ``optimizer``

    def __init__(
        self,
        encoder: EncoderSpec,
        node_dim: int | None = None,
        num_graph_layers: int = 2,
        num_heads: int = 2,
        attention_dropout: float = 0.1,
        passages: PassageSpec | None = None,
        objective: Objective = "halves",
        temperature: float = 1.0,
        gather_across_devices: bool = True,
        passage_token_budget: int = 32768,
        bucket_passages: bool = True,
        cache_passages: bool = True,
        passage_cache_dir: str | None = None,
        passage_cache_num_proc: int | None = None,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        grad_cache_token_budget: int | None = None,
        head_init: Literal["auto", "random", "identity"] = "auto",
        retention: Retention | None = None,
    ) -> None:
        super().__init__(optimizer, scheduler, grad_cache_token_budget, retention)
        self.passage_spec = PassageSpec.of(passages or {})
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        self.hparams["passages"] = self.passage_spec.hyperparameters()  # the block used, also when left out
        require(head_init in ("auto", "random", "identity"), "head_init", "'auto', 'random' or 'identity'", head_init)
        require(node_dim is None or node_dim >= 1, "node_dim", ">= 1 or null (the encoder's hidden size)", node_dim)
        require(passage_cache_num_proc is None or passage_cache_num_proc >= 1, "passage_cache_num_proc",
                ">= 1 (processes) or null", passage_cache_num_proc)
        require(objective in ("halves", "one_passage"), "objective", "'halves' or 'one_passage'", objective)
        self.encoder_spec = EncoderSpec.of(encoder)
        self.encoder_spec.refuse(type(self).__name__, "first_token_global_attention", "instruction",
                                 "instruction_in_pooling", "sentence_transformers_head", "max_length",
                                 instead={"max_length": "passages.max_passage_tokens"})
        self.tokenizer, passage_encoder = self.encoder_spec.build(
            self.passage_spec.max_passage_tokens, PassageSpec.key_of("max_passage_tokens"))
        hidden = passage_encoder.hidden_size
        node_dim = hidden if node_dim is None else node_dim
        if head_init == "auto":
            head_init = "identity" if node_dim >= hidden else "random"
        self.hparams["node_dim"], self.hparams["head_init"] = node_dim, head_init  # what was built, for export
        require(head_init == "random" or node_dim >= hidden, "node_dim",
                f">= the encoder's hidden size {hidden} with head_init 'identity'", node_dim)
        self.model = GraphDocumentEncoder(passage_encoder, node_dim, num_graph_layers, num_heads,
                                          attention_dropout, passage_token_budget, bucket_passages, head_init)
        self.contrastive = InfoNCELoss(temperature, similarity="dot", symmetric=objective == "halves",
                                       gather_across_devices=gather_across_devices)
        self.graph_builder = PassageGraphBuilder(self.tokenizer, self.passage_spec)
        # the DataModule splits and tokenizes the corpus's passages once, on disk, and hands us those
        self.token_cache = PassageCache(self.tokenizer, self.passage_spec, cache_dir=passage_cache_dir,
                                        num_proc=passage_cache_num_proc) if cache_passages else None

    #: Documents of the corpus looked at to tell whether it has sections.
    sections_sample = 1000

    def check_corpus(self, datamodule) -> None:
        """``passages.graph: section`` needs documents of several sections: on a corpus whose documents (the first
        :attr:`sections_sample`) all have one, the section graph is a star, not the paper's section structure."""
        corpus = datamodule.all_set if isinstance(datamodule, DocumentSplits) else None
        if self.passage_spec.graph != "section" or not corpus:
            return
        sample = [corpus[i] for i in range(min(len(corpus), self.sections_sample))]
        if max(map(_sections_with_text, sample)) <= 1:
            key = f"model.init_args.{PassageSpec.key_of('graph')}"
            raise ConfigError(f"{key} is 'section' but none of the first {len(sample)} documents of "
                              f"{type(datamodule).__name__} has more than one section: set {key} to 'full', or use "
                              f"a corpus with section headings (e.g. WikipediaDataModule, or JSONLDataModule with "
                              f"\"sections\")")

    def collator(self, stage: str):
        if stage == "predict":
            return GraphDocumentCollator(self.graph_builder, self.passage_spec.max_passages_inference)
        return SubDocumentCollator(self.graph_builder, self.passage_spec.max_passages, self.hparams.objective,
                                   deterministic=stage != "fit")

    def document_collator(self, stage: str):
        """Whole documents as passage graphs: up to ``passages.max_passages`` passages in training (``"fit"``, the
        paper's 50) and ``passages.max_passages_inference`` in validation, test and predict (the paper's 100)."""
        if stage != "fit":
            return self.collator("predict")
        return GraphDocumentCollator(self.graph_builder, self.passage_spec.max_passages)

    def losses(self, batch: SubDocumentPairBatch) -> dict[str, Tensor]:
        return self._contrastive_terms(self.model(concat_graphs(batch.view_a, batch.view_b)), batch)

    def _contrastive_terms(self, embeddings: Tensor, batch: SubDocumentPairBatch) -> dict[str, Tensor]:
        n = len(batch)
        first, second = embeddings[:n], embeddings[n:]  # (B, Dn) each
        if self.hparams.objective == "halves":  # eq. 5-6: both directions
            terms = self.contrastive(first, second, batch.doc_index, batch.doc_index)
        else:  # §3.3: the long sub-documents are the anchors, every document's single passage a candidate
            terms = self.contrastive(second, first, batch.doc_index, batch.doc_index)
        terms["skipped_documents"] = torch.full((), float(batch.skipped), device=embeddings.device)
        return terms

    def cacheable(self, batch: SubDocumentPairBatch) -> CacheableBatch:
        """Rows are the 2B sub-document graphs (first sub-documents, then second ones)."""
        graphs = concat_graphs(batch.view_a, batch.view_b)
        counts = graphs.passage_counts
        lengths = token_lengths(graphs.passages.attention_mask)  # (P,)
        graph_of_passage = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
        longest = torch.zeros(len(counts), dtype=lengths.dtype, device=lengths.device).scatter_reduce(
            0, graph_of_passage.to(lengths.device), lengths, "amax")  # (2B,)
        return CacheableBatch(longest * counts.to(longest.device), lambda index: select_graphs(graphs, index),
                              self.model, lambda embeddings: self._contrastive_terms(embeddings, batch))

    def embed(self, batch: GraphDocumentBatch) -> Tensor:
        return self.model(batch.graphs)

    def predict_step(self, batch: GraphDocumentBatch, batch_idx: int) -> dict:
        """Embeddings and, per document, the last graph layer's attention (heads, n+1, n+1) for Fig. 6/7-style
        heatmaps (:func:`lit_docemb.eval.figures.attention_heatmap`)."""
        embeddings, maps = self.model.attention_maps(batch.graphs)
        return {"ids": batch.ids, "embeddings": embeddings.float().cpu(), "attention": [m.float().cpu() for m in maps]}
