"""Similarity groups of CoLDE §4.1.1 as document labels, built from a corpus DataModule's metadata.

* ``"citations"`` (AAN network corpus, ``metadata["citations"]``): papers in id order; a paper and the papers
  it cites that no earlier group took form a group ("articles cited by the parent article are treated as
  similar samples; sets of similar articles are given the same labels"), kept when it has at least two papers.
  Then as many other papers as were grouped are drawn at random (seeded) as the irrelevant ones ("for every
  similar sample, an irrelevant article is randomly chosen"), each its own group.
* ``"link_jaccard"`` (Wikipedia, ``metadata["links"]``): two articles are similar when the Jaccard similarity
  of their outgoing-link sets is above ``min_link_jaccard`` (0.5); only articles with at least
  ``min_similar`` (2) similar articles are kept, and the connected components of the similarity links among
  them are the groups (found exactly by prefix filtering, :func:`~lit_docemb.data.corpora.aan_formats.coupled_pairs`).

* ``"cpc"`` (patents, ``metadata["cpc"]``, :class:`~lit_docemb.data.corpora.patents.PatentDataModule`): the paper's PAT
  labels (three annotators judging pairs by abstract, claims and CPC codes, majority vote) are not published, so
  patents sharing their first CPC code, cut to ``cpc_level`` (``"subclass"`` G06F, ``"group"`` G06F16,
  ``"subgroup"`` G06F16/3347), stand in for the annotators' "similar" (an option of ours, not the paper's data):
  each such set of at least two patents is a group; every other patent is a group of its own (an irrelevant one).

Readings where the paper is silent: groups are disjoint (a paper cited by two parents joins the first one's);
components rather than cliques (a chain of similar articles is one group).

**Matching split** (``test_fraction > 0``; CoLDE §4.1.2 "split into 80-10-10 for train, validation, and test",
§4.2 document matching). The unit of the split is the group (so a group's similarity links stay in one split):
the groups, ordered by a stable hash of their label and the seed, give their first ``val_fraction`` share
(rounded, at least one when the fraction is positive) to validation, the next ``test_fraction`` share to test and
the rest to training; the irrelevant papers (one-paper groups) are shared out the same way. Training yields the
labelled documents of its groups (a batch is ``batch_size`` documents). Validation and test yield
:class:`~lit_docemb.data.corpora.aan.DocumentPair` items: each similarity link inside the split is a positive pair
(``"citations"``: the parent paper and each paper it cites in its group; ``"link_jaccard"``: two kept articles
whose link sets have Jaccard similarity above ``min_link_jaccard``), and for each positive ``(a, b)``,
``negatives_per_positive`` negative pairs ``(a, c)`` with ``c`` drawn at random (seeded) among the split's
documents outside ``a``'s group ("for every similar sample, an irrelevant article is randomly chosen to create a
balanced dataset": 1 is the paper's reading; a positive without any candidate is counted as
``"positive_without_negative"``). :class:`~lit_docemb.eval.matching.ValidationMatching` and ``evaluate
--evaluation matching`` then give precision, recall, F1 and accuracy on the test pairs at the threshold chosen on
the validation pairs. ``shuffle_test_sections`` serves the test pairs' documents with their sections shuffled
(CoLDE §4.4.3, Fig. 8; :mod:`lit_docemb.data.core.perturbation`), the validation pairs and the threshold unchanged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from lit_docemb.data.corpora.aan import PairDataset
from lit_docemb.data.corpora.aan_formats import coupled_pairs
from lit_docemb.data.core.datamodule import DocumentDataModule, DocumentDataset, stable_fraction
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.perturbation import ShuffledSections
from lit_docemb.errors import require

log = logging.getLogger(__name__)

Rule = Literal["citations", "link_jaccard", "cpc"]
CpcLevel = Literal["subclass", "group", "subgroup"]


def cpc_prefix(code: str, level: CpcLevel = "group") -> str:
    """A CPC code (``G06F16/3347``) cut to ``level``: ``"subclass"`` → ``G06F``, ``"group"`` → ``G06F16``,
    ``"subgroup"`` → the whole code."""
    code = code.replace(" ", "")
    if level == "subclass":
        return code[:4]
    return code.split("/", 1)[0] if level == "group" else code


def cpc_groups(documents: Sequence[Document], level: CpcLevel = "group") -> dict[str, str]:
    """``{document id: group label}``: patents whose first CPC code (``metadata["cpc"][0]``) has the same ``level``
    prefix form a group when there are at least two of them; every other patent with a code is its own group."""
    first = {doc.id: cpc_prefix(doc.metadata["cpc"][0], level) for doc in documents if doc.metadata.get("cpc")}
    sizes = Counter(first.values())
    return {doc_id: f"cpc:{code}" if sizes[code] > 1 else f"single:{doc_id}" for doc_id, code in first.items()}


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


def link_jaccard_pairs(documents: Sequence[Document], min_link_jaccard: float = 0.5) -> list[tuple[str, str]]:
    """Sorted pairs ``(a, b)``, ``a < b``, of documents whose outgoing-link sets have Jaccard similarity above
    ``min_link_jaccard``."""
    links = {doc.id: set(doc.metadata.get("links", ())) for doc in documents}
    links = {i: s for i, s in links.items() if s}
    return sorted((a, b) for a, b in coupled_pairs(links, min_link_jaccard)
                  if len(links[a] & links[b]) > min_link_jaccard * len(links[a] | links[b]))  # strictly above


def link_jaccard_groups(documents: Sequence[Document], min_link_jaccard: float = 0.5,
                        min_similar: int = 2) -> dict[str, str]:
    """``{document id: group label}`` of the articles with at least ``min_similar`` articles whose link sets
    have Jaccard similarity above ``min_link_jaccard``; groups are the components of those links."""
    pairs = link_jaccard_pairs(documents, min_link_jaccard)
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


def similarity_links(documents: Sequence[Document], groups: dict[str, str], rule: Rule,
                     min_link_jaccard: float = 0.5) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    """The similarity links inside the groups (the positive matching pairs, see the module docstring), and each
    document's related documents, in a group or not (``"citations"``: what it cites and what cites it;
    ``"link_jaccard"``: every article above the link threshold; ``"cpc"``: the patents of its group and those that
    list its first code among theirs), which are never drawn as its negatives. ``"cpc"`` links: the first patent of a
    group (by id) with each other one, as a citing paper with each paper it cites."""
    related: dict[str, set[str]] = {}
    if rule == "cpc":
        members: dict[str, list[str]] = {}
        for doc_id in sorted(groups):
            if groups[doc_id].startswith("cpc:"):
                members.setdefault(groups[doc_id], []).append(doc_id)
        holders: dict[str, set[str]] = {}
        for doc in documents:
            for code in doc.metadata.get("cpc", ()):
                holders.setdefault(code, set()).add(doc.id)
        for doc in documents:
            codes = doc.metadata.get("cpc") or ()
            related[doc.id] = set(members.get(groups.get(doc.id, ""), ())) | (holders.get(codes[0], set()) if codes
                                                                                else set())
        return sorted((group[0], other) for group in members.values() for other in group[1:]), related
    if rule == "citations":
        for doc in documents:
            related[doc.id] = set(doc.metadata.get("citations", ())) | set(doc.metadata.get("cited_by", ()))
        links = sorted((label.removeprefix("cites:"), member) for member, label in groups.items()
                       if label.startswith("cites:") and label.removeprefix("cites:") != member)
        return links, related
    similar = link_jaccard_pairs(documents, min_link_jaccard)
    for a, b in similar:
        related.setdefault(a, set()).add(b)
        related.setdefault(b, set()).add(a)
    return [(a, b) for a, b in similar if a in groups and groups[a] == groups.get(b)], related


def split_groups(labels: Sequence[str], val_fraction: float, test_fraction: float,
                 seed: int = 0) -> dict[str, str]:
    """``{group label: "train" | "val" | "test"}``: the labels ordered by a stable hash (and ``seed``), the first
    ``round(val_fraction * n)`` (at least one when the fraction is positive and there are enough labels) to
    validation, the next ``round(test_fraction * n)`` to test, the rest to training."""
    ordered = sorted(set(labels), key=lambda label: (stable_fraction(label, seed), label))

    def share(fraction: float) -> int:
        return max(round(fraction * len(ordered)), 1) if fraction > 0 and len(ordered) >= 3 else round(
            fraction * len(ordered))

    val, test = share(val_fraction), share(test_fraction)
    return {label: "val" if k < val else "test" if k < val + test else "train" for k, label in enumerate(ordered)}


def matching_pairs(labels: dict[str, str], links: Sequence[tuple[str, str]], negatives_per_positive: int = 1,
                   seed: int = 0, related: dict[str, set[str]] | None = None) -> tuple[list[tuple[str, str, int]], int]:
    """Positive pairs (``links``) and, for each, ``negatives_per_positive`` negatives ``(a, c, 0)`` with ``c``
    drawn among the documents of ``labels`` outside ``a``'s group and not ``related`` to ``a``; also how many
    positives found no candidate."""
    generator = random.Random(seed)
    ordered = sorted(labels)
    related = related or {}
    pairs, without = [], 0
    for a, b in links:
        pairs.append((a, b, 1))
        excluded = related.get(a, set())
        candidates = [c for c in ordered if labels[c] != labels[a] and c not in excluded]
        if not candidates:
            without += 1
            continue
        pairs += [(a, c, 0) for c in generator.sample(candidates, min(negatives_per_positive, len(candidates)))]
    return pairs, without


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

    @property
    def fingerprint(self) -> str | None:
        """The underlying corpus's fingerprint with these rows and labels (keys the method's token caches without
        reading every document); None when the corpus has none (the caches then hash the documents)."""
        inner = getattr(self.documents, "fingerprint", None)
        if inner is None:
            return None
        key = json.dumps([str(inner), list(map(int, self.indices)), list(self.labels)])
        return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


class SimilarityGroupDataModule(DocumentDataModule):
    """A corpus DataModule's documents labelled with their CoLDE similarity group (see the module docstring),
    for CoLDE's supervised contrastive training. The other documents are left out (counted).

    Args:
        corpus: The DataModule that reads the corpus (``AANDataModule`` with the network layout for
            ``"citations"``, ``WikipediaDataModule`` for ``"link_jaccard"``, ``PatentDataModule`` for ``"cpc"``); only
            its documents are used.
        rule: ``"citations"``, ``"link_jaccard"`` or ``"cpc"`` (see the module docstring).
        cpc_level: ``"cpc"``: the part of the first CPC code that patents of a group share (``"subclass"``,
            ``"group"``, ``"subgroup"``).
        min_link_jaccard: ``"link_jaccard"``: link-set Jaccard similarity that two similar articles exceed.
        min_similar: ``"link_jaccard"``: similar articles an article needs to be kept.
        test_fraction: Share of the groups held out for test: above 0, the matching split of the module
            docstring (validation and test are matching pairs; CoLDE's 80/10/10 is ``val_fraction: 0.1``,
            ``test_fraction: 0.1``); 0 holds out ``val_fraction`` of the documents by id hash, labelled documents.
        negatives_per_positive: Matching split: negative pairs drawn for each positive pair (paper: 1).
        shuffle_test_sections: Matching split: the test pairs' documents have their sections shuffled (Fig. 8's
            text perturbation; ``test`` then scores it at the threshold chosen on the unshuffled validation pairs).
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule` (batching and splits; in the
            matching split ``max_val_documents`` caps the validation pairs).
    """

    def __init__(self, corpus: DocumentDataModule, rule: Rule = "citations", min_link_jaccard: float = 0.5,
                 min_similar: int = 2, test_fraction: float = 0.0, negatives_per_positive: int = 1,
                 cpc_level: CpcLevel = "group", shuffle_test_sections: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        require(rule in ("citations", "link_jaccard", "cpc"), "rule", "'citations', 'link_jaccard' or 'cpc'", rule)
        require(cpc_level in ("subclass", "group", "subgroup"), "cpc_level", "'subclass', 'group' or 'subgroup'",
                cpc_level)
        require(0.0 <= test_fraction < 1.0 and self.val_fraction + test_fraction < 1.0, "test_fraction",
                "in [0, 1) with val_fraction + test_fraction < 1", test_fraction)
        require(negatives_per_positive >= 1, "negatives_per_positive", ">= 1", negatives_per_positive)
        require(not shuffle_test_sections or test_fraction > 0, "shuffle_test_sections",
                "false unless test_fraction > 0 (it perturbs the matching split's test pairs)", shuffle_test_sections)
        self.corpus, self.rule, self.cpc_level = corpus, rule, cpc_level
        self.shuffle_test_sections = shuffle_test_sections
        self.min_link_jaccard, self.min_similar = min_link_jaccard, min_similar
        self.test_fraction, self.negatives_per_positive = test_fraction, negatives_per_positive
        self.test_set: PairDataset | None = None
        self._links: list[tuple[str, str]] = []  # matching split: similarity links, and related documents
        self._related: dict[str, set[str]] = {}

    def load_documents(self) -> GroupedDocuments:
        documents = self.corpus.load_documents()
        self.stats.update(self.corpus.stats)
        usable = [doc for doc in documents if not doc.is_empty()]
        if self.rule == "citations":
            groups = citation_groups(usable, self.seed)
        elif self.rule == "cpc":
            groups = cpc_groups(usable, self.cpc_level)
        else:
            groups = link_jaccard_groups(usable, self.min_link_jaccard, self.min_similar)
        if not groups:
            raise ValueError(f"{type(self).__name__}: rule {self.rule!r} found no similarity group among "
                             f"{len(usable)} documents (does the corpus keep metadata['citations'/'links'/'cpc']?)")
        if self.test_fraction > 0:
            self._links, self._related = similarity_links(usable, groups, self.rule, self.min_link_jaccard)
        indices = [i for i, doc in enumerate(documents) if doc.id in groups]
        self.stats["document_without_group"] += len(documents) - len(indices)
        log.info("%s: %d documents in %d similarity groups (%s)", type(self).__name__, len(indices),
                 len(set(groups.values())), self.rule)
        return GroupedDocuments(documents, indices, [groups[documents[i].id] for i in indices])

    def setup(self, stage: str | None = None) -> None:
        if self.test_fraction == 0 or self.train_set is not None:
            return super().setup(stage)
        documents = self.load_documents()
        if self.max_documents is not None:
            documents = documents[: self.max_documents]
        labels = dict(zip((documents[i].id for i in range(len(documents))), documents.labels, strict=True))
        sizes = Counter(labels.values())
        split = {}
        for several in (True, False):  # groups of similar documents, then the irrelevant one-document groups
            part = [label for label, size in sizes.items() if (size > 1) == several]
            split |= split_groups(part, self.val_fraction, self.test_fraction, self.seed)
        rows = {document_id: row for row, document_id in enumerate(labels)}
        members: dict[str, list[int]] = {"train": [], "val": [], "test": []}
        for document_id, row in rows.items():
            members[split[labels[document_id]]].append(row)
        pair_sets = {}
        for name in ("val", "test"):
            part = {document_id: labels[document_id] for document_id in labels if split[labels[document_id]] == name}
            inside = [(a, b) for a, b in self._links if a in part and b in part]
            pairs, without = matching_pairs(part, inside, self.negatives_per_positive,
                                            self.seed + (name == "test"), self._related)
            self.stats["positive_without_negative"] += without
            if name == "val" and self.max_val_documents is not None:
                pairs = pairs[: self.max_val_documents]
            if not any(label for _, _, label in pairs):
                raise ValueError(f"{type(self).__name__}: the {name} split has no similarity link among its "
                                 f"{len(part)} documents (too few groups for val_fraction={self.val_fraction}, "
                                 f"test_fraction={self.test_fraction}?)")
            served = ShuffledSections(documents, self.seed) if name == "test" and self.shuffle_test_sections else documents
            pair_sets[name] = PairDataset(served, [(rows[a], rows[b], label) for a, b, label in pairs])
        if not members["train"]:
            raise ValueError(f"{type(self).__name__}: no training group among {len(set(labels.values()))}")
        self.documents = documents
        self.train_set = DocumentDataset(documents, members["train"])
        self.val_set, self.test_set = pair_sets["val"], pair_sets["test"]
        self.all_set = DocumentDataset(documents)
        counts = {"train documents": len(members["train"]), "validation pairs": len(self.val_set),
                  "test pairs": len(self.test_set)}
        self.report_reading("matching split", len(documents), counts, self.stats)

    def pair_splits(self) -> bool:
        """The matching split (``test_fraction > 0``): validation and test are pairs of documents."""
        return self.test_fraction > 0

    def test_dataloader(self):
        """Matching split: the test pairs; otherwise the held-out validation documents."""
        return self._loader(self.test_set if self.test_set is not None else self.val_set, "validate", shuffle=False)
