"""Masked-language-modelling views: whole documents (title + body, truncated), BERT-masked, in dataloader workers."""

from __future__ import annotations

import torch

from lit_docemb.data.core.batches import MaskedTokenBatch, TokenBatch
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.data.core.tokens import document_text, mask_tokens, tokenize


class MaskedDocumentCollator:
    """Documents → :class:`MaskedTokenBatch`: each document's text (title and body, as it is embedded) cut to
    ``max_length`` tokens, ``mlm_probability`` of its real tokens chosen by BERT's 80/10/10 rule
    (:func:`~lit_docemb.data.core.tokens.mask_tokens`).

    In training the mask is drawn from torch's RNG, which the training loader seeds per batch (every pass masks anew,
    a resumed run as the interrupted one); in validation it is a function of the batch's first document id, so
    validation losses are comparable across epochs.

    Args:
        tokenizer: The encoder's tokenizer (it must have a mask token).
        max_length: Tokens per document, special tokens included.
        with_title: Start the text with the title.
        mlm_probability: Share of the real, non-special tokens chosen for prediction.
        deterministic: Draw the mask from the documents alone (validation) instead of torch's RNG.
    """

    def __init__(self, tokenizer, max_length: int, with_title: bool, mlm_probability: float,
                 deterministic: bool) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.with_title = with_title
        self.mlm_probability = mlm_probability
        self.deterministic = deterministic

    def __call__(self, documents: list[Document]) -> MaskedTokenBatch:
        return self.masked(self.tokens(documents), documents)

    def tokens(self, documents: list[Document]) -> TokenBatch:
        """The documents' texts as tokens, cut to ``max_length``."""
        return tokenize(self.tokenizer, [document_text(d, self.with_title) for d in documents], self.max_length)

    def masked(self, tokens: TokenBatch, documents: list[Document]) -> MaskedTokenBatch:
        """A masked copy of the documents' ``tokens``, its mask drawn as the class docstring says."""
        if self.deterministic:
            seed = doc_index(documents[0].id) if documents else 0
        else:
            seed = int(torch.randint(2**62, (1,)))
        return mask_tokens(tokens, self.tokenizer, self.mlm_probability, torch.Generator().manual_seed(seed))
