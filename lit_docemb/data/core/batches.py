"""Typed batches: the contract between DataModules (through a method's collator) and methods.

Each method names the batch type its collator produces and its steps consume. Lightning moves dataclass
batches to the device field by field.

Throughput counting (:class:`lit_docemb.methods.callbacks.Throughput`): a batch's documents are ``len(batch)``; its
tokens are :func:`count_tokens`, the real (non-padding) tokens its encoder reads: the ``num_tokens()`` of the
batch if it has one (the :class:`CountsTokens` protocol), else the sum over the :class:`TokenBatch` es it holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor


class PackedWords(NamedTuple):
    """B documents' word ids as one run of words, document after document, each in reading order: a Doc2VecC
    batch's words without a padded (B, T) block (the longest document sets T, up to ``max_words``, 10,000 in DECA's
    configs: 4,096 documents padded to it are 328 MB of int64 for a few MB of words). A NamedTuple of tensors, which
    Lightning moves to a device field by field.

    Attributes:
        ids: (N,) the words of every document, ids 1..V.
        lengths: (B,) words of each document.
        starts: (B,) where each document's words begin in ``ids``.
    """

    ids: Tensor
    lengths: Tensor
    starts: Tensor

    @classmethod
    def of_lengths(cls, ids: Tensor, lengths: Tensor) -> PackedWords:
        """``ids`` holding documents of ``lengths`` words one after the other."""
        return cls(ids, lengths, torch.cumsum(lengths, 0) - lengths)

    @classmethod
    def of(cls, words: Tensor | PackedWords) -> PackedWords:
        """(B, T) word ids, 0-padded on the right, packed; packed words as they are."""
        if isinstance(words, PackedWords):
            return words
        present = words != 0
        return cls.of_lengths(words[present], present.sum(1))

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[int]]) -> PackedWords:
        """Each document's word ids (no padding), packed."""
        ids = np.concatenate([np.asarray(row, dtype=np.int64) for row in rows]) if len(rows) else np.zeros(0, np.int64)
        return cls.of_lengths(torch.from_numpy(ids), torch.tensor([len(row) for row in rows], dtype=torch.long))

    def positions(self) -> Tensor:
        """(N, 2) rows (document, position in it) of every word, in reading order: the nonzero entries of
        :meth:`padded`."""
        device = self.ids.device
        documents = torch.repeat_interleave(torch.arange(len(self.lengths), device=device), self.lengths)
        offsets = torch.arange(len(self.ids), device=device) - torch.repeat_interleave(self.starts, self.lengths)
        return torch.stack([documents, offsets], 1)

    def padded(self) -> Tensor:
        """The (B, T) block, 0-padded on the right (T the longest document's length, at least 1)."""
        width = max(int(self.lengths.max()) if len(self.lengths) else 0, 1)
        out = self.ids.new_zeros(len(self.lengths), width)
        rows, columns = self.positions().unbind(1)
        out[rows, columns] = self.ids
        return out

    def followed_by(self, other: PackedWords) -> PackedWords:
        """Each document's words, then those of the same row of ``other``."""
        lengths = self.lengths + other.lengths
        merged = PackedWords.of_lengths(self.ids.new_empty(int(lengths.sum())), lengths)
        own, theirs = self.positions(), other.positions()
        merged.ids[merged.starts[own[:, 0]] + own[:, 1]] = self.ids
        merged.ids[merged.starts[theirs[:, 0]] + self.lengths[theirs[:, 0]] + theirs[:, 1]] = other.ids
        return merged

    def select(self, documents: Tensor) -> PackedWords:
        """The documents at rows ``documents``, packed alike: the same words in the same order as packing
        ``padded()[documents]``, at the cost of their words rather than of ``len(documents)`` padded rows."""
        lengths = self.lengths[documents]
        starts = torch.cumsum(lengths, 0) - lengths
        moved = torch.repeat_interleave(self.starts[documents] - starts, lengths)  # (words,) source - destination
        return PackedWords(self.ids[moved + torch.arange(len(moved), device=moved.device)], lengths, starts)


@runtime_checkable
class CountsTokens(Protocol):
    """A batch that says how many real tokens its encoder reads (a 0-dim tensor, left on the batch's device so
    that counting never waits for the device)."""

    def num_tokens(self) -> Tensor: ...


def count_tokens(batch: Any) -> Tensor | None:
    """Real tokens of a batch: its ``num_tokens()``, or the sum over the :class:`CountsTokens` inside its
    dataclass fields, lists, tuples and dict values; ``None`` when it holds none (the batch is not counted)."""
    counts = token_counts(batch)
    return added_counts(counts) if counts else None


def added_counts(counts: list[Tensor]) -> Tensor:
    """The sum of 0-dim token counts (one or more), as a 0-dim int64 tensor on their device."""
    return torch.stack([count.reshape(()).long() for count in counts]).sum()


def token_counts(batch: Any) -> list[Tensor]:
    """The parts of :func:`count_tokens` before they are added: the ``num_tokens()`` of each :class:`CountsTokens`
    found, in order (``[]`` when there is none), so that a caller counting many batches adds them once."""
    if isinstance(batch, Tensor):
        return []
    if _counts_tokens(type(batch)):
        return [batch.num_tokens()]
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        parts = [getattr(batch, f.name) for f in dataclasses.fields(batch)]
    elif isinstance(batch, (list, tuple)):
        parts = batch
    elif isinstance(batch, dict):
        parts = batch.values()
    else:
        return []
    return [count for part in parts for count in token_counts(part)]


#: Whether a type follows :class:`CountsTokens`, known once per type: ``isinstance`` against a runtime protocol
#: looks its members up on every call, a cost :class:`~lit_docemb.methods.callbacks.Throughput` would pay for every
#: part of every batch.
_COUNTS_TOKENS_TYPES: dict[type, bool] = {}


def _counts_tokens(kind: type) -> bool:
    known = _COUNTS_TOKENS_TYPES.get(kind)
    if known is None:
        known = _COUNTS_TOKENS_TYPES[kind] = issubclass(kind, CountsTokens)
    return known


@dataclass
class TokenBatch:
    """Padded token ids of N texts.

    Attributes:
        input_ids: (N, T) token ids.
        attention_mask: (N, T) 1 for real tokens, 0 for padding.
    """

    input_ids: Tensor
    attention_mask: Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def num_tokens(self) -> Tensor:
        return self.attention_mask.sum()


@dataclass
class MaskedTokenBatch(TokenBatch):
    """Token ids with some positions masked for masked-language modelling.

    Attributes:
        labels: (N, T) original ids at masked positions, -100 elsewhere.
    """

    labels: Tensor


@dataclass
class ViewPairBatch:
    """Two views of each of B documents: row i of ``view_a`` and row i of ``view_b`` are a positive pair.

    Attributes:
        view_a: (B, T) tokens of the first view.
        view_b: (B, T) tokens of the second view.
        doc_index: (B,) int64 identity of the source document (stable hash of its id), used to mask the same
            document met twice in the gathered batch.
        mlm: optional masked copy of the first views for an auxiliary MLM loss.
        skipped: documents of the incoming list that could not make two views (counted, not silent).
    """

    view_a: TokenBatch
    view_b: TokenBatch
    doc_index: Tensor
    mlm: MaskedTokenBatch | None = None
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.view_a)


@dataclass
class DocumentBatch:
    """Whole documents to embed (prediction, evaluation).

    Attributes:
        tokens: (B, T) tokens of each document (title and body, truncated to the model's length).
        ids: the B document ids, in order.
    """

    tokens: TokenBatch
    ids: list[str]

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class DocumentSentencesBatch:
    """Whole documents to embed as their sentences, each sentence encoded alone (DocSplit's ``sentence_pooling``,
    DECA's BERT-ST baseline).

    Attributes:
        sentences: (S, T) tokens of every sentence, document after document, S = sum of ``sentence_counts``.
        sentence_counts: (B,) int64 sentences of each document, each >= 1.
        ids: the B document ids, in order.
    """

    sentences: TokenBatch
    sentence_counts: Tensor
    ids: list[str]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class PassageGraphBatch:
    """G document graphs over their passages (Graph-RoBERTa), the passages of all graphs flattened.

    Attributes:
        passages: (P, T) tokens of every passage, graph after graph, P = sum of ``passage_counts``.
        passage_counts: (G,) int64 passages of each graph, each >= 1. A document of one passage is still a
            graph of two nodes (its document node and its passage).
        edges: G tensors (2, E_g) int64 of undirected edges (both directions listed) over each graph's local
            nodes: 0 is the document node, 1..n its passages in order. Empty for queries.
        is_query: (G,) bool, graph g is a query (§3.3): a single node, its initial representation, not passed
            through the graph layers. ``None``: every graph is a document.
    """

    passages: TokenBatch
    passage_counts: Tensor
    edges: list[Tensor]
    is_query: Tensor | None = None

    def __len__(self) -> int:
        return len(self.passage_counts)


@dataclass
class SubDocumentPairBatch:
    """Two sub-documents of each of B documents, a positive pair (Graph-RoBERTa pretraining, §2.2 / §3.3).

    Attributes:
        view_a: B graphs of the first sub-documents (one passage each in the retrieval variant).
        view_b: B graphs of the second sub-documents.
        doc_index: (B,) int64 stable identity of the source documents (masks the same document met twice).
        skipped: documents of the incoming list that could not make two sub-documents (counted, not silent).
    """

    view_a: PassageGraphBatch
    view_b: PassageGraphBatch
    doc_index: Tensor
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.view_a)


@dataclass
class GraphDocumentBatch:
    """Whole documents as passage graphs, to embed (prediction, evaluation).

    Attributes:
        graphs: one graph per document.
        ids: the document ids, in order.
    """

    graphs: PassageGraphBatch
    ids: list[str]

    def __len__(self) -> int:
        return len(self.graphs)


@dataclass
class LabelledBatch:
    """A method's document batch with class targets (classification fine-tuning).

    Attributes:
        inputs: the backbone method's batch of whole documents (e.g. :class:`DocumentBatch`).
        targets: (B,) int64 class indices.
        skipped: documents of the incoming list left out for a missing or unknown label.
    """

    inputs: Any
    targets: Tensor
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.targets)


@dataclass
class QueryDocumentBatch:
    """Retrieval fine-tuning: B queries, their relevant documents and k sampled negatives each.

    Attributes:
        queries: the backbone's batch of B queries (each a one-section document).
        documents: the backbone's batch of B*(1+k) documents: the B positives in query order, then the
            negatives.
        query_ids: (B,) int64 identity of each query.
        candidate_ids: (B*(1+k),) int64: a positive carries its query's id (two examples of one query do not
            count each other's positive as a negative), a negative its document's.
    """

    queries: Any
    documents: Any
    query_ids: Tensor
    candidate_ids: Tensor

    def __len__(self) -> int:
        return len(self.query_ids)


@dataclass
class SectionChunks:
    """The chunks of S sections (of one or more documents), flattened (CoLDE).

    Attributes:
        chunks: (C, T) tokens of every chunk (special tokens included), section after section, in chunk order.
        section_ids: (C,) int64 section number p of each chunk within its document (0 .. n-1).
        chunk_ids: (C,) int64 chunk number q of each chunk within its section (0 .. n_c-1).
        chunks_per_section: (S,) int64 chunks of each section, each >= 1; the sections of a document are
            consecutive and ordered by p.
    """

    chunks: TokenBatch
    section_ids: Tensor
    chunk_ids: Tensor
    chunks_per_section: Tensor

    def __len__(self) -> int:
        return len(self.chunks_per_section)


@dataclass
class SectionChunkBatch:
    """B documents, each cut into the same number n of sections of <= 512-token chunks (CoLDE).

    Attributes:
        sections: the B*n sections, document after document.
        sections_per_document: n (1 for unsplit documents: evaluation, the -Aug and -CL ablations).
        labels: (B,) int64 similarity group (class) of each document: its sections share it.
        doc_index: (B,) int64 stable identity of each document.
        ids: the B document ids.
        skipped: documents of the incoming list too short for n sections (counted, not silent).
        truncated_chunks: chunks dropped by a configured maximum (counted, not silent).
    """

    sections: SectionChunks
    sections_per_document: int
    labels: Tensor
    doc_index: Tensor
    ids: list[str]
    skipped: int = 0
    truncated_chunks: int = 0

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class DocumentSectionsBatch:
    """CoLDE prediction: each document whole (its embedding) and cut into sections (section and chunk levels).

    Attributes:
        whole: the B documents unsplit (one section each).
        split: the same documents in n sections (documents too short for n sections left out and counted).
    """

    whole: SectionChunkBatch
    split: SectionChunkBatch

    def __len__(self) -> int:
        return len(self.whole)


@dataclass
class CoupledPairBatch:
    """B training examples: a coupled pair and an uncoupled pair each (row i of every field is example i).

    Attributes:
        former, latter: (B, T) tokens of f_i and b_i.
        negative_former, negative_latter: (B, T) tokens of the uncoupled pair (f_i, b_j) or (f_j, b_i).
        skipped: documents of the incoming list that could not be split or found no splittable partner.
    """

    former: TokenBatch
    latter: TokenBatch
    negative_former: TokenBatch
    negative_latter: TokenBatch
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.former)


@dataclass
class CoupledDocumentBatch:
    """Documents to represent: former and latter part tokens (B, T) and the B ids of the split documents."""

    former: TokenBatch
    latter: TokenBatch
    ids: list[str]
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.former)


@dataclass
class WordDocumentBatch:
    """Whole documents as word ids, for embedding.

    Attributes:
        words: each document's word ids (out-of-vocabulary words dropped).
        ids: the B document ids.
    """

    words: PackedWords
    ids: list[str]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class WordListBatch:
    """Whole documents as lists of words, for a representation fitted without gradients (the classical baselines of
    :mod:`lit_docemb.models.classical`): no tensors, nothing to move to a device.

    Attributes:
        words: the B documents' words, or their sentences (each its words joined by spaces) for a representation
            that reads sentences.
        keys: one key per document, its id and a hash of its words (names it to the representation).
        ids: the B document ids.
    """

    words: list[list[str]]
    keys: list[str]
    ids: list[str]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Doc2VecCPairBatch:
    """B documents and their augmentations (Doc2VecC backbone).

    Attributes:
        words: the documents' word ids.
        augmented: their augmentations' word ids, document for document.
        doc_index: (B,) int64 stable hashes of the document ids (masks repeats among negatives).
        skipped: documents of the incoming list with fewer than two in-vocabulary words (or an empty augmentation).
    """

    words: PackedWords
    augmented: PackedWords
    doc_index: Tensor
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.doc_index)

    def num_tokens(self) -> Tensor:
        """Words read by the encoder: the documents' and their augmentations'."""
        return self.words.lengths.sum() + self.augmented.lengths.sum()


@dataclass
class Doc2VecCBatch:
    """B documents for Doc2VecC's loss alone, no contrastive pair: each document followed by one of its
    augmentations (Table 5's "-Contrastive": Doc2VecC on the merged corpus), or the document's own words alone
    (plain Doc2VecC, DECA's framework ``Doc2VecCAlone``).

    Attributes:
        words: each document's word ids (then its augmentation's).
        doc_index: (B,) int64 stable hashes of the document ids.
        skipped: documents of the incoming list with fewer than two in-vocabulary words (or an empty augmentation).
    """

    words: PackedWords
    doc_index: Tensor
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.doc_index)

    def num_tokens(self) -> Tensor:
        """Words read by the encoder."""
        return self.words.lengths.sum()
