"""Unsupervised SimCSE's views (Gao et al. 2021): a document and the same document, dropout the only difference
(applied by the encoder, not here); tokenized in dataloader workers."""

from __future__ import annotations

import torch

from lit_docemb.data.core.batches import ViewPairBatch
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.data.core.tokens import document_text, mask_tokens, tokenize


class SameDocumentCollator:
    """Documents → :class:`ViewPairBatch` whose two views are the same tokens: each document's text (title and body,
    as it is embedded) cut to ``max_length`` tokens. With ``mlm_probability`` the batch also carries a BERT-masked
    copy for the auxiliary masked-LM loss, its mask drawn from torch's RNG in training (seeded per batch by the
    training loader) and from the first document's id otherwise.

    Args:
        tokenizer: The encoder's tokenizer.
        max_length: Tokens per document, special tokens included.
        with_title: Start the text with the title.
        mlm_probability: Share of real tokens masked in the masked-LM copy; 0: no copy.
        deterministic: Draw the mask from the documents alone (validation) instead of torch's RNG.
    """

    def __init__(self, tokenizer, max_length: int, with_title: bool, mlm_probability: float,
                 deterministic: bool) -> None:
        self.tokenizer, self.max_length, self.with_title = tokenizer, max_length, with_title
        self.mlm_probability, self.deterministic = mlm_probability, deterministic

    def __call__(self, documents: list[Document]) -> ViewPairBatch:
        tokens = tokenize(self.tokenizer, [document_text(d, self.with_title) for d in documents], self.max_length)
        index = torch.tensor([doc_index(d.id) for d in documents], dtype=torch.long)  # (B,)
        mlm = None
        if self.mlm_probability > 0:
            seed = (doc_index(documents[0].id) if documents else 0) if self.deterministic \
                else int(torch.randint(2**62, (1,)))
            mlm = mask_tokens(tokens, self.tokenizer, self.mlm_probability, torch.Generator().manual_seed(seed))
        return ViewPairBatch(view_a=tokens, view_b=tokens, doc_index=index, mlm=mlm)
