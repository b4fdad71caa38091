"""CoLDE's own AAN set and Wikipedia pairs (seed paper 003 §4.1.1, §4.1.2, §4.2): abstract and reference removal
from the AAN release's paper texts, the deterministic group split and the validation/test matching pairs, on
fixtures in the real layouts (papers_text/ + acl.txt; a MediaWiki XML dump). Every paper text here is invented."""

from __future__ import annotations

from collections import Counter

import pytest
from corpus_files import write_aan_network, write_wikipedia_dump

from lit_docemb.data import AANDataModule, SimilarityGroupDataModule, WikipediaDataModule
from lit_docemb.data.corpora.aan_formats import remove_abstract_and_references
from lit_docemb.data.corpora.similarity_groups import matching_pairs, split_groups
from lit_docemb.errors import ConfigError

PAPER = """Segmenting Invented Meetings
Ada Quill
Imaginary University

Abstract
We segment the minutes of invented meetings
into topics with a lexical cohesion score.

1 Introduction
Meetings of fern collectors drift between topics.

2 Method
We count repeated words across windows.

References
Moss, B. 1999. Windows of words. In Proc. of Nowhere.
Owl, C. 2001. Cohesion again.
"""


def test_abstract_and_references_removed_by_their_headings():
    not_found = Counter()
    kept = remove_abstract_and_references(PAPER, not_found)
    assert "Segmenting Invented Meetings" in kept and "Meetings of fern collectors" in kept
    assert "We count repeated words" in kept and "2 Method" in kept
    assert "lexical cohesion score" not in kept and "Abstract" not in kept
    assert "Windows of words" not in kept and "References" not in kept
    assert not not_found
    inline = "Title\nABSTRACT: we study owls\nat night.\n\nOwls hoot.\n\n7 REFERENCES\nHawk 2000.\n"
    assert remove_abstract_and_references(inline) == "Title\n\nOwls hoot.\n"  # no body heading: to the blank line
    plain = "Owls hoot at night.\nAbstractions aside, they fly."
    assert remove_abstract_and_references(plain, not_found) == plain
    assert not_found == {"abstract": 1, "references": 1}


def test_aan_network_corpus_drops_abstracts_and_references_only_when_asked(tmp_path):
    root = write_aan_network(tmp_path / "aan")
    (root / "papers_text" / "P0.txt").write_text(PAPER)
    (root / "papers_text" / "P9.txt").write_text("Abstract\nOnly an abstract.\n\nReferences\nOwl 2001.\n")

    def texts(remove: bool) -> dict[str, str]:
        data = AANDataModule(str(root), layout="network", remove_abstract_references=remove,
                             cache_dir=str(tmp_path / "cache"))
        return {doc.id: doc.text for doc in data.load_documents()}

    whole, stripped = texts(False), texts(True)
    assert "lexical cohesion" in whole["aan:P0"] and "Windows of words" in whole["aan:P0"]
    assert "lexical cohesion" not in stripped["aan:P0"] and "Windows of words" not in stripped["aan:P0"]
    assert "fern collectors" in stripped["aan:P0"]
    assert "aan:P9" in whole and "aan:P9" not in stripped  # nothing left: dropped ("articles without any content")
    assert stripped["aan:P3"] == whole["aan:P3"]  # no headings in the other fixture papers: kept as they are


def test_split_groups_shares_and_is_deterministic():
    labels = [f"group{i}" for i in range(100)]
    split = split_groups(labels, 0.1, 0.1, seed=3)
    assert Counter(split.values()) == {"train": 80, "val": 10, "test": 10}
    assert split == split_groups(list(reversed(labels)), 0.1, 0.1, seed=3)  # order of the input is irrelevant
    assert split != split_groups(labels, 0.1, 0.1, seed=4)
    assert Counter(split_groups(labels[:3], 0.1, 0.1).values()) == {"train": 1, "val": 1, "test": 1}


def test_matching_pairs_balanced_and_never_a_related_negative():
    labels = {"a": "g1", "b": "g1", "c": "g2", "d": "g2", "e": "single:e", "f": "single:f"}
    pairs, without = matching_pairs(labels, [("a", "b"), ("c", "d")], 1, seed=0, related={"a": {"e", "f"}})
    assert without == 0 and [p for p in pairs if p[2] == 1] == [("a", "b", 1), ("c", "d", 1)]
    negatives = [p for p in pairs if p[2] == 0]
    assert len(negatives) == 2 and negatives[0][:2] in {("a", "c"), ("a", "d")}  # e and f are related to a
    assert labels[negatives[1][1]] != "g2"
    three, _ = matching_pairs(labels, [("c", "d")], 3, seed=0)
    assert sum(label == 0 for *_, label in three) == 3
    alone, without = matching_pairs({"a": "g1", "b": "g1"}, [("a", "b")])
    assert alone == [("a", "b", 1)] and without == 1


def aan_split(tmp_path, **kwargs) -> SimilarityGroupDataModule:
    corpus = AANDataModule(str(write_aan_network(tmp_path / "aan")), layout="network", citations_file="acl.txt",
                           cache_dir=str(tmp_path / "cache"))
    data = SimilarityGroupDataModule(corpus, rule="citations", val_fraction=0.3, test_fraction=0.3, num_workers=0,
                                     **kwargs)
    data.setup("fit")
    return data


def test_aan_matching_split_keeps_groups_whole_and_pairs_citation_links(tmp_path):
    data = aan_split(tmp_path, batch_size=4)
    train = {doc.id: doc.label for doc in data.train_set}
    split_of = {doc_id: "train" for doc_id in train}
    for name, dataset in (("val", data.val_set), ("test", data.test_set)):
        docs = dataset.documents
        pairs = [(docs[a], docs[b], label) for a, b, label in dataset.pairs]
        assert sum(label for *_, label in pairs) * 2 == len(pairs)  # one negative per positive (balanced)
        for first, second, label in pairs:
            split_of.setdefault(first.id, name)
            split_of.setdefault(second.id, name)
            assert split_of[first.id] == split_of[second.id] == name  # a document is in one split only
            assert (first.label == second.label) == bool(label)
            if label:  # a citation link: the parent paper cites the other
                assert second.id in first.metadata["citations"]
    assert len(split_of) == 10 and set(split_of.values()) == {"train", "val", "test"}
    groups = {}
    for doc_id, name in split_of.items():
        label = train.get(doc_id) or next(d.label for d in data.all_set if d.id == doc_id)
        groups.setdefault(label, set()).add(name)
    assert all(len(names) == 1 for names in groups.values())  # the unit of the split is the group
    again = aan_split(tmp_path / "again", batch_size=4)
    assert again.val_set.pairs == data.val_set.pairs and again.test_set.pairs == data.test_set.pairs
    data.connect(lambda stage: (lambda items: items))
    assert all(type(item).__name__ == "DocumentPair" for item in next(iter(data.test_dataloader())))


def test_train_batches_count_documents(tmp_path):
    data = aan_split(tmp_path, batch_size=2)
    data.connect(lambda stage: (lambda items: items))
    batches = list(data.train_dataloader())
    assert all(len(batch) <= 2 for batch in batches) and sum(map(len, batches)) == len(data.train_set)
    assert all(doc.label is not None for batch in batches for doc in batch)


def test_wikipedia_link_groups_get_validation_and_test_pairs(tmp_path):
    corpus = WikipediaDataModule(str(write_wikipedia_dump(tmp_path / "enwiki.xml", groups=6)),
                                 cache_dir=str(tmp_path / "cache"))
    data = SimilarityGroupDataModule(corpus, rule="link_jaccard", val_fraction=0.3, test_fraction=0.3,
                                     num_workers=0)
    data.setup("fit")
    assert len(data.train_set) == 8  # two groups of four articles in each split
    for dataset in (data.val_set, data.test_set):
        docs = dataset.documents
        assert len(dataset) == 24  # 4 articles, 6 similar pairs per group, two groups, one negative each
        for a, b, label in dataset.pairs:
            assert (docs[a].label == docs[b].label) == bool(label)
            assert (set(docs[a].metadata["links"]) == set(docs[b].metadata["links"])) == bool(label)


def test_matching_split_bad_fractions_and_too_few_groups(tmp_path):
    corpus = AANDataModule(str(tmp_path), layout="network")
    with pytest.raises(ConfigError, match="test_fraction"):
        SimilarityGroupDataModule(corpus, val_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ConfigError, match="negatives_per_positive"):
        SimilarityGroupDataModule(corpus, test_fraction=0.1, negatives_per_positive=0)
    wiki = WikipediaDataModule(str(write_wikipedia_dump(tmp_path / "enwiki.xml")), cache_dir=str(tmp_path / "c"))
    data = SimilarityGroupDataModule(wiki, rule="link_jaccard", val_fraction=0.3, test_fraction=0.1, num_workers=0)
    with pytest.raises(ValueError, match="the test split has no similarity link"):  # two groups for three splits
        data.setup("fit")
