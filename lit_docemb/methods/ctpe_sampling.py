"""CTPE's negative sampling (seed 004): the partner document d_j of an uncoupled pair, uniform (§3.2,
Algorithm 1: d_j = random(D)) or TF-IDF sampling (§4.7, CTPE_T: d_j = random(random(T100(d_i, D)),
random(D)), i.e. with probability 1/2 one of d_i's 100 most TF-IDF-similar documents, else uniform).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.feature_extraction.text import TfidfVectorizer

from lit_docemb.data.document import Document


def tfidf_neighbours(texts: Sequence[str], k: int = 100, chunk_size: int = 1024) -> np.ndarray:
    """(N, min(k, N - 1)) int64: row i holds the indices of the k texts most similar to text i by the cosine
    of their TF-IDF vectors (scikit-learn's defaults), best first, never i itself."""
    if len(texts) < 2:
        raise ValueError(f"TF-IDF neighbours need at least 2 documents, got {len(texts)}")
    k = min(k, len(texts) - 1)
    matrix = TfidfVectorizer().fit_transform(texts)  # (N, V), rows L2-normalised
    rows = []
    for start in range(0, len(texts), chunk_size):
        scores = (matrix[start:start + chunk_size] @ matrix.T).toarray()  # (C, N)
        scores[np.arange(len(scores)), np.arange(start, start + len(scores))] = -np.inf  # never itself
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (C, k), unordered
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        rows.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(rows).astype(np.int64)


class PartnerSampler:
    """Draws, for a document of ``corpus``, another document of ``corpus`` as its negative partner.

    Picklable (it runs in dataloader workers); the draws come from the generator passed in.

    Args:
        corpus: The documents partners come from (indexable).
        ids: ``ids[i]`` is the id of ``corpus[i]``.
        neighbours: Optional (N, k) TF-IDF neighbour indices (:func:`tfidf_neighbours`).
        neighbour_probability: With ``neighbours``, the chance that a partner comes from the document's neighbour
            list rather than uniformly from the corpus (§4.7's random(random(T100), random(D)): 0.5).
    """

    def __init__(self, corpus: Sequence[Document], ids: Sequence[str], neighbours: np.ndarray | None = None,
                 neighbour_probability: float = 0.5) -> None:
        if not 0.0 <= neighbour_probability <= 1.0:
            raise ValueError(f"neighbour_probability must be in [0, 1], got {neighbour_probability}")
        if len(ids) != len(corpus):
            raise ValueError(f"{len(ids)} ids for {len(corpus)} documents")
        if neighbours is not None and len(neighbours) != len(corpus):
            raise ValueError(f"{len(neighbours)} neighbour rows for {len(corpus)} documents")
        self.corpus = corpus
        self.row_of = {doc_id: row for row, doc_id in enumerate(ids)}
        self.neighbours = neighbours
        self.neighbour_probability = neighbour_probability

    def __len__(self) -> int:
        return len(self.corpus)

    def partner_row(self, doc_id: str, generator: torch.Generator) -> int | None:
        """The corpus row of a partner for ``doc_id`` (never its own row); ``None`` when the corpus holds no
        other document."""
        row = self.row_of.get(doc_id)
        n = len(self.corpus)
        if n - (row is not None) < 1:
            return None
        from_neighbours = self.neighbours is not None and row is not None
        if from_neighbours and float(torch.rand((), generator=generator)) < self.neighbour_probability:
            choices = self.neighbours[row]
            return int(choices[int(torch.randint(len(choices), (), generator=generator))])
        if row is None:
            return int(torch.randint(n, (), generator=generator))
        other = int(torch.randint(n - 1, (), generator=generator))
        return other + (other >= row)  # uniform over the rows other than ``row``

    def partner(self, doc_id: str, generator: torch.Generator) -> Document | None:
        row = self.partner_row(doc_id, generator)
        return None if row is None else self.corpus[row]
