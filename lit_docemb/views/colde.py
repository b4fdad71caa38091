"""CoLDE's batches (§3.1): documents → n sections → non-overlapping chunks of at most ``chunk_tokens`` tokens.

Sections follow the document's real section boundaries when it has at least n non-empty sections (consecutive
real sections are merged into n groups of about equal token counts, never cutting a real section); otherwise
the document's tokens are split into n equal parts. Each section is cut into chunks as
:func:`~lit_docemb.data.core.text.token_windows` cuts it (no overlap) and wrapped in the tokenizer's special tokens. The
token ids come from the method's :class:`~lit_docemb.data.caches.section_cache.SectionCache` (tokenized once per corpus and
tokenizer; a pass only computes positions), or, for documents handed over as they are, from the same cache's
``tokenize``. A document with
fewer tokens than sections is dropped from the batch and counted (``skipped``); a configured
``max_chunks_per_section``, and the size of the model's chunk-embedding table (``chunk_positions``), keep the
first chunks of a section and count the others (``truncated_chunks``, logged as ``train/truncated_chunks``), so
that a document of any length reaches the model with chunk ids inside its table. Labels are similarity groups (``Document.label``): two documents share
one when their labels are equal; a document without a label is its own group. Items that are
:class:`~lit_docemb.data.corpora.aan.DocumentPair` (AAN's LRA pairs) become groups by their matching links within the
batch (connected components of the pairs labelled 1), each document once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import accumulate, pairwise

import numpy as np

import torch
from torch import Tensor

from lit_docemb.data.corpora.aan import DocumentPair
from lit_docemb.data.core.batches import DocumentSectionsBatch, SectionChunkBatch, SectionChunks
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.data.caches.section_cache import SectionCache, TokenizedSections
from lit_docemb.data.core.tokens import pad_ids, special_tokens, take_rows

log = logging.getLogger(__name__)


def group_sections(lengths: list[int], num_sections: int) -> list[int] | None:
    """Start indices of ``num_sections`` groups of consecutive real sections (token counts ``lengths``, all
    > 0), each group's cumulative size as close as possible to an equal share; None when there are fewer real
    sections than groups."""
    if len(lengths) < num_sections:
        return None
    cumulative = [0]
    for length in lengths:
        cumulative.append(cumulative[-1] + length)
    starts = [0]
    for k in range(1, num_sections):
        target = cumulative[-1] * k / num_sections
        lowest, highest = starts[-1] + 1, len(lengths) - (num_sections - k)  # leave one section per later group
        starts.append(min(range(lowest, highest + 1), key=lambda j: (abs(cumulative[j] - target), j)))
    return starts


def split_sections(input_ids: np.ndarray, section_lengths: Sequence[int], num_sections: int) -> list[np.ndarray] | None:
    """A document's token ids (its real sections one after the other, no special tokens; ``section_lengths``: their
    token counts) as ``num_sections`` sections (views of ``input_ids``); None when it has fewer tokens than
    sections."""
    if num_sections == 1:
        return [input_ids] if len(input_ids) else None
    real = [length for length in section_lengths if length]
    starts = group_sections(real, num_sections)
    if starts is not None:
        cumulative = [0, *accumulate(real)]
        bounds = [cumulative[start] for start in starts] + [len(input_ids)]
        return [input_ids[a:b] for a, b in pairwise(bounds)]
    if len(input_ids) < num_sections:
        return None
    cuts = [len(input_ids) * k // num_sections for k in range(num_sections + 1)]
    return [input_ids[a:b] for a, b in pairwise(cuts)]


class SectionChunkCollator:
    """Documents or their cached section tokens (or AAN document pairs of either) → :class:`SectionChunkBatch` (runs
    in dataloader workers).

    Args:
        tokenizer: The encoder's tokenizer.
        num_sections: Sections n per document (1: unsplit).
        chunk_tokens: Tokens per chunk, special tokens included (paper: 512).
        max_chunks_per_section: Keep at most this many chunks of a section (counted); None keeps all.
        chunk_positions: Chunk ids the model embeds (its chunk-embedding table): the chunks of a section beyond
            it are dropped and counted too; None when the model embeds no chunk id (−Aug).
        cache: The method's section cache, whose :meth:`~lit_docemb.data.caches.section_cache.SectionCache.tokenize` turns
            documents into rows (None: one over ``tokenizer``); cached rows are used as they are.
        max_section_tokens: Keep only the first this many tokens of each section (special tokens not counted)
            before it is cut into chunks; None keeps all (the method passes it to its training collator only).
        read_groups: Group documents by their labels and matching pairs; False: every document is its own group,
            labels and pairs never read.
    """

    def __init__(self, tokenizer, num_sections: int, chunk_tokens: int, max_chunks_per_section: int | None,
                 chunk_positions: int | None = None, cache: SectionCache | None = None,
                 max_section_tokens: int | None = None, read_groups: bool = True) -> None:
        self.tokenizer = tokenizer
        self.read_groups = read_groups
        self.cache = SectionCache(tokenizer) if cache is None else cache
        self.num_sections = num_sections
        self.prefix, self.suffix = special_tokens(tokenizer)
        self.body_tokens = chunk_tokens - len(self.prefix) - len(self.suffix)
        if self.body_tokens < 1:
            raise ValueError(f"chunk_tokens={chunk_tokens} leaves no room besides the special tokens")
        self.max_chunks_per_section = max_chunks_per_section
        if max_section_tokens is not None and max_section_tokens < 1:
            raise ValueError(f"max_section_tokens must be >= 1 or None, got {max_section_tokens}")
        self.max_section_tokens = max_section_tokens
        limits = [n for n in (max_chunks_per_section, chunk_positions) if n is not None]
        self.chunk_limit = min(limits) if limits else None
        self._warned = False

    def rows(self, items: Sequence[Document | TokenizedSections]) -> list[TokenizedSections]:
        """The items as section-cache rows (documents are tokenized now, in one call)."""
        documents = [item for item in items if isinstance(item, Document)]
        fresh = iter(self.cache.tokenize(documents) if documents else [])
        return [next(fresh) if isinstance(item, Document) else item for item in items]

    def __call__(self, items: list) -> SectionChunkBatch:
        if items and isinstance(items[0], DocumentPair):
            documents, labels = pair_groups(items)
        else:
            documents = items
            labels = [doc_index(f"label:{d.label}") if d.label is not None else doc_index(d.id) for d in items]
        if not self.read_groups:
            labels = [doc_index(d.id) for d in documents]
        return self.batch(self.rows(documents), labels)

    def batch(self, rows: list[TokenizedSections], labels: list[int]) -> SectionChunkBatch:
        """The batch of the documents ``rows`` with their group ``labels``."""
        chunks, section_ids, chunk_ids, per_section, kept, truncated = [], [], [], [], [], 0
        prefix, suffix = np.asarray(self.prefix, dtype=np.int64), np.asarray(self.suffix, dtype=np.int64)
        for i, row in enumerate(rows):
            sections = split_sections(row.input_ids, row.section_lengths(), self.num_sections)
            if sections is None:
                continue
            kept.append(i)
            for p, section in enumerate(sections):
                section = section[:self.max_section_tokens]  # (≤ max_section_tokens,); None slices nothing off
                starts = range(0, len(section), self.body_tokens)  # token_windows without overlap
                if self.chunk_limit is not None and len(starts) > self.chunk_limit:
                    truncated += len(starts) - self.chunk_limit
                    starts = starts[:self.chunk_limit]
                chunks += [np.concatenate([prefix, section[start:start + self.body_tokens], suffix])
                           for start in starts]
                section_ids += [p] * len(starts)
                chunk_ids += range(len(starts))
                per_section.append(len(starts))
        if truncated and not self._warned:
            log.warning("sections longer than %d chunks (max_chunks_per_section=%s, chunk embeddings) lose their "
                        "last chunks (%d in this batch; counted as truncated_chunks)", self.chunk_limit,
                        self.max_chunks_per_section, truncated)
            self._warned = True
        sections = SectionChunks(pad_ids(chunks, self.tokenizer.pad_token_id or 0),  # (C, T)
                                 torch.tensor(section_ids, dtype=torch.long),
                                 torch.tensor(chunk_ids, dtype=torch.long), torch.tensor(per_section, dtype=torch.long))
        return SectionChunkBatch(
            sections, self.num_sections, torch.tensor([labels[i] for i in kept], dtype=torch.long),
            torch.tensor([doc_index(rows[i].id) for i in kept], dtype=torch.long),
            [rows[i].id for i in kept], skipped=len(rows) - len(kept), truncated_chunks=truncated)


def pair_groups(pairs: list[DocumentPair]) -> tuple[list[Document], list[int]]:
    """The distinct documents of ``pairs`` and a group label each: documents joined by a matching pair (label
    1), directly or through others, share a label (union-find over the batch)."""
    documents: dict[str, Document] = {}
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for pair in pairs:
        for doc in (pair.first, pair.second):
            documents.setdefault(doc.id, doc)
            parent.setdefault(doc.id, doc.id)
        if pair.label == 1:
            parent[root(pair.first.id)] = root(pair.second.id)
    ids = list(documents)
    return [documents[i] for i in ids], [doc_index(f"group:{root(i)}") for i in ids]


class PredictCollator:
    """Documents → :class:`DocumentSectionsBatch` (each tokenized once for both views); without ``split``
    the unsplit documents alone (:class:`SectionChunkBatch`, embeddings only)."""

    def __init__(self, whole: SectionChunkCollator, split: SectionChunkCollator | None) -> None:
        self.whole, self.split = whole, split

    def __call__(self, items: list[Document | TokenizedSections]) -> DocumentSectionsBatch | SectionChunkBatch:
        rows = self.whole.rows(items)
        labels = [0] * len(rows)
        whole = self.whole.batch(rows, labels)
        return whole if self.split is None else DocumentSectionsBatch(whole, self.split.batch(rows, labels))


def select_documents(batch: SectionChunkBatch, index: Tensor) -> SectionChunkBatch:
    """Documents ``index`` of a batch, in that order, with their sections and chunks."""
    n, counts = batch.sections_per_document, batch.sections.chunks_per_section.cpu()
    starts = torch.cumsum(counts, 0) - counts
    section_rows = (index.cpu()[:, None] * n + torch.arange(n)).flatten()  # (k*n,)
    chunk_rows = [torch.arange(int(starts[s]), int(starts[s] + counts[s])) for s in section_rows.tolist()]
    chunk_rows = torch.cat(chunk_rows) if chunk_rows else torch.zeros(0, dtype=torch.long)
    device = batch.labels.device
    sections = batch.sections
    chunk_rows_d, index_d = chunk_rows.to(device), index.to(device)
    return SectionChunkBatch(
        SectionChunks(take_rows(sections.chunks, chunk_rows_d), sections.section_ids[chunk_rows_d],
                      sections.chunk_ids[chunk_rows_d], sections.chunks_per_section[section_rows.to(device)]),
        n, batch.labels[index_d], batch.doc_index[index_d], [batch.ids[i] for i in index.tolist()],
        batch.skipped, batch.truncated_chunks)
