"""WIKIRDataModule on a fixture collection in the wikIR release layout (documents.csv, <split>/queries.csv,
<split>/qrels, <split>/BM25.res). All text is invented; only the layout and formats are wikIR's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from corpus_files import _write_wikir

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import MalformedInputError
from lit_docemb.data.retrieval.datamodule import RetrievalExample
from lit_docemb.data.corpora.wikir import WIKIRDataModule, iter_wikir_documents, wikir_sections


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return _write_wikir(tmp_path_factory.mktemp("wikir"))


def test_documents_and_sections(root):
    stats: Counter = Counter()
    docs = {d.id: d for d in iter_wikir_documents([str(root / "documents.csv")], stats)}
    assert stats == Counter(malformed_document_row=1, undecodable_line=1)
    assert docs["103"].text == "a caf\ufffd by the ridge"
    assert len(docs) == 27 and docs["0"].title == "" and len(docs["0"].sections) == 1
    assert docs["0"].text.startswith("pebble tundra saffron") and docs["0"].text.endswith("entry 0")
    assert [s.heading for s in docs["100"].sections] == ["", "Geography", "History"]
    assert docs["100"].sections[2].text == "Surveyors mapped it in an imagined year; their notes were lost."
    assert docs["102"].is_empty()
    assert wikir_sections("flat  text\twith spacing ") == [Section("", "flat text with spacing")]


def test_documents_mode_batch_and_counts(root, tmp_path):
    dm = WIKIRDataModule(str(root), cache_dir=str(tmp_path / "cache"), batch_size=3, num_workers=0,
                         val_fraction=0.1)
    dm.collate_fn = list
    dm.setup()
    assert dm.stats == Counter(malformed_document_row=1, empty_document=1, undecodable_line=1)
    assert len(dm.train_set) + len(dm.val_set) == 26
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 3 and all(isinstance(d, Document) for d in batch)


def test_retrieval_mode_with_bm25_negatives(root, tmp_path):
    dm = WIKIRDataModule(str(root), mode="retrieval", num_negatives=4, cache_dir=str(tmp_path / "cache"),
                         batch_size=4, num_workers=0)
    dm.collate_fn = list
    dm.setup()
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (12, 4, 4)  # 2 relevant per query
    assert dm.stats["train/relevant_document_missing_from_corpus"] == 6
    for i in range(len(dm.train_set)):
        example = dm.train_set[(2, i)]
        q = int(example.query_id)
        negatives = {int(d.id) for d in example.negatives}
        assert int(example.positive.id) in (q, q + 12) and len(negatives) == 4
        assert not negatives & {q, q + 12}  # never a judged-relevant document
        assert negatives <= {(q + j) % 24 for j in range(16)}  # from the BM25 run
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 4 and all(isinstance(e, RetrievalExample) for e in batch)
    assert {e.query_id for e in next(iter(dm.test_dataloader()))} <= {"8", "9"}


def test_own_article_only_as_positive(root, tmp_path):
    dm = WIKIRDataModule(str(root), mode="retrieval", min_positive_relevance=2, negatives_depth=3,
                         cache_dir=str(tmp_path / "cache"), val_split=None, test_split=None)
    dm.setup()
    assert len(dm.train_set) == 6 and len(dm.val_set) == 0
    for i in range(6):
        example = dm.train_set[i]
        q = int(example.query_id)
        assert example.positive.id == str(q)
        # the run's top 3 are q, q+1, q+2; q is relevant, so the single negative is q+1 or q+2 -- never q+12
        assert int(example.negatives[0].id) in (q + 1, q + 2)


def test_bad_layouts_and_strict_mode(root, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"(?s)documents\.csv.*<split>/queries\.csv"):
        WIKIRDataModule(str(tmp_path / "nothing")).setup()
    with pytest.raises(MalformedInputError, match=r"documents\.csv, line 35: 3 field\(s\); expected a CSV row"):
        WIKIRDataModule(str(root), strict=True, cache_dir=str(tmp_path / "cache")).setup()
    dm = WIKIRDataModule(str(root), mode="retrieval", train_split="train", cache_dir=str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match=r"(?s)train does not exist.*<split>/qrels"):
        dm.setup()


def test_truncated_corpus_counts_the_judgements_it_loses(root, tmp_path):
    dm = WIKIRDataModule(str(root), mode="retrieval", negatives="uniform", max_documents=18, val_split=None,
                         test_split=None, cache_dir=str(tmp_path / "cache"))
    dm.setup()
    assert len(dm.corpus) == 18 and dm.corpus[17].id == "17"
    # training queries 0..5 keep their articles 0..5 and 12..17; the lost judgements are the six '9999' ones
    assert len(dm.train_set) == 12 and dm.stats["train/relevant_document_missing_from_corpus"] == 6
    for i in range(len(dm.train_set)):
        assert all(int(d.id) < 18 for d in dm.train_set[i].negatives)
