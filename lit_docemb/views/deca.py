"""DECA's batches: a document and its augmentation, as word ids (Doc2VecC) or tokens (a Hugging Face encoder), or a
document's own word ids alone (plain Doc2VecC, :class:`Doc2VecCCollator`).

Augmentations run here, in dataloader workers. In training each document's augmentation seed is drawn from
torch's RNG (seeded per batch by the training loader from seed, epoch and position, see
``lit_docemb/data/core/sampling.py``) joined with its id, so every pass sees a new augmentation, the same in a resumed
run; in validation the seed is the document id, so validation losses are comparable across epochs.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
import torch
from torch import Tensor

from lit_docemb.augment import DocumentAugmenter, Vocabulary, words_of
from lit_docemb.augment.thesaurus import WORD, Draws
from lit_docemb.data.core.batches import (
    Doc2VecCBatch,
    Doc2VecCPairBatch,
    PackedWords,
    TokenBatch,
    ViewPairBatch,
    WordDocumentBatch,
)
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.data.caches.field_cache import FieldRows, TokenizedFields
from lit_docemb.data.core.tokens import document_text, tokenize

#: Characters read per word of budget before splitting a document into words.
CHARS_PER_WORD = 12

Augment = Callable[[str, "int | str"], list[str]]


def word_index(vocabulary: Vocabulary, min_count: int, max_vocabulary: int) -> dict[str, int]:
    """word → id in 1..V for the ``max_vocabulary`` most frequent words seen ``min_count`` times (ties by word)."""
    kept = sorted((w for w, c in vocabulary.counts.items() if c >= min_count),
                  key=lambda w: (-vocabulary.counts[w], w))[:max_vocabulary]
    if not kept:
        raise ValueError(f"no word occurs min_word_count={min_count} times in the corpus: lower min_word_count")
    return {w: i for i, w in enumerate(kept, 1)}


def leading_words(document: Document, max_words: int) -> list[str]:
    """The words of a document's title and text, read from its first ``max_words * CHARS_PER_WORD`` characters."""
    return words_of(document_text(document, with_title=True)[:max_words * CHARS_PER_WORD])


def in_vocabulary(index: dict[str, int], words: Sequence[str], max_words: int) -> list[int]:
    """The ids of the ``words`` that ``index`` holds, in order, the first ``max_words`` of them."""
    return [i for i in map(index.get, words) if i is not None][:max_words]


def _seeds(documents: list[Document], deterministic: bool) -> list[str]:
    draw = None if deterministic else int(torch.randint(2**62, (1,)))
    return [doc.id if draw is None else f"{draw}:{doc.id}" for doc in documents]


class IdReplacement:
    """A thesaurus augmentation (``wordnet``, ``antonym``, ``ppdb``) drawn on word ids: a document's words → its
    word ids and its augmentation's, with one dictionary lookup per word and the draws done by numpy.

    The draws are those of :func:`~lit_docemb.augment.replace_words` -- each word with candidates is, with
    ``probability``, replaced by a uniform draw among them, a multi-word candidate adding several words -- from a
    counter-based stream keyed by the seed's BLAKE2 hash (:func:`word_draws`), not Python's ``random``: the words
    drawn for a seed differ from ``replace_words``'s, their distribution is the same. As in
    :meth:`Doc2VecCPairCollator.ids`, words outside ``index`` (a candidate's included) are dropped and each side is
    then cut at ``max_words``.

    Args:
        index: word → id in 1..V.
        draws: The augmenter's prepared table (:func:`~lit_docemb.augment.thesaurus.draws_of`).
        probability: Chance that a word with candidates is resampled.
    """

    def __init__(self, index: dict[str, int], draws: Draws, probability: float) -> None:
        self.probability = probability
        self.types = {word: t for t, word in enumerate(sorted(set(index) | set(draws)), 1)}  # 0: any other word
        self.word_ids = np.zeros(len(self.types) + 1, dtype=np.int64)
        self.counts = np.zeros(len(self.types) + 1, dtype=np.int64)
        self.offsets = np.zeros(len(self.types) + 1, dtype=np.int64)
        width = max((len(c) for _, _, candidates in draws.values() for c in candidates), default=1)
        rows = [[0] * width]  # row 0, the offset of words without candidates, is never chosen
        for word, t in self.types.items():
            self.word_ids[t] = index.get(word, 0)
            entry = draws.get(word)
            if entry is not None:
                self.counts[t], self.offsets[t] = entry[0], len(rows)
                rows.extend([index.get(w, 0) for w in c] + [0] * (width - len(c)) for c in entry[2])
        self.candidates = np.array(rows, dtype=np.int64)  # (1 + all candidates, width) ids, 0 outside the index

    def __call__(self, words: list[str], seed: str, max_words: int) -> tuple[np.ndarray, np.ndarray]:
        """(the words' ids, their augmentation's ids) as int64 arrays, each without out-of-index words and cut at
        ``max_words``."""
        return self.from_types(self.type_ids(words), seed, max_words)

    def type_ids(self, words: list[str]) -> np.ndarray:
        """(W,) int64 the words' types (0: a word neither in the index nor in the table): what the word cache
        stores (:class:`WordTypes`)."""
        return np.fromiter(map(self.types.get, words, repeat(0)), dtype=np.int64, count=len(words))

    def from_types(self, types: np.ndarray, seed: str, max_words: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`__call__` from the words' :meth:`type_ids`."""
        ids, augmented = self.from_types_of_batch([types], [seed], max_words)
        return ids.ids.numpy(), augmented.ids.numpy()

    def from_types_of_batch(self, rows: Sequence[np.ndarray], seeds: Sequence[str], max_words: int
                            ) -> tuple[PackedWords, PackedWords]:
        """:meth:`from_types` of each document's types with its seed, packed (the documents' ids, their
        augmentations'), computed over the batch's words at once: each document's draws still come from its own
        seed's stream."""
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        types = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)  # (W,) the batch's words
        draws = word_draws(seeds, lengths)  # (2, W)
        ids, counts = self.word_ids[types], self.counts[types]
        replaced = (counts > 0) & (draws[0] < self.probability)  # (replace?, which candidate?) per word
        chosen = self.offsets[types] + (draws[1] * counts).astype(np.int64)
        if self.candidates.shape[1] == 1:  # single-word candidates (WordNet synonyms, PPDB)
            augmented = np.where(replaced, self.candidates[chosen, 0], ids)
        else:  # e.g. antonyms: "not" + the antonym
            augmented = self.candidates[chosen]  # (W, width)
            augmented[~replaced] = 0
            augmented[~replaced, 0] = ids[~replaced]
        width = self.candidates.shape[1]
        return rows_of_words(ids, lengths, max_words), rows_of_words(augmented.reshape(-1), lengths * width, max_words)


def rows_of_words(values: np.ndarray, lengths: np.ndarray, max_words: int) -> PackedWords:
    """Each document's non-zero ``values`` in order (the documents' values one after the other, ``lengths`` each),
    cut at ``max_words``, packed."""
    document = np.repeat(np.arange(len(lengths)), lengths)
    kept = values != 0
    document, values = document[kept], values[kept]
    counts = np.bincount(document, minlength=len(lengths))
    position = np.arange(len(values)) - (np.cumsum(counts) - counts)[document]
    return PackedWords.of_lengths(torch.from_numpy(values[position < max_words].astype(np.int64, copy=False)),
                                  torch.from_numpy(np.minimum(counts, max_words).astype(np.int64)))


#: splitmix64's increment and output mix (Steele, Lea and Flood 2014): a counter hashed to 64 uniform bits.
GOLDEN, MIX_1, MIX_2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def word_draws(seeds: Sequence[str], lengths: np.ndarray) -> np.ndarray:
    """(2, W) float64 uniform draws in [0, 1) for the words of documents of ``lengths`` words, W their sum: draw
    ``s`` of a document's word ``j`` is splitmix64's output at counter ``key + (2 j + s + 1) * GOLDEN``, ``key`` the
    64-bit BLAKE2 hash of the document's seed. A document's draws depend on its seed and its words' positions
    alone, whatever batch it is in; the batch's words are drawn at once (one hash per document, numpy for the rest,
    where a generator re-seeded per document cost a few microseconds each)."""
    keys = np.fromiter((int.from_bytes(hashlib.blake2b(seed.encode("utf-8", "surrogatepass"), digest_size=8)
                                       .digest(), "little") for seed in seeds), dtype=np.uint64, count=len(seeds))
    document = np.repeat(np.arange(len(lengths)), lengths)
    position = (np.arange(len(document)) - np.repeat(np.cumsum(lengths) - lengths, lengths)).astype(np.uint64)
    counter = keys[document] + (np.uint64(2) * position + np.arange(1, 3, dtype=np.uint64)[:, None]) * GOLDEN
    z = (counter ^ (counter >> np.uint64(30))) * MIX_1
    z = (z ^ (z >> np.uint64(27))) * MIX_2
    return ((z ^ (z >> np.uint64(31))) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


class WordTypes:
    """The encoding that DECA's word cache stores (:class:`~lit_docemb.data.caches.field_cache.FieldTokenCache`): a
    document → one field, the :meth:`IdReplacement.type_ids` of the words the Doc2VecC collators read from it
    (its title and text cut at ``max_words * CHARS_PER_WORD`` characters, :func:`~lit_docemb.augment.words_of`).

    Args:
        replacement: The collators' :class:`IdReplacement` (its types: the index's words and the table's).
        max_words: The backbone's ``max_words``.
    """

    def __init__(self, replacement: IdReplacement, max_words: int) -> None:
        self.replacement, self.max_words = replacement, max_words

    def __call__(self, document: Document) -> list[tuple[str, list[int]]]:
        text = document_text(document, with_title=True)[:self.max_words * CHARS_PER_WORD]
        return [("", self.replacement.type_ids(words_of(text)).tolist())]

    def key(self) -> str:
        """The types (in order), the character cut and the rules that split a document into words."""
        rules = "\n".join([inspect.getsource(words_of), WORD.pattern, inspect.getsource(document_text),
                            str(self.max_words * CHARS_PER_WORD), *self.replacement.types])
        return "word-types:" + hashlib.blake2b(rules.encode(), digest_size=16).hexdigest()


@dataclass
class DocumentWords:
    """A document as a Doc2VecC collator reads it, kept from one epoch to the next (``kept_item``,
    :class:`~lit_docemb.data.core.kept_items.KeptItems`): its id, its :func:`~lit_docemb.data.core.document.doc_index`
    (hashed once) and its words, as vocabulary ids (:class:`Doc2VecCCollator`, cut at ``max_words``) or as word types
    (:class:`Doc2VecCPairCollator`, :meth:`IdReplacement.type_ids`). Its ``len`` is its words'."""
    id: str
    words: np.ndarray
    index: int = field(init=False)

    def __post_init__(self) -> None:
        self.index = doc_index(self.id)

    def __len__(self) -> int:
        return len(self.words)


class Doc2VecCCollator:
    """Documents → :class:`Doc2VecCBatch` of their own words (framework ``Doc2VecCAlone``: plain Doc2VecC, no
    augmentation): each document's in-vocabulary word ids cut at ``max_words``; Doc2VecC's rule draws its targets
    and windows itself (:mod:`lit_docemb.models.doc2vecc_sgd`). A document with fewer than two such words is
    skipped and counted. A document's ids are the same every epoch (the index is fixed): the DataModule's loaders
    keep them (:meth:`kept_item`), so a document is read and split into words once per process."""

    def __init__(self, index: dict[str, int], max_words: int, deterministic: bool) -> None:
        self.index, self.max_words, self.deterministic = index, max_words, deterministic

    def ids(self, words: list[str]) -> list[int]:
        return in_vocabulary(self.index, words, self.max_words)

    def document_ids(self, doc: Document | DocumentWords) -> np.ndarray:
        if isinstance(doc, DocumentWords):
            return doc.words
        return np.asarray(self.ids(leading_words(doc, self.max_words)), dtype=np.int64)

    def kept_item(self, doc: Document | DocumentWords) -> DocumentWords | None:
        """What this collator reads of a document: its id and its word ids."""
        return doc if isinstance(doc, DocumentWords) else DocumentWords(doc.id, self.document_ids(doc))

    def __call__(self, documents: list[Document | DocumentWords]) -> Doc2VecCBatch:
        kept = []
        for doc in documents:
            ids = self.document_ids(doc)
            if len(ids) >= 2:
                kept.append((doc, ids))
        return Doc2VecCBatch(PackedWords.from_rows([ids for _, ids in kept]), _doc_index([d for d, _ in kept]),
                             skipped=len(documents) - len(kept))


class Doc2VecCPairCollator(Doc2VecCCollator):
    """Documents → :class:`Doc2VecCPairBatch` (see the module docstring for the augmentation seeds).

    With ``cached`` (a thesaurus augmentation only), a document the word cache holds is read as its cached word types
    (:class:`WordTypes`, made with this collator's index and augmentation) instead of its text: the same ids and the
    same augmentation for the same seed. Where the DataModule's datasets hold the word cache's rows
    (:class:`~lit_docemb.data.caches.field_cache.TokenizedFields`, DECA's training), an item is its row already;
    from the second epoch on, the :class:`DocumentWords` that the loaders kept (:meth:`kept_item`).
    """

    def __init__(self, index: dict[str, int], augment: Augment, max_words: int, deterministic: bool,
                 cached: FieldRows | None = None) -> None:
        super().__init__(index, max_words, deterministic)
        self.augment = augment
        self.replacement = IdReplacement(index, augment.draws, augment.probability) \
            if isinstance(augment, DocumentAugmenter) and augment.replaces_from_table else None
        if cached is not None and self.replacement is None:
            raise ValueError("cached word types need a thesaurus augmentation (wordnet, antonym, ppdb)")
        self.cached = cached

    def pairs(self, documents: list[Document | TokenizedFields | DocumentWords]
              ) -> tuple[list, PackedWords, PackedWords]:
        """The documents that are kept, their word ids and their augmentations' word ids."""
        seeds = _seeds(documents, self.deterministic)
        if self.replacement is not None:  # a thesaurus: drawn on the batch's word types at once
            ids, augmented = self.replacement.from_types_of_batch([self.types(doc) for doc in documents], seeds,
                                                                  self.max_words)
        else:
            drawn = [self.augmented_ids(doc, seed) for doc, seed in zip(documents, seeds)]
            ids, augmented = (PackedWords.from_rows([pair[i] for pair in drawn]) for i in (0, 1))
        kept = (ids.lengths >= 2) & (augmented.lengths > 0)
        return [doc for doc, keep in zip(documents, kept.tolist()) if keep], ids.select(kept), augmented.select(kept)

    def types(self, doc: Document | TokenizedFields | DocumentWords) -> np.ndarray:
        """The document's word types (:meth:`IdReplacement.type_ids`): those kept, its row of the word cache, the
        row the cache holds for it, or split from its text."""
        if isinstance(doc, DocumentWords):
            return doc.words
        if isinstance(doc, TokenizedFields):
            return doc.input_ids
        cached = None if self.cached is None else self.cached.input_ids(doc.id)
        if cached is not None:
            return cached
        return self.replacement.type_ids(leading_words(doc, self.max_words))

    def kept_item(self, doc: Document | TokenizedFields | DocumentWords) -> DocumentWords | None:
        """What this collator reads of a document with a thesaurus augmentation: its id and its word types;
        ``None`` with another augmentation, which reads the text."""
        if self.replacement is None:
            return None
        return doc if isinstance(doc, DocumentWords) else DocumentWords(doc.id, self.types(doc))

    def augmented_ids(self, doc: Document, seed: str) -> tuple[list[int], list[int]]:
        """The document's word ids and those of its augmentation by a callable (no thesaurus table)."""
        text = document_text(doc, with_title=True)[:self.max_words * CHARS_PER_WORD]
        words = words_of(text)
        return self.ids(words), self.ids(_augment(self.augment, text, seed, words))

    def __call__(self, documents: list[Document]) -> Doc2VecCPairBatch:
        kept, ids, augmented = self.pairs(documents)
        return Doc2VecCPairBatch(ids, augmented, _doc_index(kept), skipped=len(documents) - len(kept))


class AppendedAugmentationCollator(Doc2VecCPairCollator):
    """Documents → :class:`Doc2VecCBatch`: each document's words followed by those of one augmentation (drawn
    as in the module docstring, so a new one every epoch); Doc2VecC trains on the merged words. The document and
    the augmentation are each cut at ``max_words``."""

    def __call__(self, documents: list[Document]) -> Doc2VecCBatch:
        kept, ids, augmented = self.pairs(documents)
        return Doc2VecCBatch(ids.followed_by(augmented), _doc_index(kept), skipped=len(documents) - len(kept))


def _augment(augment: Augment, text: str, seed: str, words: list[str]) -> list[str]:
    """``augment(text, seed)``, handing a :class:`DocumentAugmenter` the text's words so that it does not split
    the text again."""
    return augment(text, seed, words) if isinstance(augment, DocumentAugmenter) else augment(text, seed)


def _doc_index(documents: list[Document | TokenizedFields | DocumentWords]) -> Tensor:
    return torch.tensor([d.index if isinstance(d, DocumentWords) else doc_index(d.id) for d in documents],
                        dtype=torch.long)


class WordDocumentCollator:
    """Documents → :class:`WordDocumentBatch` of their in-vocabulary word ids (for ``embed``)."""

    def __init__(self, index: dict[str, int], max_words: int) -> None:
        self.index, self.max_words = index, max_words

    def __call__(self, documents: list[Document]) -> WordDocumentBatch:
        rows = [in_vocabulary(self.index, leading_words(d, self.max_words), self.max_words) for d in documents]
        return WordDocumentBatch(PackedWords.from_rows(rows), [d.id for d in documents])


class AugmentedTextCollator:
    """Documents → :class:`ViewPairBatch` of (document, augmentation) tokens for a Hugging Face encoder. Both views
    are words joined by spaces: the augmentations return lower-cased words without punctuation, so the document's
    view is its own words (:func:`~lit_docemb.augment.words_of`) the same way, and the two differ only by the
    augmentation, not by punctuation or case."""

    def __init__(self, tokenizer, augment: Augment, max_length: int, deterministic: bool) -> None:
        self.tokenizer, self.augment = tokenizer, augment
        self.max_length, self.deterministic = max_length, deterministic

    def __call__(self, documents: list[Document]) -> ViewPairBatch:
        originals, augmented, kept = [], [], []
        for doc, seed in zip(documents, _seeds(documents, self.deterministic)):
            text = document_text(doc, with_title=True)[:self.max_length * CHARS_PER_WORD]
            original = words_of(text)
            words = _augment(self.augment, text, seed, original)
            if words and original:
                originals.append(" ".join(original)), augmented.append(" ".join(words)), kept.append(doc)
        tokens = tokenize(self.tokenizer, originals + augmented, self.max_length)  # (2B, T)
        n = len(kept)
        return ViewPairBatch(TokenBatch(tokens.input_ids[:n], tokens.attention_mask[:n]),
                             TokenBatch(tokens.input_ids[n:], tokens.attention_mask[n:]), _doc_index(kept),
                             skipped=len(documents) - n)
