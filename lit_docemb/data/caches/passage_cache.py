"""Passages split and tokenized once, kept on disk: what hierarchical methods read every epoch after the first.

Graph-RoBERTa encodes a document as ~100-word passages grouped by section, CoLDE as chunks of a section's
tokens; both start from :func:`~lit_docemb.data.core.text.chunk_passages` followed by the tokenizer, which costs
about as much as reading the corpus ten times over (``benchmarks/data_pipeline.py``). :class:`PassageCache`
runs that preprocessing once per (corpus, tokenizer, parameters) into a memory-mapped Arrow table
(``datasets.Dataset.from_generator``) and reopens it on later runs:

* **Layout**, one row per document, in the corpus's order: ``id``; ``input_ids``, the token ids of all its
  passages one after the other (``list<int32>``, N ids); ``passage_offsets``, where each passage starts in
  ``input_ids``, then N (``list<int32>``, P + 1 offsets); ``section_index``, the section of each passage
  (``list<int32>``, P); ``headings``, the document's section headings (``list<string>``, one per section), so a
  section graph can be built without the text. A document without text has P = 0.
* **Key** (the table's fingerprint): the corpus's fingerprint (:func:`corpus_fingerprint`: the Arrow table
  behind a corpus read through :func:`~lit_docemb.data.core.reading.cached_documents`, or a hash of every document's
  content), the tokenizer's serialised state (vocabulary, normaliser, pre-tokeniser, special-token template:
  :func:`tokenizer_fingerprint`), ``words_per_passage``, ``max_passages``, ``max_length``,
  ``add_special_tokens``, and the source of :mod:`lit_docemb.data.core.text` (a change to the splitting rules
  invalidates every cache). Anything else may change without a rebuild.
* **Exactness**: each passage is tokenized exactly as ``tokenizer(passages, truncation=max_length is not None,
  max_length=max_length, add_special_tokens=add_special_tokens)`` tokenizes it; the cache only batches the
  passages of several documents into one call, which leaves every passage's ids unchanged.

Splitting and tokenizing is written once, :func:`tokenize_passages`: the cache stores its output, and a collator
given documents rather than cached rows calls it itself, so both give the same ids.

A method that wants passages instead of documents sets a ``passage_cache`` attribute (a :class:`PassageCache`
built with its own tokenizer) and hands it to
:meth:`DocumentDataModule.connect <lit_docemb.data.core.datamodule.DocumentDataModule.connect>`, which opens it over
the corpus; its collator then receives :class:`TokenizedPassages`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, pairwise
from pathlib import Path
from typing import Any

import numpy as np

from lit_docemb.data.core import text
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.reading import table_from_generator
from lit_docemb.data.core.text import chunk_passages

log = logging.getLogger(__name__)

CACHE_VERSION = "1"  # bump when the layout of the rows changes


@dataclass
class TokenizedPassages:
    """One document's passages as token ids (a row of the cache). The arrays are read-only views of the
    memory-mapped file: copy them (``torch.tensor``, ``np.array``) before writing into them.

    Attributes:
        id: The document id.
        input_ids: (N,) int32 token ids of all passages, one after the other.
        passage_offsets: (P + 1,) int32 start of each passage in ``input_ids``, then N.
        section_index: (P,) int32 section of each passage, an index into ``headings``.
        headings: The document's section headings, one per section ("" for the lead or an untitled section).
    """

    id: str
    input_ids: np.ndarray
    passage_offsets: np.ndarray
    section_index: np.ndarray
    headings: list[str]

    def __len__(self) -> int:
        """P, the number of passages."""
        return len(self.section_index)

    def passage(self, index: int) -> np.ndarray:
        """(T,) the token ids of passage ``index`` (a view, no copy)."""
        return self.input_ids[self.passage_offsets[index] : self.passage_offsets[index + 1]]

    def section_ids(self, section: int) -> np.ndarray:
        """(T,) the ids of the passages of section ``section`` one after the other (a view; empty when it has no
        passage). Built with ``add_special_tokens=False`` and no ``max_length``, these are the section's tokens
        (its passages tokenized one by one) to cut into CoLDE's windows with
        :func:`~lit_docemb.data.core.text.token_windows`."""
        passages = np.flatnonzero(self.section_index == section)  # contiguous: passages follow the sections
        if not len(passages):
            return self.input_ids[:0]
        return self.input_ids[self.passage_offsets[passages[0]] : self.passage_offsets[passages[-1] + 1]]

    def passage_ids(self) -> list[list[int]]:
        """The P passages' token ids as lists, as the tokenizer returns them."""
        return [self.passage(index).tolist() for index in range(len(self))]


def tokenize_passages(documents: Sequence[Document], tokenizer, words_per_passage: int,
                      max_passages: int | None = None, max_length: int | None = 512,
                      add_special_tokens: bool = True, with_title: bool = False) -> list[TokenizedPassages]:
    """Each document split into passages (:func:`~lit_docemb.data.core.text.chunk_passages`) and tokenized, the
    passages of all documents in one tokenizer call (which leaves every passage's ids as a call of its own gives).

    Args:
        documents: The documents, in the order of the result.
        tokenizer: A ``transformers`` tokenizer.
        words_per_passage: Word budget of a passage.
        max_passages: Keep only a document's first this many passages (None: all).
        max_length: Truncate each passage to this many tokens, special tokens included (None: no truncation).
        add_special_tokens: Add the tokenizer's special tokens around each passage.
        with_title: Each document's title is its first passage (:func:`~lit_docemb.data.core.text.chunk_passages`).

    Returns:
        One :class:`TokenizedPassages` per document (P = 0 for a document without text).
    """
    splits = [chunk_passages(document, words_per_passage, max_passages, with_title) for document in documents]
    flat = [passage.text for passage in chain.from_iterable(splits)]
    encoded = tokenizer(flat, truncation=max_length is not None, max_length=max_length,
                        add_special_tokens=add_special_tokens)["input_ids"] if flat else []
    bounds = [0, *accumulate(map(len, splits))]
    return [TokenizedPassages(
        id=document.id,
        input_ids=np.fromiter(chain.from_iterable(encoded[start:stop]), dtype=np.int32),  # (N,)
        passage_offsets=np.asarray([0, *accumulate(map(len, encoded[start:stop]))], dtype=np.int32),  # (P + 1,)
        section_index=np.asarray([passage.section_index for passage in split], dtype=np.int32),  # (P,)
        headings=[section.heading for section in document.sections],
    ) for document, split, (start, stop) in zip(documents, splits, pairwise(bounds), strict=True)]


class CachedPassages(Sequence):
    """The rows of a passage cache as :class:`TokenizedPassages`, read on access from the memory-mapped table.

    Pickles as the table's file paths (cheap to send to dataloader workers); each process opens its own
    column views on first access.

    Args:
        table: The ``datasets.Dataset`` written by :class:`PassageCache`.
        fingerprint: The cache key it was written under.
    """

    _COLUMNS = ("id", "input_ids", "passage_offsets", "section_index", "headings")

    def __init__(self, table, fingerprint: str) -> None:
        self.table = table
        self.fingerprint = fingerprint
        self._columns: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_columns": None}

    def __len__(self) -> int:
        return len(self.table)

    def _column(self, name: str):
        if self._columns is None:
            data = self.table.data  # the memory-mapped pyarrow table
            self._columns = {column: data.column(column) for column in self._COLUMNS}
        return self._columns[name]

    def _ids_of(self, name: str, index: int) -> np.ndarray:
        return self._column(name)[index].values.to_numpy(zero_copy_only=False)

    def __getitem__(self, index: int) -> TokenizedPassages:
        if not -len(self) <= index < len(self):
            raise IndexError(f"passage cache index {index} out of range for {len(self)} documents")
        index = int(index) % len(self)
        return TokenizedPassages(
            id=self._column("id")[index].as_py(),
            input_ids=self._ids_of("input_ids", index),
            passage_offsets=self._ids_of("passage_offsets", index),
            section_index=self._ids_of("section_index", index),
            headings=self._column("headings")[index].as_py(),
        )

    def __iter__(self) -> Iterator[TokenizedPassages]:
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
        raise TypeError(f"the passage cache needs a fast (Rust-backed) tokenizer, got {type(tokenizer).__name__}: "
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


def _features():
    import datasets

    ids = datasets.List(datasets.Value("int32"))
    return datasets.Features({"id": datasets.Value("string"), "input_ids": ids, "passage_offsets": ids,
                              "section_index": ids, "headings": datasets.List(datasets.Value("string"))})


class PassageCache:
    """Builds or reopens the split-and-tokenized passages of a corpus (see the module docstring).

    Args:
        tokenizer: A fast ``transformers`` tokenizer (part of the cache key).
        words_per_passage: Word budget of a passage (:func:`~lit_docemb.data.core.text.chunk_passages`).
        max_passages: Keep only a document's first this many passages (None: all).
        max_length: Truncate each passage to this many tokens, special tokens included (None: no truncation).
        add_special_tokens: Add the tokenizer's special tokens around each passage (``[CLS] ... [SEP]``);
            ``False`` gives bare ids, e.g. to cut a section's tokens into windows.
        cache_dir: Folder of the ``datasets`` cache; None uses its default.
        batch_documents: Documents whose passages are tokenized in one tokenizer call while building.
        with_title: Each document's title is its first passage (:func:`~lit_docemb.data.core.text.chunk_passages`).
        num_proc: Processes building the cache, each over a contiguous range of the corpus (None: one). Each
            receives the corpus pickled: memory-mapped file paths for a corpus read through ``datasets``, every
            document for an in-memory list.
    """

    def __init__(self, tokenizer, words_per_passage: int = 100, max_passages: int | None = None,
                 max_length: int | None = 512, add_special_tokens: bool = True, cache_dir: str | None = None,
                 batch_documents: int = 64, num_proc: int | None = None, with_title: bool = False) -> None:
        if words_per_passage < 1 or batch_documents < 1 or (max_length is not None and max_length < 1):
            raise ValueError(f"need words_per_passage, batch_documents and max_length >= 1, got "
                             f"{words_per_passage=}, {batch_documents=}, {max_length=}")
        self.tokenizer = tokenizer
        self.words_per_passage = words_per_passage
        self.max_passages = max_passages
        self.max_length = max_length
        self.add_special_tokens = add_special_tokens
        self.cache_dir = cache_dir
        self.batch_documents = batch_documents
        self.num_proc = num_proc
        self.with_title = with_title

    def fingerprint(self, documents: Sequence[Document]) -> str:
        """The cache key of ``documents`` under this tokenizer and these parameters."""
        key = json.dumps({
            "corpus": corpus_fingerprint(documents),
            "tokenizer": tokenizer_fingerprint(self.tokenizer),
            "words_per_passage": self.words_per_passage, "max_passages": self.max_passages,
            "max_length": self.max_length, "add_special_tokens": self.add_special_tokens,
            "splitter": hashlib.blake2b(Path(text.__file__).read_bytes(), digest_size=16).hexdigest(),
            "version": CACHE_VERSION,
            **({"with_title": True} if self.with_title else {}),  # absent when off: earlier caches stay valid
        }, sort_keys=True)
        return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()

    def tokenize(self, documents: Sequence[Document]) -> list[list[list[int]]]:
        """Each document's passages' token ids, computed now (no cache)."""
        return [passages.passage_ids() for passages in self._tokenize(documents)]

    def _tokenize(self, documents: Sequence[Document]) -> list[TokenizedPassages]:
        return tokenize_passages(documents, self.tokenizer, self.words_per_passage, self.max_passages,
                                 self.max_length, self.add_special_tokens, self.with_title)

    def open(self, documents: Sequence[Document]) -> CachedPassages:
        """The passages of ``documents`` (same order), tokenized now if no cache matches, read from disk otherwise."""
        fingerprint = self.fingerprint(documents)
        table = open_rows_table(self, documents, _features(), fingerprint, self.cache_dir, self.num_proc)
        log.info("passage cache %s: %d documents", fingerprint, len(table))
        return CachedPassages(table, fingerprint)

    def rows(self, documents: Sequence[Document], start: int, stop: int) -> Iterator[dict[str, Any]]:
        """The cache rows of ``documents[start:stop]``, ``batch_documents`` at a time."""
        for first in range(start, stop, self.batch_documents):
            batch = [documents[index] for index in range(first, min(first + self.batch_documents, stop))]
            for passages in self._tokenize(batch):
                yield {"id": passages.id, "input_ids": passages.input_ids.tolist(),
                       "passage_offsets": passages.passage_offsets.tolist(),
                       "section_index": passages.section_index.tolist(), "headings": passages.headings}


def open_rows_table(cache, documents: Sequence[Document], features, fingerprint: str, cache_dir: str | None,
                    num_proc: int | None):
    """The memory-mapped ``datasets`` table of ``cache.rows(documents, start, stop)`` under ``fingerprint``: written
    now (by ``num_proc`` processes, each over a contiguous range of the corpus) unless a table with that fingerprint
    exists in ``cache_dir``. Shared by the token caches of the methods (passages, sentences, sections).

    Args:
        cache: An object with a ``rows(documents, start, stop)`` method yielding one dict per document.
        documents: The corpus.
        features: The table's ``datasets.Features``.
        fingerprint: The cache key.
        cache_dir: Folder of the ``datasets`` cache; None uses its default.
        num_proc: Processes writing the table (None: one).
    """
    num_proc = min(num_proc or 1, max(len(documents), 1))
    bounds = [len(documents) * i // num_proc for i in range(num_proc + 1)]
    return table_from_generator(
        _cache_rows, features=features, cache_dir=cache_dir, fingerprint=fingerprint,
        gen_kwargs={"shards": list(pairwise(bounds)), "job": {"cache": cache, "documents": documents}},
        num_proc=num_proc if num_proc > 1 else None,
    )


class RowCache:
    """What the token caches of DocSplit and CoLDE share (:mod:`~lit_docemb.data.caches.sentence_cache`,
    :mod:`~lit_docemb.data.caches.section_cache`): their building arguments, opening their table and writing its rows. A
    subclass calls this ``__init__`` and defines ``name``, ``cached`` (its :class:`CachedPassages` subclass),
    ``features()``, ``key(documents)`` (what its fingerprint hashes), ``tokenize(documents)`` and ``table_row(row)``.

    Args:
        tokenizer: A fast ``transformers`` tokenizer (part of the cache key).
        cache_dir: Folder of the ``datasets`` cache; None uses its default.
        batch_documents: Documents tokenized in one tokenizer call while building.
        num_proc: Processes building the cache, each over a contiguous range of the corpus (None: one).
    """

    name = "token"
    cached = CachedPassages

    def __init__(self, tokenizer, cache_dir: str | None = None, batch_documents: int = 64,
                 num_proc: int | None = None) -> None:
        if batch_documents < 1:
            raise ValueError(f"need batch_documents >= 1, got {batch_documents}")
        self.tokenizer = tokenizer
        self.cache_dir = cache_dir
        self.batch_documents = batch_documents
        self.num_proc = num_proc

    def fingerprint(self, documents: Sequence[Document]) -> str:
        """The cache key of ``documents`` under this tokenizer and these parameters."""
        key = json.dumps({"corpus": corpus_fingerprint(documents), "tokenizer": tokenizer_fingerprint(self.tokenizer),
                          "rows": self.name, **self.key(documents)}, sort_keys=True)
        return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()

    def open(self, documents: Sequence[Document]):
        """The rows of ``documents`` (same order), tokenized now if no cache matches, read from disk otherwise."""
        fingerprint = self.fingerprint(documents)
        table = open_rows_table(self, documents, self.features(), fingerprint, self.cache_dir, self.num_proc)
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
