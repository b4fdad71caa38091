"""CoLDE §4.4.3 / Fig. 8: the test documents' sections shuffled (seed paper 003), on invented papers and on the
patents export fixture (Claims + Description)."""

from __future__ import annotations

from corpus_files import write_aan_network, write_google_patents

from lit_docemb.data import AANDataModule, PatentDataModule, SimilarityGroupDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.perturbation import ShuffledSections, shuffle_sections, split_at_headings

PAPER = """Segmenting Invented Meetings
Ada Quill

1 Introduction
Meetings of fern collectors drift between topics.
1.1 Scope
Only invented meetings.

2. Related Work
Moss (1999) counted words.

III. EXPERIMENTS AND RESULTS
We count repeated words across windows.
3 of the windows were empty.
"""


def test_a_paper_text_is_cut_at_its_numbered_top_level_headings():
    sections = split_at_headings(PAPER)
    assert [s.heading for s in sections] == ["", "1 Introduction", "2. Related Work", "III. EXPERIMENTS AND RESULTS"]
    assert "1.1 Scope" in sections[1].text  # a subsection stays inside its section
    assert sections[3].text.endswith("3 of the windows were empty.")  # a sentence starting with a number is text
    assert split_at_headings("No headings here.\nNone at all.") == [Section("", "No headings here.\nNone at all.")]


def test_shuffle_is_a_seeded_permutation_other_than_the_original_order():
    document = Document("p1", sections=[Section("", PAPER)])
    shuffled = shuffle_sections(document, seed=3)
    original = split_at_headings(PAPER)
    assert shuffled.id == "p1" and shuffled.sections != original
    assert sorted(s.heading for s in shuffled.sections) == sorted(s.heading for s in original)
    assert shuffle_sections(document, seed=3) == shuffled  # every model sees the same shuffle
    two = Document("p2", sections=[Section("Claims", "a claim"), Section("Description", "a description")])
    assert [s.heading for s in shuffle_sections(two).sections] == ["Description", "Claims"]
    assert shuffle_sections(Document("p3", sections=[Section("", "one part only")])) is None


def test_matching_split_shuffles_the_test_pairs_only(tmp_path):
    corpus = PatentDataModule(str(write_google_patents(tmp_path / "patents.json.gz", groups=10)),
                              cache_dir=str(tmp_path / "cache"))
    data = SimilarityGroupDataModule(corpus, rule="cpc", val_fraction=0.1, test_fraction=0.1, num_workers=0,
                                     shuffle_test_sections=True)
    data.setup("fit")
    for dataset, order in ((data.val_set, ["Claims", "Description"]), (data.test_set, ["Description", "Claims"])):
        for a, b, _ in dataset.pairs:
            assert [s.heading for s in dataset.documents[a].sections] == order
    assert {doc.sections[0].heading for doc in data.train_set} == {"Claims"}


def test_documents_without_sections_to_shuffle_are_served_as_they_are_and_counted(tmp_path):
    root = write_aan_network(tmp_path / "aan")
    (root / "papers_text" / "P9.txt").write_text(PAPER)
    corpus = AANDataModule(str(root), layout="network", citations_file="acl.txt", cache_dir=str(tmp_path / "cache"),
                           remove_abstract_references=True)
    documents = corpus.load_documents()
    served = ShuffledSections(documents)
    assert served[0] == documents[0] and served[0] == documents[0]  # the other fixture papers have no heading lines
    assert served.stats["unshuffled_document"] == 1
    last = next(i for i in range(len(documents)) if documents[i].id == "aan:P9")  # read as the release's text file
    headings = [section.heading for section in served[last].sections]
    assert sorted(headings) == sorted(["", "1 Introduction", "2. Related Work", "III. EXPERIMENTS AND RESULTS"])
    assert headings != ["", "1 Introduction", "2. Related Work", "III. EXPERIMENTS AND RESULTS"]
