"""DocSplit's views (seed paper 001): two random sentence halves of a document, assembled from token ids in
dataloader workers.

The collators read :class:`~lit_docemb.data.caches.sentence_cache.TokenizedSentences` (the DataModule's sentence cache,
:class:`~lit_docemb.data.caches.sentence_cache.SentenceCache`); given documents, they make those rows themselves with the
same cache's :meth:`~lit_docemb.data.caches.sentence_cache.SentenceCache.tokenize`, so both give the same batches.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from lit_docemb.data.core.batches import DocumentBatch, DocumentSentencesBatch, TokenBatch, ViewPairBatch
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.data.caches.sentence_cache import SentenceCache, TokenizedSentences, embedding_ids
from lit_docemb.data.core.text import split_views
from lit_docemb.data.core.tokens import has_content, mask_tokens, pad_ids, special_tokens


def draw_views(row: TokenizedSentences, rng: random.Random, max_tokens: int) -> list[list[int]] | None:
    """The sentence indices of a document's two views, or ``None`` when it has fewer than two sentences.

    The draw is :func:`~lit_docemb.data.core.text.split_views`'s (one ``rng.randrange(2)`` per sentence, in order), but it
    stops once both views hold ``max_tokens`` ids: later sentences could only land past the end of a view, and with
    both views non-empty ``split_views`` moves no sentence, so the views are those of the whole draw. A draw that
    reaches the last sentence is replayed by ``split_views`` itself. A one-sentence document's word halves
    (``row.halves``) go one to each view.
    """
    count = len(row)
    if row.halves:
        return [[0], [1]] if count == 2 else None
    if count < 2:
        return None
    state = rng.getstate()
    spaced, opening = row.lengths()
    views: list[list[int]] = [[], []]
    filled = [0, 0]
    for sentence in range(count):
        view = rng.randrange(2)
        filled[view] += spaced[sentence] if views[view] else opening[sentence]
        views[view].append(sentence)
        if filled[0] >= max_tokens and filled[1] >= max_tokens:
            return views
    rng.setstate(state)
    return split_views(range(count), rng, n_views=2)


class SentenceSplitCollator:
    """Documents or their cached sentences → :class:`ViewPairBatch` of DocSplit views (runs in dataloader workers).

    In training a fresh split is drawn from torch's RNG, which the training loader seeds per batch from (seed,
    epoch, position) (``lit_docemb/data/core/sampling.py``), so every pass sees new pairs and a resumed run the
    interrupted run's; in validation the split is a function of the document id, so validation losses are
    comparable across epochs. Each view is ``[CLS]`` + its sentences' ids cut to fit + ``[SEP]``: the ids the
    tokenizer gives the sentences joined by spaces, truncated to ``max_length``.

    Args:
        cache: The method's sentence cache (its tokenizer, ``max_length`` and splitting parameters).
        mlm_probability: Share of the first view's tokens masked for the MLM copy (0: no copy).
        deterministic: Draw the split from the document id alone (validation) instead of torch's RNG.
    """

    def __init__(self, cache: SentenceCache, mlm_probability: float, deterministic: bool) -> None:
        self.cache = cache
        self.tokenizer = cache.tokenizer
        self.mlm_probability = mlm_probability
        self.deterministic = deterministic
        self.prefix, self.suffix = special_tokens(cache.tokenizer)
        self.body_tokens = cache.max_length - len(self.prefix) - len(self.suffix)

    def rows(self, items: list[Document | TokenizedSentences]) -> list[TokenizedSentences]:
        """The items as cache rows (documents are tokenized now, in one call)."""
        documents = [item for item in items if isinstance(item, Document)]
        fresh = iter(self.cache.tokenize(documents) if documents else [])
        return [next(fresh) if isinstance(item, Document) else item for item in items]

    def __call__(self, items: list[Document | TokenizedSentences]) -> ViewPairBatch:
        rows = self.rows(items)
        seed = None if self.deterministic else int(torch.randint(2**62, (1,)))
        prefix, suffix = np.asarray(self.prefix, dtype=np.int64), np.asarray(self.suffix, dtype=np.int64)
        first, second, kept = [], [], []
        for row in rows:
            views = draw_views(row, random.Random(row.id if seed is None else f"{seed}:{row.id}"), self.body_tokens)
            if views is not None:
                first.append(np.concatenate([prefix, row.view(views[0], self.body_tokens), suffix]))
                second.append(np.concatenate([prefix, row.view(views[1], self.body_tokens), suffix]))
                kept.append(row.id)
        tokens = pad_ids(first + second, self.tokenizer.pad_token_id or 0)  # (2B, T)
        content = has_content(tokens, self.tokenizer)  # (2B,): words of control characters leave no token
        keep = content[:len(kept)] & content[len(kept):]  # (B,)
        kept = [doc_id for doc_id, k in zip(kept, keep.tolist(), strict=True) if k]
        view_a = TokenBatch(tokens.input_ids[:len(first)][keep], tokens.attention_mask[:len(first)][keep])
        view_b = TokenBatch(tokens.input_ids[len(first):][keep], tokens.attention_mask[len(first):][keep])
        mlm = None
        if self.mlm_probability > 0:  # also for an empty batch: the MLM head must run on every device (DDP)
            if seed is None:  # validation: masks follow the documents, not the global RNG
                seed = doc_index(kept[0]) if kept else 0
            mlm = mask_tokens(view_a, self.tokenizer, self.mlm_probability, torch.Generator().manual_seed(seed))
        ids = torch.tensor([doc_index(doc_id) for doc_id in kept], dtype=torch.long)  # (B,), B may be 0
        return ViewPairBatch(view_a, view_b, ids, mlm, skipped=len(items) - len(kept))


class WholeDocumentCollator:
    """Documents or their cached sentences → :class:`DocumentBatch` of whole documents (title + body, truncated) for
    embedding: the ids of :class:`~lit_docemb.views.common.DocumentCollator`, read from the cache's
    ``document_ids`` when the items are cached rows.

    Args:
        cache: The method's sentence cache (its tokenizer, ``max_length`` and ``with_title``).
    """

    def __init__(self, cache: SentenceCache) -> None:
        self.cache = cache

    def __call__(self, items: list[Document | TokenizedSentences]) -> DocumentBatch:
        documents = [item for item in items if isinstance(item, Document)]
        fresh = iter(embedding_ids(self.cache.tokenizer, documents, self.cache.max_length, self.cache.with_title))
        ids = [next(fresh) if isinstance(item, Document) else item.document_ids for item in items]
        return DocumentBatch(pad_ids(ids, self.cache.tokenizer.pad_token_id or 0), [item.id for item in items])


def sentence_ids(row: TokenizedSentences, body_tokens: int) -> list[np.ndarray]:
    """A cached document's sentences as separate texts, each its ids cut to ``body_tokens`` (without special tokens).

    A one-sentence document's two word halves are that one sentence again; a document with fewer than two words has
    none (``[]``).
    """
    if len(row) == 0:
        return []
    if row.halves:
        return [row.view([0, 1], body_tokens)]
    return [row.view([sentence], body_tokens) for sentence in range(len(row))]


class SentencesCollator:
    """Documents or their cached sentences → :class:`DocumentSentencesBatch`: each sentence ``[CLS]`` + its ids cut
    to fit + ``[SEP]``, as a view's ids are made (the title is not a sentence: the cache's sentences are the body's).
    A document without a sentence is its whole embedding ids, one row.

    Args:
        cache: The method's sentence cache (its tokenizer, ``max_length`` and splitting parameters).
    """

    def __init__(self, cache: SentenceCache) -> None:
        self.cache = cache
        self.tokenizer = cache.tokenizer
        self.prefix, self.suffix = special_tokens(cache.tokenizer)
        self.body_tokens = cache.max_length - len(self.prefix) - len(self.suffix)

    def __call__(self, items: list[Document | TokenizedSentences]) -> DocumentSentencesBatch:
        documents = [item for item in items if isinstance(item, Document)]
        fresh = iter(self.cache.tokenize(documents) if documents else [])
        rows = [next(fresh) if isinstance(item, Document) else item for item in items]
        prefix, suffix = np.asarray(self.prefix, dtype=np.int64), np.asarray(self.suffix, dtype=np.int64)
        texts, counts = [], []
        for row in rows:
            sentences = [np.concatenate([prefix, ids, suffix]) for ids in sentence_ids(row, self.body_tokens)]
            texts += sentences or [np.asarray(row.document_ids, dtype=np.int64)]
            counts.append(max(len(sentences), 1))
        return DocumentSentencesBatch(pad_ids(texts, self.tokenizer.pad_token_id or 0),  # (S, T)
                                      torch.tensor(counts, dtype=torch.long), [row.id for row in rows])
