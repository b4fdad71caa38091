"""The classical baselines' collator (:mod:`lit_docemb.methods.classical`): documents -> their words, with CTPE's
preprocessing (§4.1, which CTPE applies to every compared method alike: lower case, HTML tags removed and escapes
restored, split at punctuation and white space, tokens without a letter dropped; DECA does not say), or, for a
sentence representation (Skip-thoughts), their sentences (cut at sentence-ending punctuation and line breaks first,
then the same preprocessing: :func:`~lit_docemb.models.ctpe_tokenizers.preprocess_sentences`), and a key per
document. Runs in dataloader workers: picklable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

from lit_docemb.data.core.batches import WordListBatch
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.tokens import document_text
from lit_docemb.models.ctpe_tokenizers import preprocess_sentences, preprocess_words


def document_words(document: Document) -> list[str]:
    """A document's title and text as words (see the module docstring)."""
    return preprocess_words(document_text(document, with_title=True))


def document_units(document: Document, unit: Literal["words", "sentences"] = "words") -> list[str]:
    """A document's title and text as words, or as sentences (each its words joined by spaces; the title is one)."""
    if unit == "sentences":
        return preprocess_sentences(document_text(document, with_title=True))
    return document_words(document)


def document_key(document_id: str, words: Sequence[str]) -> str:
    """``<id>#<hash of the words>``: a document read twice (the DataModule, then an evaluation's own files) has one
    key; another document with the same id has another."""
    return f"{document_id}#{hashlib.blake2b(' '.join(words).encode(), digest_size=8).hexdigest()}"


class WordListCollator:
    """Documents -> :class:`~lit_docemb.data.core.batches.WordListBatch` of their words or sentences (``unit``)."""

    def __init__(self, unit: Literal["words", "sentences"] = "words") -> None:
        self.unit = unit

    def __call__(self, documents: list[Document]) -> WordListBatch:
        units = [document_units(d, self.unit) for d in documents]
        return WordListBatch(units, [document_key(d.id, u) for d, u in zip(documents, units)],
                             [d.id for d in documents])
