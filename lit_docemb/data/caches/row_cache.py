"""What the four token caches share: keying a corpus, writing one Arrow row per document and reading the rows back.

A method tokenizes its corpus once per (corpus, tokenizer, parameters) into a memory-mapped Arrow table
(``datasets.Dataset.from_generator``) and reopens it on later runs. :class:`RowCache` does the writing and the
reopening for every cache (:mod:`~lit_docemb.data.caches.passage_cache`, :mod:`~lit_docemb.data.caches.sentence_cache`,
:mod:`~lit_docemb.data.caches.section_cache`, :mod:`~lit_docemb.data.caches.field_cache`); a subclass gives only what
its rows are: ``key(documents)`` (what its fingerprint hashes besides the corpus), ``features()`` (the table's
columns), ``tokenize(documents)`` (the rows, computed now) and ``table_row(row)`` (a row as the table stores it), and
its :class:`CachedRows` subclass reads them back.

* **Fingerprint**: a hash of :func:`corpus_fingerprint` and the subclass's ``key``; a table written under it in
  ``cache_dir`` is reopened, otherwise it is written, by ``num_proc`` processes each over a contiguous range of the
  corpus.
* **Reading**: :class:`CachedRows` pickles as the table's file paths (cheap to send to dataloader workers); each
  process opens its own column views on first access.
"""

from __future__ import annotations

import hashlib
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from lit_docemb.data.core.document import Document
from lit_docemb.data.core.reading import table_from_generator

log = logging.getLogger(__name__)


class CachedRows(Sequence):
    """The rows of a token cache, read on access from the memory-mapped table. A subclass names its ``_COLUMNS``
    and builds one row from them in ``row(index)``.

    Args:
        table: The ``datasets.Dataset`` written by a :class:`RowCache`.
        fingerprint: The cache key it was written under.
    """

    _COLUMNS: tuple[str, ...] = ("id",)

    def __init__(self, table, fingerprint: str) -> None:
        self.table = table
        self.fingerprint = fingerprint
        self._columns: dict[str, Any] | None = None
        self._views: dict[str, tuple] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_columns": None, "_views": {}}

    def __len__(self) -> int:
        return len(self.table)

    def _column(self, name: str):
        if self._columns is None:
            data = self.table.data  # the memory-mapped pyarrow table
            self._columns = {column: data.column(column) for column in self._COLUMNS}
        return self._columns[name]

    def _ids_of(self, name: str, index: int) -> np.ndarray:
        """Row ``index`` of the list column ``name``: a numpy view of the memory-mapped values (one dictionary
        lookup and a slice, where reading the row through pyarrow cost a scalar per access, 2 of DECA's 35 CPU
        seconds on MR)."""
        starts, chunks = self._lists(name)
        chunk = int(np.searchsorted(starts, index, side="right")) - 1
        offsets, values = chunks[chunk]
        row = index - starts[chunk]
        return values[offsets[row]:offsets[row + 1]]

    def _lists(self, name: str) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """The list column ``name`` as, per Arrow chunk, its offsets and its values (numpy views of the mapped
        buffers, made once per process), and the first row of each chunk."""
        if name not in self._views:
            column = self._column(name)
            starts = np.cumsum([0] + [len(chunk) for chunk in column.chunks])[:-1]
            self._views[name] = starts, [(chunk.offsets.to_numpy(), chunk.values.to_numpy()) for chunk in column.chunks]
        return self._views[name]

    @abstractmethod
    def row(self, index: int):
        """The row at ``index`` (``0 <= index < len(self)``)."""

    def __getitem__(self, index: int):
        if not -len(self) <= index < len(self):
            raise IndexError(f"cache index {index} out of range for {len(self)} documents")
        return self.row(int(index) % len(self))

    def __iter__(self) -> Iterator:
        return (self[index] for index in range(len(self)))

    @property
    def ids(self) -> list[str]:
        """The document ids, read through Arrow."""
        return self._column("id").to_pylist()


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of what decides a fast tokenizer's ids: its class and its serialised Rust tokenizer (vocabulary,
    normaliser, pre-tokeniser, model, post-processor, added tokens), without the truncation and padding state
    that ``transformers`` rewrites on every call."""
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(f"a token cache needs a fast (Rust-backed) tokenizer, got {type(tokenizer).__name__}: "
                        "its serialised state is the cache key")
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    state["truncation"] = state["padding"] = None
    # Not sort_keys: the Rust serialisation has a fixed order (vocabulary by id), and sorting 30k-entry
    # vocabularies would double the cost of the key (figures: docs/performance.md).
    key = f"{type(tokenizer).__name__}\n{json.dumps(state)}"
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """The corpus's own ``fingerprint`` when it has one (a corpus backed by a ``datasets`` table), else a hash of
    every document's content (this reads the whole corpus: fine for in-memory lists)."""
    fingerprint = getattr(documents, "fingerprint", None)
    if fingerprint is not None:
        return str(fingerprint)
    hasher = hashlib.blake2b(digest_size=16)
    for document in documents:
        hasher.update(document.to_json().encode())
        hasher.update(b"\n")
    return hasher.hexdigest()


class RowCache(ABC):
    """Builds or reopens a token cache's table (see the module docstring); the one base of the four caches, each a
    :class:`~lit_docemb.data.caches.token_cache.TokenCache`. A subclass calls this ``__init__`` and defines ``name``,
    ``cached`` (its :class:`CachedRows` subclass), ``key``, ``features``, ``tokenize`` and ``table_row``.

    Args:
        cache_dir: Folder of the ``datasets`` cache; None uses its default.
        batch_documents: Documents tokenized in one call while building.
        num_proc: Processes building the cache, each over a contiguous range of the corpus (None: one). Each
            receives the corpus pickled: memory-mapped file paths for a corpus read through ``datasets``, every
            document for an in-memory list.
    """

    name: str  # for the log: "<name> cache <fingerprint>: <n> documents"
    cached: type[CachedRows]

    def __init__(self, cache_dir: str | None = None, batch_documents: int = 64, num_proc: int | None = None) -> None:
        if batch_documents < 1:
            raise ValueError(f"need batch_documents >= 1, got {batch_documents}")
        self.cache_dir = cache_dir
        self.batch_documents = batch_documents
        self.num_proc = num_proc

    @abstractmethod
    def key(self, documents: Sequence[Document]) -> dict[str, Any]:
        """What the fingerprint hashes besides the corpus: every argument that changes the rows."""

    @abstractmethod
    def features(self):
        """The table's ``datasets.Features``."""

    @abstractmethod
    def tokenize(self, documents: Sequence[Document]) -> list:
        """The rows of ``documents``, computed now (no cache): what a collator given documents uses."""

    @abstractmethod
    def table_row(self, row) -> dict[str, Any]:
        """``row`` as the table stores it (lists, not arrays)."""

    def fingerprint(self, documents: Sequence[Document]) -> str:
        """The cache key of ``documents`` under these parameters."""
        key = json.dumps({"corpus": corpus_fingerprint(documents), **self.key(documents)}, sort_keys=True)
        return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()

    def open(self, documents: Sequence[Document]) -> CachedRows:
        """The rows of ``documents`` (same order), tokenized now if no cache matches, read from disk otherwise."""
        fingerprint = self.fingerprint(documents)
        num_proc = min(self.num_proc or 1, max(len(documents), 1))
        bounds = [len(documents) * i // num_proc for i in range(num_proc + 1)]
        table = table_from_generator(
            _cache_rows, features=self.features(), cache_dir=self.cache_dir, fingerprint=fingerprint,
            gen_kwargs={"shards": list(pairwise(bounds)), "job": {"cache": self, "documents": documents}},
            num_proc=num_proc if num_proc > 1 else None,
        )
        log.info("%s cache %s: %d documents", self.name, fingerprint, len(table))
        return self.cached(table, fingerprint)

    def rows(self, documents: Sequence[Document], start: int, stop: int) -> Iterator[dict[str, Any]]:
        """The table rows of ``documents[start:stop]``, tokenized ``batch_documents`` at a time."""
        for first in range(start, stop, self.batch_documents):
            batch = [documents[index] for index in range(first, min(first + self.batch_documents, stop))]
            yield from map(self.table_row, self.tokenize(batch))


def _cache_rows(shards: list[tuple[int, int]], job: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``datasets`` generator: the rows of each (start, stop) range of the corpus. It calls this once per element of
    the only list argument, ``shards``; the corpus and the cache travel in the ``job`` dict, never split."""
    for start, stop in shards:
        yield from job["cache"].rows(job["documents"], start, stop)
