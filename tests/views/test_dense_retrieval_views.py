"""QueryDocumentCollator (lit_docemb/views/dense_retrieval.py): queries as one-section Query documents, the
positives in query order then the negatives, and the ids that keep one query's positives from being its negatives."""

from __future__ import annotations

from lit_docemb.data.core.document import Document, Query, Section, doc_index
from lit_docemb.data.retrieval.datamodule import RetrievalExample
from lit_docemb.views.dense_retrieval import QueryDocumentCollator


def doc(doc_id: str) -> Document:
    return Document(doc_id, sections=[Section("", f"text of {doc_id}")])


def test_positives_then_negatives_and_a_positive_carries_its_querys_id():
    seen = []
    collate = QueryDocumentCollator(lambda items: seen.append(items) or [d.id for d in items])
    examples = [RetrievalExample("q1", "tides?", doc("p1"), [doc("n1"), doc("n2")]),
                RetrievalExample("q1", "tides?", doc("p2"), [doc("n3"), doc("n1")]),
                RetrievalExample("q2", "loops?", doc("p3"), [doc("n4"), doc("n5")])]
    batch = collate(examples)
    queries, documents = seen
    assert all(isinstance(q, Query) for q in queries) and [q.text for q in queries] == ["tides?", "tides?", "loops?"]
    assert batch.queries == ["query:q1", "query:q1", "query:q2"]
    assert batch.documents == ["p1", "p2", "p3", "n1", "n2", "n3", "n1", "n4", "n5"]
    q1, q2 = doc_index("query:q1"), doc_index("query:q2")
    assert batch.query_ids.tolist() == [q1, q1, q2]
    assert batch.candidate_ids.tolist() == [q1, q1, q2] + [doc_index(f"doc:{n}") for n in
                                                           ["n1", "n2", "n3", "n1", "n4", "n5"]]
