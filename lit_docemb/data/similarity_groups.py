"""Similarity groups of CoLDE §4.1.1 as document labels, built from a corpus DataModule's metadata.

* ``"citations"`` (AAN network corpus, ``metadata["citations"]``): papers in id order; a paper and the papers
  it cites that no earlier group took form a group ("articles cited by the parent article are treated as
  similar samples; sets of similar articles are given the same labels"), kept when it has at least two papers.
  Then as many other papers as were grouped are drawn at random (seeded) as the irrelevant ones ("for every
  similar sample, an irrelevant article is randomly chosen"), each its own group.
* ``"link_jaccard"`` (Wikipedia, ``metadata["links"]``): two articles are similar when the Jaccard similarity
  of their outgoing-link sets is above ``min_link_jaccard`` (0.5); only articles with at least
  ``min_similar`` (2) similar articles are kept, and the connected components of the similarity links among
  them are the groups (found exactly by prefix filtering, :func:`~lit_docemb.data.aan_formats.coupled_pairs`).

Readings where the paper is silent: groups are disjoint (a paper cited by two parents joins the first one's);
components rather than cliques (a chain of similar articles is one group).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from lit_docemb.data.aan_formats import coupled_pairs
from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.data.document import Document

log = logging.getLogger(__name__)

Rule = Literal["citations", "link_jaccard"]


def citation_groups(documents: Sequence[Document], seed: int = 0) -> dict[str, str]:
    """``{document id: group label}`` of the grouped papers and as many random irrelevant ones."""
    ids = {doc.id for doc in documents}
    label: dict[str, str] = {}
    for doc in sorted(documents, key=lambda d: d.id):
        if doc.id in label:
            continue
        members = [doc.id] + [c for c in sorted(set(doc.metadata.get("citations", ())))
                              if c in ids and c not in label and c != doc.id]
        if len(members) >= 2:
            label.update((member, f"cites:{doc.id}") for member in members)
    others = sorted(ids - set(label))
    irrelevant = random.Random(seed).sample(others, min(len(label), len(others)))
    return label | {paper: f"single:{paper}" for paper in irrelevant}


def link_jaccard_groups(documents: Sequence[Document], min_link_jaccard: float = 0.5,
                        min_similar: int = 2) -> dict[str, str]:
    """``{document id: group label}`` of the articles with at least ``min_similar`` articles whose link sets
    have Jaccard similarity above ``min_link_jaccard``; groups are the components of those links."""
    links = {doc.id: set(doc.metadata.get("links", ())) for doc in documents}
    links = {i: s for i, s in links.items() if s}
    pairs = [(a, b) for a, b in coupled_pairs(links, min_link_jaccard)
             if len(links[a] & links[b]) > min_link_jaccard * len(links[a] | links[b])]  # strictly above
    degree: dict[str, int] = {}
    for a, b in pairs:
        degree[a], degree[b] = degree.get(a, 0) + 1, degree.get(b, 0) + 1
    kept = {i for i, d in degree.items() if d >= min_similar}
    parent = {i: i for i in kept}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        if a in kept and b in kept:
            ra, rb = root(a), root(b)
            parent[max(ra, rb)] = min(ra, rb)
    return {i: f"links:{root(i)}" for i in kept}


class GroupedDocuments(Sequence):
    """The documents of a corpus that have a group, each with ``label`` set to it (read lazily)."""

    def __init__(self, documents: Sequence[Document], indices: list[int], labels: list[str]) -> None:
        self.documents, self.indices, self.labels = documents, indices, labels

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return GroupedDocuments(self.documents, self.indices[i], self.labels[i])
        return replace(self.documents[self.indices[i]], label=self.labels[i])


class SimilarityGroupDataModule(DocumentDataModule):
    """A corpus DataModule's documents labelled with their CoLDE similarity group (see the module docstring),
    for CoLDE's supervised contrastive training. The other documents are left out (counted).

    Args:
        corpus: The DataModule that reads the corpus (``AANDataModule`` with the network layout for
            ``"citations"``, ``WikipediaDataModule`` for ``"link_jaccard"``); only its documents are used.
        rule: ``"citations"`` or ``"link_jaccard"``.
        min_link_jaccard: ``"link_jaccard"``: link-set Jaccard similarity that two similar articles exceed.
        min_similar: ``"link_jaccard"``: similar articles an article needs to be kept.
        **kwargs: See :class:`~lit_docemb.data.datamodule.DocumentDataModule` (batching and splits).
    """

    def __init__(self, corpus: DocumentDataModule, rule: Rule = "citations", min_link_jaccard: float = 0.5,
                 min_similar: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        if rule not in ("citations", "link_jaccard"):
            raise ValueError(f"rule must be 'citations' or 'link_jaccard', got {rule!r}")
        self.corpus, self.rule = corpus, rule
        self.min_link_jaccard, self.min_similar = min_link_jaccard, min_similar

    def load_documents(self) -> GroupedDocuments:
        documents = self.corpus.load_documents()
        self.stats.update(self.corpus.stats)
        usable = [doc for doc in documents if not doc.is_empty()]
        groups = citation_groups(usable, self.seed) if self.rule == "citations" else link_jaccard_groups(
            usable, self.min_link_jaccard, self.min_similar)
        if not groups:
            raise ValueError(f"{type(self).__name__}: rule {self.rule!r} found no similarity group among "
                             f"{len(usable)} documents (does the corpus keep metadata['citations'/'links']?)")
        indices = [i for i, doc in enumerate(documents) if doc.id in groups]
        self.stats["document_without_group"] += len(documents) - len(indices)
        log.info("%s: %d documents in %d similarity groups (%s)", type(self).__name__, len(indices),
                 len(set(groups.values())), self.rule)
        return GroupedDocuments(documents, indices, [groups[documents[i].id] for i in indices])
