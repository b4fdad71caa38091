"""AAN readers on fixture files in the real layouts: the Long Range Arena retrieval TSVs (label, id1, id2, text1,
text2 with bytes-literal texts) and the AAN network corpus (papers_text/, acl.txt, acl-metadata.txt).
Every paper text and title here is invented."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from corpus_files import FERNS, OWLS, PEBBLES

from lit_docemb.data.corpora.aan import AANDataModule, DocumentPair
from lit_docemb.data.corpora.aan_formats import (
    coupled_pairs,
    iter_aan_network,
    iter_lra_documents,
)
from lit_docemb.data.core.reading import MalformedInputError, ReadContext
from lit_docemb.errors import ConfigError


@pytest.fixture
def network_dir(tmp_path):
    root = tmp_path / "aan"
    (root / "papers_text").mkdir(parents=True)
    for paper in ["P1", "P2", "P3", "P4", "P5", "P6"]:
        (root / "papers_text" / f"{paper}.txt").write_text(f"Paper {paper} studies invented plants.\n\nIt ends.")
    (root / "papers_text" / "X9.txt").write_text("\n \n")
    citations = ["P1 ==> P2", "P3 ==> R1", "P3 ==> R2", "P3 ==> R3", "P4 ==> R1", "P4 ==> R2", "P4 ==> R3",
                 "P4 ==> R4", "P5 ==> R1", "P5 ==> R9", "P6 ==> P6", "P1 -> P2", "P2 ==> Q7", "P1 ==> P2"]
    (root / "acl.txt").write_text("\n".join(citations) + "\n")
    (root / "acl-metadata.txt").write_text(
        "id = {P1}\nauthor = {Quill, Ada}\ntitle = {Ferns of Nowhere}\nvenue = {Workshop on Imaginary Plants}\n"
        "year = {2001}\n\nid = {P2}\ntitle = {Owls, Briefly}\nthis line is broken\nyear = {2003}\n")
    return root


def test_lra_documents_deduplicated_decoded_and_pairs_kept(lra_dir):
    context = ReadContext()
    paths = {split: str(lra_dir / f"new_aan_pairs.{split}.tsv") for split in ("train", "eval", "test")}
    documents = {d.id: d for d in iter_lra_documents(paths, context=context)}
    assert sorted(documents) == ["aan:P01-0001", "aan:P02-0002", "aan:P03-0003", "aan:P04-0004", "aan:P07-0007",
                                 "aan:P08-0008"]
    assert documents["aan:P01-0001"].text == FERNS  # escapes (\n, \t) decoded
    assert documents["aan:P02-0002"].text == OWLS  # first text kept
    assert documents["aan:P04-0004"].text == PEBBLES + " \ufffd"
    assert documents["aan:P07-0007"].text == "Plain text about otters."
    assert context.stats == Counter(malformed_line=3, empty_document=1, undecodable_record=1,
                                    conflicting_duplicate_text=1)
    assert context.extra["pairs"]["train"] == [
        ["aan:P01-0001", "aan:P02-0002", 1], ["aan:P01-0001", "aan:P03-0003", 0], ["aan:P04-0004", "aan:P02-0002", 1],
        ["aan:P06-0006", "aan:P01-0001", 0], ["aan:P07-0007", "aan:P03-0003", 1]]
    assert context.extra["pairs"]["test"] == [["aan:P08-0008", "aan:P01-0001", 0]]


def test_lra_strict_error_names_file_line_and_format(lra_dir):
    path = str(lra_dir / "new_aan_pairs.train.tsv")
    with pytest.raises(MalformedInputError, match=rf"{path}:3: .*expected 5 tab-separated fields: label"):
        list(iter_lra_documents({"train": path}, context=ReadContext(strict=True)))


def test_pairs_mode_yields_document_pairs_per_lra_split(lra_dir, tmp_path):
    dm = AANDataModule(source=str(lra_dir), mode="pairs", cache_dir=str(tmp_path / "cache"), batch_size=2,
                       num_workers=0)
    dm.collate_fn = list
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (4, 1, 1)
    assert dm.stats["pair_without_document"] == 1  # the pair with the empty paper
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 2 and all(isinstance(p, DocumentPair) for p in batch)
    first = dm.train_set[0]
    assert (first.first.id, first.second.id, first.label) == ("aan:P01-0001", "aan:P02-0002", 1)
    (test_pair,) = next(iter(dm.test_dataloader()))
    assert (test_pair.first.text, test_pair.label) == ("Bridges for goats, revisited.", 0)
    assert len(dm.all_set) == 6


@pytest.mark.parametrize(("splits", "expected"), [(None, 5), (["train", "test"], 6)])
def test_documents_mode_yields_each_paper_of_the_chosen_splits_once(lra_dir, tmp_path, splits, expected):
    dm = AANDataModule(source=str(lra_dir), document_splits=splits, cache_dir=str(tmp_path / "cache"),
                       batch_size=2, num_workers=0, val_fraction=0.0)
    dm.collate_fn = list
    dm.setup("fit")
    assert len(dm.train_set) == expected
    assert len(next(iter(dm.train_dataloader()))) == 2


def test_network_documents_citations_and_similarity(network_dir):
    context = ReadContext()
    documents = {d.id: d for d in iter_aan_network(str(network_dir / "papers_text"), str(network_dir / "acl.txt"),
                                                   str(network_dir / "acl-metadata.txt"), context=context)}
    assert sorted(documents) == [f"aan:P{i}" for i in range(1, 7)]
    p1, p3 = documents["aan:P1"], documents["aan:P3"]
    assert (p1.title, p1.metadata["author"], p1.metadata["year"]) == ("Ferns of Nowhere", "Quill, Ada", "2001")
    assert p1.text == "Paper P1 studies invented plants.\n\nIt ends."
    assert p1.metadata["citations"] == ["aan:P2"] and documents["aan:P2"].metadata["cited_by"] == ["aan:P1"]
    assert p3.metadata["citations"] == ["aan:R1", "aan:R2", "aan:R3"]
    similar = {doc_id: d.metadata["similar"] for doc_id, d in documents.items()}
    assert similar == {"aan:P1": ["aan:P2"], "aan:P2": ["aan:P1"], "aan:P3": ["aan:P4"], "aan:P4": ["aan:P3"],
                       "aan:P5": [], "aan:P6": []}  # P3/P4 share 3 of 4 references; P5 shares only R1
    assert documents["aan:P2"].title == "Owls, Briefly"
    assert context.stats == Counter(citation_outside_corpus=10, malformed_line=2, self_citation=1, empty_document=1)


def test_coupled_pairs_equal_the_all_pairs_definition():
    rng = random.Random(0)
    items = [f"r{i}" for i in range(40)]
    weights = [1 / (i + 1) for i in range(40)]  # skewed: a few items are cited by many papers
    references = {f"p{i:02d}": set(rng.choices(items, weights, k=rng.randint(1, 9))) for i in range(80)}
    for min_jaccard, min_shared in [(0.5, 2), (0.3, 1), (0.8, 1), (1.0, 1), (0.2, 3)]:
        naive = set()
        for a, b in itertools.combinations(sorted(references), 2):
            shared = len(references[a] & references[b])
            if shared >= min_shared and shared / len(references[a] | references[b]) >= min_jaccard:
                naive.add((a, b))
        assert coupled_pairs(references, min_jaccard, min_shared) == naive, (min_jaccard, min_shared)
        assert naive  # the case is not vacuous


def test_network_datamodule_and_bad_paths(network_dir, tmp_path):
    dm = AANDataModule(source=str(network_dir), metadata_file="acl-metadata.txt", cache_dir=str(tmp_path / "cache"),
                       batch_size=3, num_workers=0, val_fraction=0.0)
    dm.collate_fn = list
    dm.setup("fit")
    assert len(dm.train_set) == 6 and dm.stats["self_citation"] == 1
    assert all("similar" in d.metadata for d in next(iter(dm.train_dataloader())))
    with pytest.raises(ValueError, match="mode='pairs' needs the LRA"):
        AANDataModule(source=str(network_dir), mode="pairs", cache_dir=str(tmp_path / "cache")).setup("fit")
    with pytest.raises(FileNotFoundError, match=r"(?s)AAN citation list not found.*'<id> ==> <id>'"):
        AANDataModule(source=str(network_dir), citations_file="release/2014/acl.txt").setup("fit")
    with pytest.raises(FileNotFoundError, match=r"(?s)AAN source not found.*new_aan_pairs"):
        AANDataModule(source=str(tmp_path / "nowhere")).setup("fit")


def test_pairs_mode_fits_on_the_papers_of_its_pairs(lra_dir, tmp_path):
    """``fit_on: papers``: a method that trains on documents (DocSplit) reads each paper of the train / eval pairs
    once; evaluation and test still read the pairs."""
    datamodule = AANDataModule(str(lra_dir), mode="pairs", fit_on="papers", cache_dir=str(tmp_path / "cache"),
                               batch_size=64, num_workers=0)
    datamodule.collate_fn = list
    datamodule.setup("fit")
    for loader, pairs in ((datamodule.train_dataloader(), datamodule.train_set),
                          (datamodule.val_dataloader(), datamodule.val_set)):
        papers = [document.id for batch in loader for document in batch]
        expected = {pairs.documents[i].id for a, b, _ in pairs.pairs for i in (a, b)}
        assert sorted(papers) == sorted(expected) and len(papers) == len(set(papers))
    assert isinstance(next(iter(datamodule.test_dataloader()))[0], DocumentPair)
    with pytest.raises(ConfigError, match="fit_on 'papers'.*only with mode: pairs"):
        AANDataModule(str(lra_dir), fit_on="papers")
