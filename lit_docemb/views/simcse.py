"""Unsupervised SimCSE's views (Gao et al. 2021): a document and the same document, dropout the only difference
(applied by the encoder, not here); tokenized in dataloader workers."""

from __future__ import annotations

import torch

from lit_docemb.data.core.batches import ViewPairBatch
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.views.masked_language_modelling import MaskedDocumentCollator


class SameDocumentCollator(MaskedDocumentCollator):
    """Documents → :class:`ViewPairBatch` whose two views are the same tokens: each document's text (title and body,
    as it is embedded) cut to ``max_length`` tokens. With ``mlm_probability`` the batch also carries a BERT-masked
    copy for the auxiliary masked-LM loss, masked as :class:`~lit_docemb.views.masked_language_modelling.
    MaskedDocumentCollator` masks (torch's RNG in training, the first document's id otherwise); 0: no copy. The
    arguments are that collator's.
    """

    def __call__(self, documents: list[Document]) -> ViewPairBatch:
        tokens = self.tokens(documents)
        index = torch.tensor([doc_index(d.id) for d in documents], dtype=torch.long)  # (B,)
        mlm = self.masked(tokens, documents) if self.mlm_probability > 0 else None
        return ViewPairBatch(view_a=tokens, view_b=tokens, doc_index=index, mlm=mlm)
