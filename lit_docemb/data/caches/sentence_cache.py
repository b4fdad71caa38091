"""DocSplit's sentences split and tokenized once, kept on disk: its views are then assembled from token ids.

DocSplit (seed paper 001) assigns each sentence of a document to one of two views at random on every pass. Splitting
the sentences and tokenizing the views cost far more than drawing the assignment, and give the same ids on every
pass, so :class:`SentenceCache` runs them once per (corpus, tokenizer, parameters) into a memory-mapped Arrow table,
as :class:`~lit_docemb.data.caches.passage_cache.PassageCache` does for Graph-RoBERTa's passages, and a pass only draws the
assignment and copies id ranges (:mod:`lit_docemb.views.docsplit`).

* **Sentences**: those of :func:`document_sentences`: :func:`~lit_docemb.data.core.text.split_sentences` over each
  section cut at ``max_section_chars`` characters; a document with a single sentence has its two word halves
  instead (``halves``: one to each view, not drawn); a document with fewer than two words has none.
* **Layout**, one row per document, in the corpus's order: ``id``; ``input_ids``, each sentence's ids as it is
  tokenized after a space (``tokenizer(" " + sentence, add_special_tokens=False)``), one after the other;
  ``sentence_offsets``, where each sentence starts, then N (S + 1); ``lead_ids``/``lead_offsets``/
  ``lead_replaces``: the ids of a sentence's first word when the sentence opens a view (no space before it), which
  replace its first ``lead_replaces`` spaced ids; empty for tokenizers that ignore the space (WordPiece), set for
  byte-level BPE (RoBERTa, Longformer), whose ``Ġ`` marks a preceding space; ``halves``; ``document_ids``, the whole
  document (title and body) as :class:`~lit_docemb.views.common.DocumentCollator` tokenizes it for embedding.
* **Exactness**: joining sentences with spaces and tokenizing gives the concatenation of their ids (the first one
  with its lead ids) for tokenizers whose pre-tokenizer splits at whitespace, which ``tests/data/
  test_sentence_cache.py`` checks on a WordPiece and a byte-level BPE tokenizer.
* **Key**: the corpus's and the tokenizer's fingerprints (:func:`~lit_docemb.data.caches.row_cache.corpus_fingerprint`,
  :func:`~lit_docemb.data.caches.row_cache.tokenizer_fingerprint`), ``max_section_chars``, ``max_length``,
  ``with_title``, the source of :mod:`lit_docemb.data.core.text` (the splitting rules) and the row layout's version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain
from pathlib import Path

import numpy as np

from lit_docemb.data.caches.row_cache import CachedRows, RowCache, tokenizer_fingerprint
from lit_docemb.data.core import text
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.text import split_sentences
from lit_docemb.data.core.tokens import CHARS_PER_TOKEN, document_text

CACHE_VERSION = "1"  # bump when the layout of the rows changes

#: Characters of a section read per token of view budget: DocSplit has always split at most
#: ``48 * max_length`` characters of each section (four views' worth of :data:`CHARS_PER_TOKEN`).
SECTION_CHARS_PER_TOKEN = 48


@dataclass
class TokenizedSentences:
    """One document's sentences as token ids (a row of the cache; see the module docstring for the fields). The
    arrays may be read-only views of the memory-mapped file.

    Attributes:
        id: The document id.
        input_ids: (N,) int32 ids of every sentence tokenized after a space, one after the other.
        sentence_offsets: (S + 1,) int32 start of each sentence in ``input_ids``, then N.
        lead_ids: (M,) int32 ids of each sentence's opening word without the space before it.
        lead_offsets: (S + 1,) int32 start of each sentence's lead ids in ``lead_ids``, then M.
        lead_replaces: (S,) int32 spaced ids of each sentence that its lead ids replace.
        halves: The two sentences are a one-sentence document's word halves: one to each view.
        document_ids: (T,) int32 the whole document tokenized for embedding (special tokens, ``max_length``).
    """

    id: str
    input_ids: np.ndarray
    sentence_offsets: np.ndarray
    lead_ids: np.ndarray
    lead_offsets: np.ndarray
    lead_replaces: np.ndarray
    halves: bool
    document_ids: np.ndarray

    def __len__(self) -> int:
        """S, the number of sentences."""
        return len(self.lead_replaces)

    def lengths(self) -> tuple[list[int], list[int]]:
        """Each sentence's id count inside a view and when it opens one."""
        spaced = np.diff(self.sentence_offsets)
        opening = spaced - self.lead_replaces + np.diff(self.lead_offsets)
        return spaced.tolist(), opening.tolist()

    def view(self, sentences: list[int], max_tokens: int) -> np.ndarray:
        """(≤ max_tokens,) int64 the ids of ``sentences`` (ascending) joined as one text, cut to ``max_tokens``."""
        first, offsets = sentences[0], self.sentence_offsets
        parts = [self.lead_ids[self.lead_offsets[first]:self.lead_offsets[first + 1]],
                 self.input_ids[offsets[first] + self.lead_replaces[first]:offsets[first + 1]]]
        size = len(parts[0]) + len(parts[1])
        for sentence in sentences[1:]:
            if size >= max_tokens:
                break
            parts.append(self.input_ids[offsets[sentence]:offsets[sentence + 1]])
            size += len(parts[-1])
        return np.concatenate(parts)[:max_tokens].astype(np.int64)


def document_sentences(document: Document, max_section_chars: int) -> tuple[list[str], bool]:
    """DocSplit's sentences of a document and whether they are the word halves of a single sentence."""
    sentences = [s for section in document.sections for s in split_sentences(section.text[:max_section_chars])]
    if len(sentences) >= 2:
        return sentences, False
    words = " ".join(sentences).split()
    if len(words) < 2:
        return [], True
    half = len(words) // 2
    return [" ".join(words[:half]), " ".join(words[half:])], True


def embedding_ids(tokenizer, documents: Sequence[Document], max_length: int, with_title: bool) -> list[list[int]]:
    """Each document's title and body tokenized as :func:`~lit_docemb.data.core.tokens.tokenize` does (before padding)."""
    texts = [document_text(document, with_title)[:max_length * CHARS_PER_TOKEN] for document in documents]
    return tokenizer(texts, max_length=max_length, truncation=True)["input_ids"] if texts else []


def _lead(alone: list[int], spaced: list[int]) -> tuple[list[int], int]:
    """The ids that differ between a text tokenized alone and after a space: (alone's head, spaced ids replaced)."""
    common = 0
    while common < min(len(alone), len(spaced)) and alone[-1 - common] == spaced[-1 - common]:
        common += 1
    return alone[:len(alone) - common], len(spaced) - common


def ignores_leading_space(tokenizer) -> bool:
    """Whether a text's ids cannot depend on a space before it: a BERT-style normaliser (or none) and a pre-tokenizer
    that drops whitespace (WordPiece tokenizers). Then the spaced ids are the ids alone and need no second call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    normalizer, pre_tokenizer = backend.normalizer, backend.pre_tokenizer
    return (normalizer is None or type(normalizer).__name__ == "BertNormalizer") and \
        type(pre_tokenizer).__name__ in ("BertPreTokenizer", "Whitespace", "WhitespaceSplit")


def tokenize_sentences(documents: Sequence[Document], tokenizer, max_section_chars: int, max_length: int,
                       with_title: bool) -> list[TokenizedSentences]:
    """Each document's sentences tokenized (the rows of :class:`SentenceCache`), the sentences of all documents in
    one tokenizer call (two where a space before a text changes its ids: :func:`ignores_leading_space`).

    Args:
        documents: The documents, in the order of the result.
        tokenizer: A ``transformers`` tokenizer.
        max_section_chars: Characters of each section that are split into sentences.
        max_length: Tokens of ``document_ids``, special tokens included.
        with_title: ``document_ids`` start with the title.
    """
    splits = [document_sentences(document, max_section_chars) for document in documents]
    flat = list(chain.from_iterable(sentences for sentences, _ in splits))
    # a sentence may be longer than the encoder reads (text without punctuation): cut later, so verbose=False keeps
    # transformers' false "indexing errors" warning away
    alone = tokenizer(flat, add_special_tokens=False, verbose=False)["input_ids"] if flat else []
    if ignores_leading_space(tokenizer):
        spaced, leads = alone, [([], 0)] * len(alone)
    else:
        spaced = (tokenizer([" " + s for s in flat], add_special_tokens=False, verbose=False)["input_ids"] if flat
                  else [])
        leads = [_lead(a, s) for a, s in zip(alone, spaced, strict=True)]
    whole = embedding_ids(tokenizer, documents, max_length, with_title)
    rows, start = [], 0
    for document, (sentences, halves), ids in zip(documents, splits, whole, strict=True):
        stop = start + len(sentences)
        own, own_leads = spaced[start:stop], leads[start:stop]
        rows.append(TokenizedSentences(
            id=document.id,
            input_ids=np.fromiter(chain.from_iterable(own), dtype=np.int32),  # (N,)
            sentence_offsets=np.asarray([0, *accumulate(map(len, own))], dtype=np.int32),  # (S + 1,)
            lead_ids=np.fromiter(chain.from_iterable(head for head, _ in own_leads), dtype=np.int32),  # (M,)
            lead_offsets=np.asarray([0, *accumulate(len(head) for head, _ in own_leads)], dtype=np.int32),
            lead_replaces=np.asarray([replaced for _, replaced in own_leads], dtype=np.int32),  # (S,)
            halves=halves, document_ids=np.asarray(ids, dtype=np.int32)))
        start = stop
    return rows


class CachedSentences(CachedRows):
    """The rows of a sentence cache as :class:`TokenizedSentences`, read on access from the memory-mapped table
    (pickles as the table's file paths: :class:`~lit_docemb.data.caches.row_cache.CachedRows`)."""

    _COLUMNS = ("id", "input_ids", "sentence_offsets", "lead_ids", "lead_offsets", "lead_replaces", "halves",
                "document_ids")
    _ARRAYS = ("input_ids", "sentence_offsets", "lead_ids", "lead_offsets", "lead_replaces", "document_ids")

    def row(self, index: int) -> TokenizedSentences:
        return TokenizedSentences(id=self._column("id")[index].as_py(), halves=self._column("halves")[index].as_py(),
                                  **{name: self._ids_of(name, index) for name in self._ARRAYS})


class SentenceCache(RowCache):
    """Builds or reopens the split and tokenized sentences of a corpus (see the module docstring).

    Args:
        tokenizer: A fast ``transformers`` tokenizer (part of the cache key).
        max_length: Tokens per view (and of ``document_ids``), special tokens included.
        with_title: ``document_ids`` start with the title (DocSplit's ``embed_with_title``).
        max_section_chars: Characters of each section split into sentences (None: ``48 * max_length``).
        cache_dir, batch_documents, num_proc: Those of :class:`~lit_docemb.data.caches.row_cache.RowCache`
            (``batch_documents``: documents whose sentences are tokenized in one call).
    """

    def __init__(self, tokenizer, max_length: int = 512, with_title: bool = True, max_section_chars: int | None = None,
                 cache_dir: str | None = None, batch_documents: int = 64, num_proc: int | None = None) -> None:
        if max_length < 1:
            raise ValueError(f"need max_length >= 1, got {max_length}")
        super().__init__(cache_dir, batch_documents, num_proc)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.with_title = with_title
        self.max_section_chars = SECTION_CHARS_PER_TOKEN * max_length if max_section_chars is None \
            else max_section_chars

    name = "sentences"
    cached = CachedSentences

    def key(self, documents: Sequence[Document]) -> dict:
        return {"tokenizer": tokenizer_fingerprint(self.tokenizer), "rows": self.name,
                "max_section_chars": self.max_section_chars, "max_length": self.max_length,
                "with_title": self.with_title, "version": CACHE_VERSION,
                "splitter": hashlib.blake2b(Path(text.__file__).read_bytes(), digest_size=16).hexdigest()}

    @staticmethod
    def features():
        import datasets

        ids = datasets.List(datasets.Value("int32"))
        return datasets.Features({"id": datasets.Value("string"), "input_ids": ids, "sentence_offsets": ids,
                                  "lead_ids": ids, "lead_offsets": ids, "lead_replaces": ids,
                                  "halves": datasets.Value("bool"), "document_ids": ids})

    def tokenize(self, documents: Sequence[Document]) -> list[TokenizedSentences]:
        """The rows of ``documents``, computed now (no cache): what a collator given documents uses."""
        return tokenize_sentences(documents, self.tokenizer, self.max_section_chars, self.max_length,
                                  self.with_title)

    @staticmethod
    def table_row(row: TokenizedSentences) -> dict:
        return {"id": row.id, "halves": row.halves,
                **{name: getattr(row, name).tolist() for name in CachedSentences._ARRAYS}}
