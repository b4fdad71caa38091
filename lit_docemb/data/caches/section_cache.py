"""CoLDE's section tokens computed once, kept on disk: its chunks are then cut from token ids.

CoLDE (seed paper 003) cuts each document into n sections of ≤ 512-token chunks on every pass
(:mod:`lit_docemb.views.colde`). Where the cuts fall depends on n (the training split, or one section for
embedding), but they are only positions in the document's token ids: :class:`SectionCache` tokenizes every real
section once per (corpus, tokenizer) into a memory-mapped Arrow table, as
:class:`~lit_docemb.data.caches.passage_cache.PassageCache` does for Graph-RoBERTa's passages, and a pass groups sections,
cuts windows and numbers chunks with integer arithmetic.

* **Layout**, one row per document, in the corpus's order: ``id``; ``label`` (the document's similarity group, or
  null); ``input_ids``, the ids of every section's text (``tokenizer(text, add_special_tokens=False)``, exactly what
  the collator tokenized on every pass before), one section after the other; ``section_offsets``, where each
  section starts, then N (S + 1; an empty section has two equal offsets).
* **Key**: the corpus's fingerprint (which covers the labels) and the tokenizer's
  (:func:`~lit_docemb.data.caches.row_cache.corpus_fingerprint`,
  :func:`~lit_docemb.data.caches.row_cache.tokenizer_fingerprint`) and the row layout's version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain

import numpy as np

from lit_docemb.data.caches.row_cache import CachedRows, RowCache, tokenizer_fingerprint
from lit_docemb.data.core.document import Document

CACHE_VERSION = "1"  # bump when the layout of the rows changes


@dataclass
class TokenizedSections:
    """One document's real sections as token ids (a row of the cache). The arrays may be read-only views of the
    memory-mapped file.

    Attributes:
        id: The document id.
        label: Its similarity group (``Document.label``), or None.
        input_ids: (N,) int32 ids of every section, no special tokens, one section after the other.
        section_offsets: (S + 1,) int32 start of each section in ``input_ids``, then N.
    """

    id: str
    label: str | None
    input_ids: np.ndarray
    section_offsets: np.ndarray

    def section_lengths(self) -> list[int]:
        """The S sections' token counts."""
        return np.diff(self.section_offsets).tolist()


def tokenize_sections(documents: Sequence[Document], tokenizer) -> list[TokenizedSections]:
    """Each document's sections tokenized (the rows of :class:`SectionCache`), all sections in one tokenizer call."""
    texts = [section.text for document in documents for section in document.sections]
    # whole sections, cut into chunks later: verbose=False keeps transformers' false "indexing errors" warning away
    encoded = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"] if texts else []
    rows, start = [], 0
    for document in documents:
        own = encoded[start:start + len(document.sections)]
        start += len(document.sections)
        rows.append(TokenizedSections(
            id=document.id, label=document.label,
            input_ids=np.fromiter(chain.from_iterable(own), dtype=np.int32),  # (N,)
            section_offsets=np.asarray([0, *accumulate(map(len, own))], dtype=np.int32)))  # (S + 1,)
    return rows


class CachedSections(CachedRows):
    """The rows of a section cache as :class:`TokenizedSections`, read on access from the memory-mapped table
    (pickles as the table's file paths: :class:`~lit_docemb.data.caches.row_cache.CachedRows`)."""

    _COLUMNS = ("id", "label", "input_ids", "section_offsets")

    def row(self, index: int) -> TokenizedSections:
        return TokenizedSections(id=self._column("id")[index].as_py(), label=self._column("label")[index].as_py(),
                                 input_ids=self._ids_of("input_ids", index),
                                 section_offsets=self._ids_of("section_offsets", index))


class SectionCache(RowCache):
    """Builds or reopens the tokenized sections of a corpus (see the module docstring).

    Args:
        tokenizer: A fast ``transformers`` tokenizer (part of the cache key).
        cache_dir, batch_documents, num_proc: Those of :class:`~lit_docemb.data.caches.row_cache.RowCache`
            (``batch_documents``: documents whose sections are tokenized in one call).
    """

    name = "sections"
    cached = CachedSections

    def __init__(self, tokenizer, cache_dir: str | None = None, batch_documents: int = 64,
                 num_proc: int | None = None) -> None:
        super().__init__(cache_dir, batch_documents, num_proc)
        self.tokenizer = tokenizer

    def key(self, documents: Sequence[Document]) -> dict:
        return {"tokenizer": tokenizer_fingerprint(self.tokenizer), "rows": self.name, "version": CACHE_VERSION}

    @staticmethod
    def features():
        import datasets

        ids = datasets.List(datasets.Value("int32"))
        return datasets.Features({"id": datasets.Value("string"), "label": datasets.Value("string"),
                                  "input_ids": ids, "section_offsets": ids})

    def tokenize(self, documents: Sequence[Document]) -> list[TokenizedSections]:
        """The rows of ``documents``, computed now (no cache): what a collator given documents uses."""
        return tokenize_sections(documents, self.tokenizer)

    @staticmethod
    def table_row(row: TokenizedSections) -> dict:
        return {"id": row.id, "label": row.label, "input_ids": row.input_ids.tolist(),
                "section_offsets": row.section_offsets.tolist()}
