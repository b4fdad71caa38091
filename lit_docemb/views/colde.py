"""CoLDE's batches (§3.1): documents → n sections → non-overlapping chunks of at most ``chunk_tokens`` tokens.

Sections follow the document's real section boundaries when it has at least n non-empty sections (consecutive
real sections are merged into n groups of about equal token counts, never cutting a real section); otherwise
the document's tokens are split into n equal parts. Each section is cut into chunks with
:func:`~lit_docemb.data.text.token_windows` and wrapped in the tokenizer's special tokens. A document with
fewer tokens than sections is dropped from the batch and counted (``skipped``); a configured
``max_chunks_per_section``, and the size of the model's chunk-embedding table (``chunk_positions``), keep the
first chunks of a section and count the others (``truncated_chunks``, logged as ``train/truncated_chunks``), so
that a document of any length reaches the model with chunk ids inside its table. Labels are similarity groups (``Document.label``): two documents share
one when their labels are equal; a document without a label is its own group. Items that are
:class:`~lit_docemb.data.aan.DocumentPair` (AAN's LRA pairs) become groups by their matching links within the
batch (connected components of the pairs labelled 1), each document once.
"""

from __future__ import annotations

import logging
from itertools import pairwise

import torch
from torch import Tensor

from lit_docemb.data.aan import DocumentPair
from lit_docemb.data.batches import DocumentSectionsBatch, SectionChunkBatch, SectionChunks
from lit_docemb.data.document import Document, doc_index
from lit_docemb.data.text import token_windows
from lit_docemb.data.tokens import pad_ids, special_tokens, take_rows

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


def split_sections(section_tokens: list[list[int]], num_sections: int) -> list[list[int]] | None:
    """A document's token ids (per real section, no special tokens) as ``num_sections`` sections; None when it
    has fewer tokens than sections."""
    real = [ids for ids in section_tokens if ids]
    if num_sections == 1:
        flat = [t for ids in real for t in ids]
        return [flat] if flat else None
    starts = group_sections([len(ids) for ids in real], num_sections)
    if starts is not None:
        bounds = [*starts, len(real)]
        return [[t for ids in real[a:b] for t in ids] for a, b in pairwise(bounds)]
    flat = [t for ids in real for t in ids]
    if len(flat) < num_sections:
        return None
    cuts = [len(flat) * k // num_sections for k in range(num_sections + 1)]
    return [flat[a:b] for a, b in pairwise(cuts)]


class SectionChunkCollator:
    """Documents (or AAN document pairs) → :class:`SectionChunkBatch` (runs in dataloader workers).

    Args:
        tokenizer: The encoder's tokenizer.
        num_sections: Sections n per document (1: unsplit).
        chunk_tokens: Tokens per chunk, special tokens included (paper: 512).
        max_chunks_per_section: Keep at most this many chunks of a section (counted); None keeps all.
        chunk_positions: Chunk ids the model embeds (its chunk-embedding table): the chunks of a section beyond
            it are dropped and counted too; None when the model embeds no chunk id (−Aug).
    """

    def __init__(self, tokenizer, num_sections: int, chunk_tokens: int, max_chunks_per_section: int | None,
                 chunk_positions: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.num_sections = num_sections
        self.prefix, self.suffix = special_tokens(tokenizer)
        self.body_tokens = chunk_tokens - len(self.prefix) - len(self.suffix)
        if self.body_tokens < 1:
            raise ValueError(f"chunk_tokens={chunk_tokens} leaves no room besides the special tokens")
        self.max_chunks_per_section = max_chunks_per_section
        limits = [n for n in (max_chunks_per_section, chunk_positions) if n is not None]
        self.chunk_limit = min(limits) if limits else None
        self._warned = False

    def section_tokens(self, documents: list[Document]) -> list[list[list[int]]]:
        """Each document's real sections as token ids (no special tokens), in one tokenizer call."""
        texts = [s.text for d in documents for s in d.sections]
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        out, start = [], 0
        for doc in documents:
            out.append(encoded[start:start + len(doc.sections)])
            start += len(doc.sections)
        return out

    def __call__(self, items: list) -> SectionChunkBatch:
        if items and isinstance(items[0], DocumentPair):
            documents, labels = pair_groups(items)
        else:
            documents = items
            labels = [doc_index(f"label:{d.label}") if d.label is not None else doc_index(d.id) for d in items]
        return self.batch(documents, labels)

    def batch(self, documents: list[Document], labels: list[int],
              tokens: list[list[list[int]]] | None = None) -> SectionChunkBatch:
        """The batch of ``documents`` with their group ``labels`` (``tokens``: their :meth:`section_tokens`,
        if already computed)."""
        chunks, section_ids, chunk_ids, per_section, kept, truncated = [], [], [], [], [], 0
        tokens = self.section_tokens(documents) if tokens is None else tokens
        for i, document_tokens in enumerate(tokens):
            sections = split_sections(document_tokens, self.num_sections)
            if sections is None:
                continue
            kept.append(i)
            for p, section in enumerate(sections):
                windows = token_windows(section, self.body_tokens)
                if self.chunk_limit is not None and len(windows) > self.chunk_limit:
                    truncated += len(windows) - self.chunk_limit
                    windows = windows[:self.chunk_limit]
                chunks += [self.prefix + w + self.suffix for w in windows]
                section_ids += [p] * len(windows)
                chunk_ids += list(range(len(windows)))
                per_section.append(len(windows))
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
            torch.tensor([doc_index(documents[i].id) for i in kept], dtype=torch.long),
            [documents[i].id for i in kept], skipped=len(documents) - len(kept), truncated_chunks=truncated)


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

    def __call__(self, documents: list[Document]) -> DocumentSectionsBatch | SectionChunkBatch:
        tokens = self.whole.section_tokens(documents)
        labels = [0] * len(documents)
        whole = self.whole.batch(documents, labels, tokens)
        return whole if self.split is None else DocumentSectionsBatch(whole, self.split.batch(documents, labels, tokens))


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
