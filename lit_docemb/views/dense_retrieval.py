"""Dense retrieval's batches: queries (as :class:`~lit_docemb.data.core.document.Query`, one-section documents that a
method may embed differently) with their positive and negative documents."""

from __future__ import annotations

import torch

from lit_docemb.data.core.batches import QueryDocumentBatch
from lit_docemb.data.core.document import doc_index, query_document
from lit_docemb.data.retrieval.datamodule import RetrievalExample


class QueryDocumentCollator:
    """RetrievalExamples -> :class:`QueryDocumentBatch` through the backbone's document collator."""

    def __init__(self, collate) -> None:
        self.collate = collate

    def __call__(self, examples: list[RetrievalExample]) -> QueryDocumentBatch:
        queries = [query_document(e.query_id, e.query) for e in examples]
        negatives = [d for e in examples for d in e.negatives]
        query_ids = [doc_index(f"query:{e.query_id}") for e in examples]
        # a positive carries its query's id: another example's positive for the same query is not a negative
        candidate_ids = query_ids + [doc_index(f"doc:{d.id}") for d in negatives]
        return QueryDocumentBatch(self.collate(queries), self.collate([e.positive for e in examples] + negatives),
                                  torch.tensor(query_ids, dtype=torch.long),
                                  torch.tensor(candidate_ids, dtype=torch.long))
