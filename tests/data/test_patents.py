"""CoLDE's PAT set (seed paper 003 §4.1.1): patents of a Google Patents Public Data export (the publications table as
newline-delimited JSON, gzipped) as Claims + Description documents with their CPC codes, and the ``cpc`` similarity
rule that stands in for the unpublished annotator labels. Every patent text here is invented."""

from __future__ import annotations

import pytest
from corpus_files import write_google_patents

from lit_docemb.data import PatentDataModule, SimilarityGroupDataModule
from lit_docemb.data.corpora.similarity_groups import cpc_prefix
from lit_docemb.errors import ConfigError


def test_export_lines_become_claims_and_description_documents_with_their_cpc_codes(tmp_path):
    source = write_google_patents(tmp_path / "export" / "publications-000000000000.json.gz")
    data = PatentDataModule(str(tmp_path / "export"), cache_dir=str(tmp_path / "cache"))
    documents = data.load_documents()
    by_id = {documents[i].id: documents[i] for i in range(len(documents))}
    assert len(by_id) == 23 and "DE-1-A1" not in by_id  # 18 grouped, 4 single, 1 without code; German: empty
    first = by_id["US-9000000-B2"]
    assert [s.heading for s in first.sections] == ["Claims", "Description"] and first.title == "Device 0"
    assert first.sections[0].text.startswith("1. A device of group 0.")
    assert "Eine" not in first.sections[1].text and "abstract" not in first.text  # English only, no abstract
    assert first.metadata["cpc"] == ["G06F1/1", "Y02D10/00"]  # the first-listed code first
    assert data.stats["malformed_record"] == 2 and data.stats["empty_document"] == 1
    with_abstract = PatentDataModule(str(source), sections=["abstract", "claims"], cache_dir=str(tmp_path / "cache"))
    assert with_abstract.load_documents()[0].sections[0].text == "An abstract about group 0."


def test_bad_settings_and_a_missing_export_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="sections"):
        PatentDataModule(str(tmp_path), sections=["claims", "drawings"])
    with pytest.raises(ConfigError, match="cpc_level"):
        SimilarityGroupDataModule(PatentDataModule(str(tmp_path)), rule="cpc", cpc_level="class")
    with pytest.raises(ConfigError, match="shuffle_test_sections"):  # no test pairs to perturb
        SimilarityGroupDataModule(PatentDataModule(str(tmp_path)), rule="cpc", shuffle_test_sections=True)
    with pytest.raises(FileNotFoundError, match="publications"):
        PatentDataModule(str(tmp_path / "nothing.json")).load_documents()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .json"):
        PatentDataModule(str(tmp_path / "empty")).load_documents()


def test_cpc_prefix_levels():
    assert cpc_prefix("G06F16/3347", "subclass") == "G06F"
    assert cpc_prefix("G06F16/3347", "group") == "G06F16"
    assert cpc_prefix("G06F16/3347", "subgroup") == "G06F16/3347"


def test_cpc_groups_split_80_10_10_with_balanced_matching_pairs(tmp_path):
    corpus = PatentDataModule(str(write_google_patents(tmp_path / "patents.json.gz", groups=10)),
                              cache_dir=str(tmp_path / "cache"))
    data = SimilarityGroupDataModule(corpus, rule="cpc", val_fraction=0.1, test_fraction=0.1, num_workers=0)
    data.setup("fit")
    # eight of the ten CPC groups and two of the four single patents train; the patent without code has no group
    assert len(data.train_set) == 8 * 3 + 2
    trained = {doc.label for doc in data.train_set}
    held_out = {dataset.documents[a].label for dataset in (data.val_set, data.test_set) for a, _, _ in dataset.pairs}
    assert len(trained & {f"cpc:G06F{g}" for g in range(1, 11)}) == 8 and not trained & held_out
    for dataset in (data.val_set, data.test_set):
        docs = dataset.documents
        assert len(dataset) == 4  # one group of three: two links from its first patent, one negative (single) each
        for a, b, label in dataset.pairs:
            same = cpc_prefix(docs[a].metadata["cpc"][0]) == cpc_prefix(docs[b].metadata["cpc"][0])
            assert same == bool(label) == (docs[a].label == docs[b].label)
    subgroups = SimilarityGroupDataModule(corpus, rule="cpc", cpc_level="subgroup", test_fraction=0.1,
                                          val_fraction=0.1, num_workers=0)
    with pytest.raises(ValueError, match="no similarity link"):  # every first code differs at subgroup level
        subgroups.setup("fit")
