"""DocSplit's views (seed paper 001): two random sentence halves of a document, run in dataloader workers."""

from __future__ import annotations

import random

import torch

from lit_docemb.data.batches import (
    TokenBatch,
    ViewPairBatch,
)
from lit_docemb.data.document import Document, doc_index
from lit_docemb.data.text import split_sentences, split_views
from lit_docemb.data.tokens import (
    has_content,
    mask_tokens,
    tokenize,
)


def sentence_views(doc: Document, rng: random.Random, max_chars: int) -> tuple[str, str] | None:
    """The two DocSplit views of a document, or ``None`` when it has fewer than two words."""
    sentences = [s for sec in doc.sections for s in split_sentences(sec.text[:max_chars])]
    if len(sentences) < 2:
        words = " ".join(sentences).split()
        if len(words) < 2:
            return None
        half = len(words) // 2
        return " ".join(words[:half]), " ".join(words[half:])
    view_a, view_b = split_views(sentences, rng, n_views=2)
    return " ".join(sentences[i] for i in view_a), " ".join(sentences[i] for i in view_b)


class SentenceSplitCollator:
    """Documents → :class:`ViewPairBatch` of DocSplit views (runs in dataloader workers).

    In training a fresh split is drawn from torch's RNG, which the training loader seeds per batch from (seed,
    epoch, position) (``lit_docemb/data/sampling.py``), so every pass sees new pairs and a resumed run the
    interrupted run's; in validation the split is a function of the document id, so validation losses are
    comparable across epochs.
    """

    def __init__(self, tokenizer, max_length: int, mlm_probability: float, deterministic: bool) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.mlm_probability = mlm_probability
        self.deterministic = deterministic

    def __call__(self, documents: list[Document]) -> ViewPairBatch:
        seed = None if self.deterministic else int(torch.randint(2**62, (1,)))
        views, kept = [], []
        for doc in documents:
            rng = random.Random(doc.id if seed is None else f"{seed}:{doc.id}")
            pair = sentence_views(doc, rng, max_chars=self.max_length * 48)
            if pair is not None:
                views.append(pair)
                kept.append(doc)
        texts = [a for a, _ in views] + [b for _, b in views]
        tokens = tokenize(self.tokenizer, texts, self.max_length)  # (2B, T)
        content = has_content(tokens, self.tokenizer)  # (2B,): words of control characters leave no token
        keep = content[:len(views)] & content[len(views):]  # (B,)
        kept = [doc for doc, k in zip(kept, keep.tolist(), strict=True) if k]
        n = len(kept)
        view_a = TokenBatch(tokens.input_ids[:len(views)][keep], tokens.attention_mask[:len(views)][keep])
        view_b = TokenBatch(tokens.input_ids[len(views):][keep], tokens.attention_mask[len(views):][keep])
        mlm = None
        if self.mlm_probability > 0:  # also for an empty batch: the MLM head must run on every device (DDP)
            if seed is None:  # validation: masks follow the documents, not the global RNG
                seed = doc_index(kept[0].id) if kept else 0
            mlm = mask_tokens(view_a, self.tokenizer, self.mlm_probability, torch.Generator().manual_seed(seed))
        ids = torch.tensor([doc_index(d.id) for d in kept], dtype=torch.long)  # (B,), B may be 0
        return ViewPairBatch(view_a, view_b, ids, mlm, skipped=len(documents) - n)
