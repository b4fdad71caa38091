"""Collators shared by methods: whole documents, tokenized, for embedding."""

from __future__ import annotations

from lit_docemb.data.core.batches import (
    DocumentBatch,
)
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.tokens import (
    document_text,
    tokenize,
)


class DocumentCollator:
    """Documents → :class:`DocumentBatch` of whole documents (title + body, truncated) for embedding."""

    def __init__(self, tokenizer, max_length: int, with_title: bool) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.with_title = with_title

    def __call__(self, documents: list[Document]) -> DocumentBatch:
        texts = [document_text(d, self.with_title) for d in documents]
        return DocumentBatch(tokenize(self.tokenizer, texts, self.max_length), [d.id for d in documents])
