"""Passages split and tokenized once, kept on disk: what hierarchical methods read every epoch after the first.

Graph-RoBERTa encodes a document as ~100-word passages grouped by section, CoLDE as chunks of a section's
tokens; both start from :func:`~lit_docemb.data.core.text.chunk_passages` followed by the tokenizer, which costs
about as much as reading the corpus ten times over (``benchmarks/data_pipeline.py``). :class:`PassageCache`
runs that preprocessing once per (corpus, tokenizer, parameters) into a memory-mapped Arrow table and reopens it on
later runs (:class:`~lit_docemb.data.caches.row_cache.RowCache` writes and reads it):

* **Layout**, one row per document, in the corpus's order: ``id``; ``input_ids``, the token ids of all its
  passages one after the other (``list<int32>``, N ids); ``passage_offsets``, where each passage starts in
  ``input_ids``, then N (``list<int32>``, P + 1 offsets); ``section_index``, the section of each passage
  (``list<int32>``, P); ``headings``, the document's section headings (``list<string>``, one per section), so a
  section graph can be built without the text. A document without text has P = 0.
* **Parameters**: one :class:`~lit_docemb.data.core.passage_spec.PassageSpec`, the method's ``passages`` block: its
  ``words_per_passage``, ``max_passage_tokens`` (``max_length`` below), ``title_passage`` and the larger of
  ``max_passages`` and ``max_passages_inference`` (every stage reads its first passages from the same rows).
* **Key** (the table's fingerprint): the corpus's fingerprint
  (:func:`~lit_docemb.data.caches.row_cache.corpus_fingerprint`: the Arrow table behind a corpus read through
  :func:`~lit_docemb.data.core.reading.cached_documents`, or a hash of every document's content), the tokenizer's
  serialised state (vocabulary, normaliser, pre-tokeniser, special-token template:
  :func:`~lit_docemb.data.caches.row_cache.tokenizer_fingerprint`), ``words_per_passage``, ``max_passages``,
  ``max_length``, ``add_special_tokens`` (always true: special tokens around each passage), ``with_title`` when true,
  and the source of :mod:`lit_docemb.data.core.text` (a change to the splitting rules invalidates every cache).
  Anything else may change without a rebuild.
* **Exactness**: each passage is tokenized exactly as ``tokenizer(passages, truncation=True,
  max_length=max_length)`` tokenizes it; the cache only batches the passages of several documents into one call,
  which leaves every passage's ids unchanged.

Splitting and tokenizing is written once, :func:`tokenize_passages`: the cache stores its output, and a collator
given documents rather than cached rows calls it itself, so both give the same ids.

A method that wants passages instead of documents sets its ``token_cache`` attribute to a :class:`PassageCache`
built with its own tokenizer and passage spec and hands it to
:meth:`DocumentDataModule.connect <lit_docemb.data.core.datamodule.DocumentDataModule.connect>`, which opens it over
the corpus; its collator then receives :class:`TokenizedPassages`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, pairwise
from pathlib import Path
from typing import Any

import numpy as np

from lit_docemb.data.caches.row_cache import CachedRows, RowCache, tokenizer_fingerprint
from lit_docemb.data.core import text
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.core.text import chunk_passages

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

    def passage_ids(self) -> list[list[int]]:
        """The P passages' token ids as lists, as the tokenizer returns them."""
        return [self.passage(index).tolist() for index in range(len(self))]


def tokenize_passages(documents: Sequence[Document], tokenizer, passages: PassageSpec,
                      max_passages: int) -> list[TokenizedPassages]:
    """Each document split into passages as ``passages`` says (:func:`~lit_docemb.data.core.text.chunk_passages`:
    its ``words_per_passage``, its ``title_passage``) and tokenized, each passage truncated to its
    ``max_passage_tokens`` with the tokenizer's special tokens around it; the passages of all documents in one
    tokenizer call (which leaves every passage's ids as a call of its own gives).

    Args:
        documents: The documents, in the order of the result.
        tokenizer: A ``transformers`` tokenizer.
        passages: How a document becomes passages.
        max_passages: Keep only a document's first this many passages (the spec's ``max_passages`` in training,
            ``max_passages_inference`` when embedding, the larger in the cache).

    Returns:
        One :class:`TokenizedPassages` per document (P = 0 for a document without text).
    """
    splits = [chunk_passages(document, passages.words_per_passage, max_passages, passages.title_passage)
              for document in documents]
    flat = [passage.text for passage in chain.from_iterable(splits)]
    encoded = tokenizer(flat, truncation=True, max_length=passages.max_passage_tokens)["input_ids"] if flat else []
    bounds = [0, *accumulate(map(len, splits))]
    return [TokenizedPassages(
        id=document.id,
        input_ids=np.fromiter(chain.from_iterable(encoded[start:stop]), dtype=np.int32),  # (N,)
        passage_offsets=np.asarray([0, *accumulate(map(len, encoded[start:stop]))], dtype=np.int32),  # (P + 1,)
        section_index=np.asarray([passage.section_index for passage in split], dtype=np.int32),  # (P,)
        headings=[section.heading for section in document.sections],
    ) for document, split, (start, stop) in zip(documents, splits, pairwise(bounds), strict=True)]


class CachedPassages(CachedRows):
    """The rows of a passage cache as :class:`TokenizedPassages`, read on access from the memory-mapped table
    (pickles as the table's file paths: :class:`~lit_docemb.data.caches.row_cache.CachedRows`)."""

    _COLUMNS = ("id", "input_ids", "passage_offsets", "section_index", "headings")

    def row(self, index: int) -> TokenizedPassages:
        return TokenizedPassages(
            id=self._column("id")[index].as_py(),
            input_ids=self._ids_of("input_ids", index),
            passage_offsets=self._ids_of("passage_offsets", index),
            section_index=self._ids_of("section_index", index),
            headings=self._column("headings")[index].as_py(),
        )


class PassageCache(RowCache):
    """Builds or reopens the split-and-tokenized passages of a corpus (see the module docstring).

    Args:
        tokenizer: A fast ``transformers`` tokenizer (part of the cache key).
        passages: How a document becomes passages (:class:`~lit_docemb.data.core.passage_spec.PassageSpec`); rows
            hold its :attr:`~lit_docemb.data.core.passage_spec.PassageSpec.most_passages` first passages.
        cache_dir, batch_documents, num_proc: Those of :class:`~lit_docemb.data.caches.row_cache.RowCache`
            (``batch_documents``: documents whose passages are tokenized in one call).
    """

    name = "passage"
    cached = CachedPassages

    def __init__(self, tokenizer, passages: PassageSpec, cache_dir: str | None = None, batch_documents: int = 64,
                 num_proc: int | None = None) -> None:
        super().__init__(cache_dir, batch_documents, num_proc)
        self.tokenizer = tokenizer
        self.passages = PassageSpec.of(passages)

    def key(self, documents: Sequence[Document]) -> dict[str, Any]:
        # the names and values of the keys before the passage spec, so that those caches are still found
        return {
            "tokenizer": tokenizer_fingerprint(self.tokenizer),
            "words_per_passage": self.passages.words_per_passage, "max_passages": self.passages.most_passages,
            "max_length": self.passages.max_passage_tokens, "add_special_tokens": True,
            "splitter": hashlib.blake2b(Path(text.__file__).read_bytes(), digest_size=16).hexdigest(),
            "version": CACHE_VERSION,
            **({"with_title": True} if self.passages.title_passage else {}),  # absent when off: earlier caches valid
        }

    @staticmethod
    def features():
        import datasets

        ids = datasets.List(datasets.Value("int32"))
        return datasets.Features({"id": datasets.Value("string"), "input_ids": ids, "passage_offsets": ids,
                                  "section_index": ids, "headings": datasets.List(datasets.Value("string"))})

    def tokenize(self, documents: Sequence[Document]) -> list[TokenizedPassages]:
        """The rows of ``documents``, computed now (no cache): what a collator given documents uses."""
        return tokenize_passages(documents, self.tokenizer, self.passages, self.passages.most_passages)

    @staticmethod
    def table_row(row: TokenizedPassages) -> dict[str, Any]:
        return {"id": row.id, "input_ids": row.input_ids.tolist(), "passage_offsets": row.passage_offsets.tolist(),
                "section_index": row.section_index.tolist(), "headings": row.headings}
