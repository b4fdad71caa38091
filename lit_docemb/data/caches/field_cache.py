"""Token ids of each document's fields, computed once per corpus × tokenizer and kept in a memory-mapped Arrow
table: what a method that cuts its views from ids (CTPE's former and latter parts) reads every pass instead of
tokenising the text again.

A method supplies the encoding, a picklable callable ``document → [(label, ids), ...]`` (CTPE: each field's
lower-cased heading and its ids), and the key that names it (:meth:`FieldEncoding.key`: the tokenizer's state and
the rules of the encoding). :class:`FieldTokenCache` runs it once per (corpus, key) and reopens the table on later
runs (:class:`~lit_docemb.data.caches.row_cache.RowCache` writes and reads it, as for the other token caches):

* **Layout**, one row per document in the corpus's order: ``id``; ``labels`` (F strings); ``input_ids``, the ids of
  every field one after the other (``list<int32>``, N ids); ``field_offsets``, where each field starts, then N
  (``list<int32>``, F + 1).
* **Key**: :func:`~lit_docemb.data.caches.row_cache.corpus_fingerprint` of the corpus, the encoding's key and
  :data:`CACHE_VERSION`.

A method opens its cache over its DataModule's corpus in ``setup`` and hands its collators the rows by document id
(:class:`FieldRows`); the datasets keep serving documents, so everything else that reads them (evaluation, labels)
is unchanged, and a document the cache does not hold (another split's, a query) is encoded from its text. A row
gives the same ids as encoding the document (tested per method).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, pairwise
from typing import Any, Protocol

import numpy as np

from lit_docemb.data.caches.row_cache import CachedRows, RowCache
from lit_docemb.data.core.document import Document

CACHE_VERSION = "1"  # bump when the layout of the rows changes


class FieldEncoding(Protocol):
    """Document → its fields as (label, token ids), picklable; ``key()`` names what decides the ids."""

    def __call__(self, document: Document) -> list[tuple[str, list[int]]]: ...

    def key(self) -> str: ...


@dataclass
class TokenizedFields:
    """One document's fields as token ids (a row of the cache, or computed now by :func:`tokenize_fields`).

    Attributes:
        id: The document id.
        labels: The F fields' labels.
        input_ids: (N,) int32 ids of every field, one after the other (read-only when memory-mapped).
        field_offsets: (F + 1,) int32 start of each field in ``input_ids``, then N.
    """

    id: str
    labels: list[str]
    input_ids: np.ndarray
    field_offsets: np.ndarray

    def fields(self) -> list[tuple[str, np.ndarray]]:
        """(label, (T,) ids) of each field, the ids views into ``input_ids``."""
        return [(label, self.input_ids[start:stop])
                for label, (start, stop) in zip(self.labels, pairwise(self.field_offsets.tolist()), strict=True)]


def tokenize_fields(document: Document, encoding: FieldEncoding) -> TokenizedFields:
    """The document's :class:`TokenizedFields` under ``encoding``, computed now (what the cache stores)."""
    fields = encoding(document)
    return TokenizedFields(
        id=document.id, labels=[label for label, _ in fields],
        input_ids=np.fromiter(chain.from_iterable(ids for _, ids in fields), dtype=np.int32),  # (N,)
        field_offsets=np.asarray([0, *accumulate(len(ids) for _, ids in fields)], dtype=np.int32))  # (F + 1,)


class CachedFields(CachedRows):
    """The rows of a field cache as :class:`TokenizedFields`, read on access from the memory-mapped table; pickles
    as the table's file paths (each dataloader worker opens its own column views).

    Args:
        table: The ``datasets.Dataset`` written by :class:`FieldTokenCache`.
        fingerprint: The cache key it was written under.
    """

    _COLUMNS = ("id", "labels", "input_ids", "field_offsets")

    def row(self, index: int) -> TokenizedFields:
        return TokenizedFields(self._column("id")[index].as_py(), self._column("labels")[index].as_py(),
                               self._ids_of("input_ids", index), self._ids_of("field_offsets", index))

    def input_ids(self, index: int) -> np.ndarray:
        """The ``input_ids`` of row ``index`` alone, without building the row."""
        return self._ids_of("input_ids", index)


class FieldTokenCache(RowCache):
    """Builds or reopens the tokenized fields of a corpus (see the module docstring).

    Args:
        encoding: Document → [(label, ids), ...], picklable, with a ``key()``.
        cache_dir, batch_documents, num_proc: Those of :class:`~lit_docemb.data.caches.row_cache.RowCache`
            (the encoding takes one document at a time: ``batch_documents`` only sizes the writer's steps).
    """

    name = "field"
    cached = CachedFields

    def __init__(self, encoding: FieldEncoding, cache_dir: str | None = None, batch_documents: int = 64,
                 num_proc: int | None = None) -> None:
        super().__init__(cache_dir, batch_documents, num_proc)
        self.encoding = encoding

    def key(self, documents: Sequence[Document]) -> dict[str, Any]:
        return {"encoding": self.encoding.key(), "version": CACHE_VERSION}

    @staticmethod
    def features():
        import datasets

        ids = datasets.List(datasets.Value("int32"))
        return datasets.Features({"id": datasets.Value("string"), "labels": datasets.List(datasets.Value("string")),
                                  "input_ids": ids, "field_offsets": ids})

    def tokenize(self, documents: Sequence[Document]) -> list[TokenizedFields]:
        """The rows of ``documents``, computed now (no cache)."""
        return [tokenize_fields(document, self.encoding) for document in documents]

    @staticmethod
    def table_row(row: TokenizedFields) -> dict[str, Any]:
        return {"id": row.id, "labels": row.labels, "input_ids": row.input_ids.tolist(),
                "field_offsets": row.field_offsets.tolist()}


class FieldRows:
    """The rows of a field cache by document id, for collators that receive documents: ``get(id)`` is the row of
    that id, or ``None`` for a document the cache does not hold. Pickles as the cache's file paths; each process
    builds its own id → row index (one dictionary entry per document) on first use.

    Args:
        rows: The opened cache (:meth:`FieldTokenCache.open`) over a corpus whose ids are unique.
    """

    def __init__(self, rows: CachedFields) -> None:
        self.rows = rows
        self._index: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_index": None}

    def get(self, document_id: str) -> TokenizedFields | None:
        row = self._row_of(document_id)
        return None if row is None else self.rows[row]

    def input_ids(self, document_id: str) -> np.ndarray | None:
        """The ``input_ids`` of that id's row alone (a view of the mapped table), or ``None``."""
        row = self._row_of(document_id)
        return None if row is None else self.rows.input_ids(row)

    def _row_of(self, document_id: str) -> int | None:
        if self._index is None:
            self._index = {doc_id: row for row, doc_id in enumerate(self.rows.ids)}
        return self._index.get(document_id)
