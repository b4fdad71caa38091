"""BM25 over a corpus of documents with ``bm25s``: the lexical baseline of Graph-RoBERTa Tables 3-5 and the
sparse half of its hybrids (:mod:`lit_docemb.eval.fusion`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lit_docemb.data.core.document import Document
from lit_docemb.data.retrieval.trec import QueryRecord, Run


class BM25Index:
    """A BM25 index of ``documents`` (title + text; lower-cased, English stopwords removed, no stemming), built
    once and queried any number of times. It holds the corpus's token ids in memory.

    Args:
        documents: The corpus.
        k1: Term-frequency saturation (bm25s / Lucene default 1.5; Anserini uses 0.9).
        b: Length normalisation (0.75; Anserini 0.4).
    """

    def __init__(self, documents: Sequence[Document], k1: float = 1.5, b: float = 0.75) -> None:
        import bm25s

        if len(documents) == 0:
            raise ValueError("BM25 needs at least one document")
        self.ids = [doc.id for doc in documents]
        self.retriever = bm25s.BM25(k1=k1, b=b)
        texts = (f"{documents[i].title}\n{documents[i].text}" for i in range(len(documents)))
        self.retriever.index(bm25s.tokenize(list(texts), show_progress=False), show_progress=False)

    def run(self, queries: Mapping[str, QueryRecord | str], depth: int = 100) -> Run:
        """The top ``depth`` documents of each query with a positive score: {query id: {document id: score}}."""
        import bm25s

        qids = list(queries)
        if not qids:
            return {}
        texts = [q.text if isinstance(q, QueryRecord) else q for q in (queries[qid] for qid in qids)]
        tokens = bm25s.tokenize(texts, return_ids=False, show_progress=False)
        rows, scores = self.retriever.retrieve(tokens, k=min(depth, len(self.ids)), show_progress=False)
        return {qid: {self.ids[r]: float(s) for r, s in zip(rows[i], scores[i], strict=True) if s > 0}
                for i, qid in enumerate(qids)}


def bm25_run(documents: Sequence[Document], queries: Mapping[str, QueryRecord], depth: int = 100, k1: float = 1.5,
             b: float = 0.75) -> Run:
    """A BM25 run over ``documents`` (:class:`BM25Index`: title + text, ``bm25s``, English
    stopwords, no stemming), with :class:`BM25Index`'s ``k1`` and ``b`` (the papers do not give theirs).

    For corpora without an official run (Robust04): ``write_run(bm25_run(...), "bm25.run")`` once, then
    ``negatives_run: bm25.run``. It holds the whole corpus's tokens in memory.
    """
    return BM25Index(documents, k1, b).run(queries, depth)
