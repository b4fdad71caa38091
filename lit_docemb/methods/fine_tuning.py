"""What the fine-tuning wrappers (:class:`~lit_docemb.methods.dense_retrieval.DenseRetrieval`,
:class:`~lit_docemb.methods.classifier.DocumentClassifier`) do with the pretraining method they wrap.

* :func:`document_rows`: the backbone's batch of whole documents (what its ``embed`` reads) as GradCache rows,
  one per document: what each costs to encode and how to take a sub-batch of them. The batch types of the
  backbones are known here, so the backbones' own files need nothing for it.
* :func:`checkpoint_activations`: the backbone's Hugging Face encoders recompute their layers' activations in the
  backward pass instead of keeping them (``activation_checkpointing``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

import torch
from torch import Tensor, nn

from lit_docemb.data.core.batches import (
    DocumentBatch,
    DocumentSectionsBatch,
    DocumentSentencesBatch,
    GraphDocumentBatch,
    SectionChunkBatch,
)
from lit_docemb.data.core.tokens import take_rows, token_lengths
from lit_docemb.errors import BadArgument, ConfigError, require
from lit_docemb.models import HFEncoder
from lit_docemb.views.colde import select_documents
from lit_docemb.views.graph_roberta import select_graphs


@dataclass
class DocumentRows:
    """A backbone's document batch as rows.

    Attributes:
        costs: (B,) padded tokens each document costs to encode (see :class:`~lit_docemb.methods.grad_cache.
            CacheableBatch`).
        take: (k,) int64 row indices -> a batch of those documents, in that order, of a type ``embed`` reads.
    """

    costs: Tensor
    take: Callable[[Tensor], Any]


@singledispatch
def document_rows(batch) -> DocumentRows:
    """The documents of ``batch`` as GradCache rows; another batch type stops the run with one line (a
    :class:`~lit_docemb.errors.ConfigError`, at the first training step: the type is known once a batch is)."""
    raise ConfigError(f"model.init_args.grad_cache_token_budget: the backbone's {type(batch).__name__} cannot be cut "
                      f"into documents (GradCache supports the document batches of DocSplit, Graph-RoBERTa and "
                      f"CoLDE): unset it")


def _longest_per_group(lengths: Tensor, counts: Tensor) -> Tensor:
    """(G,) longest of the consecutive ``counts`` (G,) runs of ``lengths`` (sum(counts),)."""
    group = torch.repeat_interleave(torch.arange(len(counts), device=lengths.device), counts.to(lengths.device))
    return torch.zeros(len(counts), dtype=lengths.dtype, device=lengths.device).scatter_reduce(
        0, group, lengths, "amax")


def _runs(counts: Tensor, index: Tensor) -> Tensor:
    """Positions of the ``index`` runs among consecutive runs of ``counts`` items, in ``index`` order."""
    counts = counts.cpu()
    starts = torch.cumsum(counts, 0) - counts
    rows = [torch.arange(int(starts[i]), int(starts[i] + counts[i])) for i in index.tolist()]
    return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.long)


@document_rows.register
def _(batch: DocumentBatch) -> DocumentRows:  # DocSplit, masked-LM: one text per document
    def take(index: Tensor) -> DocumentBatch:
        return DocumentBatch(take_rows(batch.tokens, index), [batch.ids[i] for i in index.tolist()])

    return DocumentRows(token_lengths(batch.tokens.attention_mask), take)


@document_rows.register
def _(batch: DocumentSentencesBatch) -> DocumentRows:  # DocSplit's sentence_pooling: a document is its sentences
    counts = batch.sentence_counts

    def take(index: Tensor) -> DocumentSentencesBatch:
        sentences = take_rows(batch.sentences, _runs(counts, index))
        ids = [batch.ids[i] for i in index.tolist()]
        return DocumentSentencesBatch(sentences, counts[index.to(counts.device)], ids)

    longest = _longest_per_group(token_lengths(batch.sentences.attention_mask), counts)
    return DocumentRows(longest * counts.to(longest.device), take)


@document_rows.register
def _(batch: GraphDocumentBatch) -> DocumentRows:  # Graph-RoBERTa: a document is its passage graph
    counts = batch.graphs.passage_counts

    def take(index: Tensor) -> GraphDocumentBatch:
        return GraphDocumentBatch(select_graphs(batch.graphs, index), [batch.ids[i] for i in index.tolist()])

    longest = _longest_per_group(token_lengths(batch.graphs.passages.attention_mask), counts)
    return DocumentRows(longest * counts.to(longest.device), take)


@document_rows.register
def _(batch: SectionChunkBatch) -> DocumentRows:  # CoLDE: a document is its sections' chunks
    chunks = batch.sections.chunks_per_section.reshape(len(batch), -1).sum(1)  # (B,)
    longest = _longest_per_group(token_lengths(batch.sections.chunks.attention_mask), chunks)
    return DocumentRows(longest * chunks.to(longest.device), lambda index: select_documents(batch, index))


@document_rows.register
def _(batch: DocumentSectionsBatch) -> DocumentRows:  # CoLDE's predict reading: embed reads the whole documents
    return document_rows(batch.whole)


def refuse_own_budget(backbone: nn.Module) -> None:
    """Refuses a backbone that has a ``grad_cache_token_budget`` of its own: the wrapper trains, so the budget is
    the wrapper's (:class:`~lit_docemb.errors.BadArgument` naming ``backbone``)."""
    require(getattr(backbone, "grad_cache_token_budget", None) is None, "backbone",
            "without grad_cache_token_budget (the wrapper trains: set model.init_args.grad_cache_token_budget)",
            getattr(backbone, "grad_cache_token_budget", None))


def checkpoint_activations(backbone: nn.Module, argument: str = "activation_checkpointing") -> int:
    """Turns on activation checkpointing in every Hugging Face encoder of ``backbone`` (non-reentrant
    ``torch.utils.checkpoint``: the same gradients, dropout masks replayed; layers recomputed in the backward pass
    in training only); returns how many. A backbone without one, or an architecture transformers cannot
    checkpoint, is a :class:`~lit_docemb.errors.BadArgument` naming ``argument``."""
    encoders = [module for module in backbone.modules() if isinstance(module, HFEncoder)]
    if not encoders:
        raise BadArgument(argument, f"{type(backbone).__name__} has no Hugging Face encoder whose activations could "
                                    f"be recomputed: set it to false")
    for encoder in encoders:
        model = encoder.model
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise BadArgument(argument, f"encoder {encoder.name_or_path!r} ({type(model).__name__}) does not support "
                                        f"activation checkpointing in transformers: set it to false")
        settings = {"use_reentrant": False}  # the reentrant form refuses torch.autograd.grad (GradCache under DDP)
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=settings)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=settings)
    return len(encoders)

