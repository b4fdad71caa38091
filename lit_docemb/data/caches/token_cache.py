"""The protocol every token cache satisfies: what code holding "the method's cache" may rely on.

A method that reads token ids rather than text holds one cache of :mod:`lit_docemb.data.caches`: Graph-RoBERTa a
:class:`~lit_docemb.data.caches.passage_cache.PassageCache`, DocSplit a
:class:`~lit_docemb.data.caches.sentence_cache.SentenceCache`, CoLDE a
:class:`~lit_docemb.data.caches.section_cache.SectionCache`, CTPE and DECA a
:class:`~lit_docemb.data.caches.field_cache.FieldTokenCache`. Their rows differ; what they share, and all that the
DataModule (:meth:`~lit_docemb.data.core.datamodule.DocumentDataModule.connect`) and the method base class use, is
:class:`TokenCache`. All four implement it through :class:`~lit_docemb.data.caches.row_cache.RowCache`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lit_docemb.data.core.document import Document

if TYPE_CHECKING:
    from lit_docemb.data.caches.row_cache import CachedRows


@runtime_checkable
class TokenCache(Protocol):
    """A corpus tokenized once per (corpus, tokenizer, parameters), kept on disk, one row per document."""

    def fingerprint(self, documents: Sequence[Document]) -> str:
        """The cache key of ``documents``: equal keys, equal rows."""
        ...

    def open(self, documents: Sequence[Document]) -> CachedRows:
        """The rows of ``documents`` (same order): read from disk when a cache under their fingerprint exists,
        tokenized and written now otherwise."""
        ...

    def tokenize(self, documents: Sequence[Document]) -> list:
        """The rows of ``documents``, computed now (no cache), equal to those ``open`` gives: what a collator
        handed documents rather than rows uses."""
        ...
