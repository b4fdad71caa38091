"""arXiv readers on fixture files in the real layouts: the He et al. 2019 class folders of full texts and the
``arxiv-metadata-oai-snapshot.json`` JSON lines. Every title, abstract and paper text here is invented."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
from corpus_files import ARXIV_SNAPSHOT_CATEGORIES, labelled_docs, write_arxiv_snapshot

from lit_docemb.data.corpora.arxiv import ArxivDataModule
from lit_docemb.data.corpora.arxiv_formats import (
    CURRENT_ARCHIVES,
    RETIRED_ARCHIVES,
    category_archive,
    iter_arxiv_classification,
    iter_arxiv_metadata,
)
from lit_docemb.data.core.document import Section
from lit_docemb.data.core.reading import MalformedInputError, ReadContext
from lit_docemb.errors import ConfigError


def record(arxiv_id, title, abstract, categories, **extra) -> str:
    fields = {"id": arxiv_id, "submitter": "A. Person", "authors": "A. Person and B. Other", "title": title,
              "comments": "9 pages", "journal-ref": None, "doi": None, "report-no": None, "categories": categories,
              "license": None, "abstract": abstract, "versions": [{"version": "v1", "created": "Mon, 2 Apr 2007"}],
              "update_date": "2008-11-13", "authors_parsed": [["Person", "A.", ""]]}
    return json.dumps({**fields, **extra})


SNAPSHOT_LINES = [
    record("0704.0001", "Counting Pebbles on\n  Imaginary Beaches",
           "  We count pebbles on beaches that do not exist. The count\nis surprisingly large.\n",
           "math.CO cs.DM", doi="10.0000/pebbles"),
    '{"id": "0704.0002", "title": "Broken record",',  # line 2: truncated JSON
    record("0704.0003", "Teaching Kettles to Sing", "  A kettle is trained to whistle\nin tune.\n", "cs.LG stat.ML"),
    "[1, 2, 3]",  # line 4: not an object
    json.dumps({"title": "No identifier here", "abstract": "Lost.", "categories": "cs.AI"}),  # line 5: no id
    record("0704.0006", ["a", "list"], "Wrong type.", "cs.AI"),  # line 6: non-string title
    "",
    record("math/0406007", "", "   ", "math.GR"),  # line 8: empty document
    record("0704.0009", "Bridges That Sway", "  Goats cross rope bridges\ncalmly.\n", "physics.pop-ph"),
]


@pytest.fixture
def snapshot(tmp_path):
    path = tmp_path / "arxiv-metadata-oai-snapshot.json"
    path.write_text("\n".join(SNAPSHOT_LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def classification_root(tmp_path):
    root = tmp_path / "arxiv11"
    papers = {
        "cs.AI/1501.00001.txt": b"Planning with imaginary robots.\n\nThe robots plan to plan.",
        "cs.AI/1501.00002.txt": b"A survey of invented heuristics.",
        "cs.CE/1502.00003.txt": b"Bridge loads in \xe9quations of made-up steel.",
        "math.GR/1503.00004.txt": b"Groups of pebbles form a group.\n\n\n\nProof left to the pebbles.",
        "math.GR/1503.00005.txt": b" \n ",
    }
    for name, data in papers.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "README.txt").write_text("Eleven classes of invented papers.")
    (root / ".DS_Store").write_bytes(b"\x00\x01")
    return root


def test_snapshot_records_become_title_and_abstract_sections(snapshot):
    context = ReadContext()
    documents = list(iter_arxiv_metadata(str(snapshot), context=context))
    assert [d.id for d in documents] == ["arxiv:0704.0001", "arxiv:0704.0003", "arxiv:0704.0009"]
    pebbles = documents[0]
    assert pebbles.title == "Counting Pebbles on Imaginary Beaches"
    assert pebbles.sections == [Section("Title", "Counting Pebbles on Imaginary Beaches"),
                                Section("Abstract", "We count pebbles on beaches that do not exist. The count is "
                                                    "surprisingly large.")]
    assert pebbles.label == "math.CO"
    assert pebbles.metadata == {"categories": ["math.CO", "cs.DM"], "authors": "A. Person and B. Other",
                                "update_date": "2008-11-13", "doi": "10.0000/pebbles"}
    assert context.stats == Counter(malformed_line=4, empty_document=1)


def test_snapshot_strict_error_names_file_line_and_format(snapshot, tmp_path):
    with pytest.raises(MalformedInputError) as error:
        list(iter_arxiv_metadata(str(snapshot), context=ReadContext(strict=True)))
    message = str(error.value)
    assert f"{snapshot}:2:" in message and "one JSON object per line" in message
    dm = ArxivDataModule(source=str(snapshot), strict=True, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(MalformedInputError, match=rf"{snapshot}:2:"):  # the reader's error, not datasets' wrapper
        dm.setup("fit")


def test_snapshot_category_filter_and_compressed_file(tmp_path):
    path = tmp_path / "arxiv-metadata-oai-snapshot.json.gz"
    path.write_bytes(gzip.compress("\n".join(SNAPSHOT_LINES).encode()))
    context = ReadContext()
    documents = list(iter_arxiv_metadata(str(path), category_prefixes=["cs.", "stat."], context=context))
    assert [d.id for d in documents] == ["arxiv:0704.0001", "arxiv:0704.0003"]  # 0704.0001 is also in cs.DM
    assert context.stats["category_filtered"] == 2


def test_classification_folders_give_labels_and_counts(classification_root):
    context = ReadContext()
    documents = list(iter_arxiv_classification(str(classification_root), context=context))
    assert [(d.id, d.label) for d in documents] == [("arxiv11:cs.AI/1501.00001.txt", "cs.AI"),
                                                    ("arxiv11:cs.AI/1501.00002.txt", "cs.AI"),
                                                    ("arxiv11:cs.CE/1502.00003.txt", "cs.CE"),
                                                    ("arxiv11:math.GR/1503.00004.txt", "math.GR")]
    assert documents[3].text == "Groups of pebbles form a group.\n\nProof left to the pebbles."
    assert documents[2].text == "Bridge loads in \ufffdquations of made-up steel."
    assert context.stats == Counter(file_outside_class_folder=1, hidden_file=1, undecodable_record=1,
                                    empty_document=1)
    with pytest.raises(MalformedInputError, match=r"README\.txt: file outside a class folder; expected .*<label>"):
        list(iter_arxiv_classification(str(classification_root), context=ReadContext(strict=True)))
    only_ai = list(iter_arxiv_classification(str(classification_root), classes=["cs.AI"], context=ReadContext()))
    assert {d.label for d in only_ai} == {"cs.AI"}


def test_missing_source_describes_both_layouts(tmp_path):
    dm = ArxivDataModule(source=str(tmp_path / "arxiv-metadata-oai-snapshot.json"))
    with pytest.raises(FileNotFoundError, match=r"(?s)arXiv source not found.*<class>/<paper>\.txt.*JSON lines"):
        dm.setup("fit")


@pytest.mark.parametrize("layout", ["metadata", "classification"])
def test_datamodule_setup_and_batch(layout, snapshot, classification_root, tmp_path):
    source = snapshot if layout == "metadata" else classification_root
    dm = ArxivDataModule(source=str(source), cache_dir=str(tmp_path / "cache"), batch_size=2, num_workers=0,
                         val_fraction=0.0)
    dm.collate_fn = list
    dm.setup("fit")
    assert len(dm.train_set) == (3 if layout == "metadata" else 4)
    assert dm.stats["empty_document"] == 1
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 2 and all(d.label for d in batch)
    if layout == "metadata":
        assert all([s.heading for s in d.sections] == ["Title", "Abstract"] for d in batch)


@pytest.fixture
def many_papers(tmp_path):
    """60 papers in the class-folder layout, enough for three non-empty hash splits."""
    root = tmp_path / "arxiv11_many"
    for i in range(60):
        folder = root / ("cs.AI" if i % 2 else "math.GR")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"1501.{i:05d}.txt").write_text(f"Invented paper number {i} about pebbles and kettles.")
    return root


def test_test_split_is_held_out_apart_from_validation(many_papers, tmp_path):
    datamodule = ArxivDataModule(str(many_papers), val_fraction=0.2, test_fraction=0.3, batch_size=4, num_workers=0,
                                 cache_dir=str(tmp_path / "cache"))
    datamodule.setup("fit")
    train, val, test = ({datamodule.documents[int(i)].id for i in part.indices}
                        for part in (datamodule.train_set, datamodule.val_set, datamodule.test_set))
    assert train and val and test
    assert not train & val and not train & test and not val & test
    assert len(train | val | test) == 60
    assert datamodule.data_stats["test split"]["test"] == len(test)
    datamodule.connect(lambda stage: list)
    assert {d.id for batch in datamodule.test_dataloader() for d in batch} == test


def test_test_without_test_fraction_is_refused(many_papers, tmp_path):
    datamodule = ArxivDataModule(str(many_papers), val_fraction=0.2, batch_size=4, num_workers=0,
                                 cache_dir=str(tmp_path / "cache"))
    datamodule.setup("fit")
    with pytest.raises(ConfigError, match="data.init_args.test_fraction"):
        datamodule.test_dataloader()


def test_archive_labels_are_the_primary_categorys_archive(snapshot):
    documents = list(iter_arxiv_metadata(str(snapshot), label_by="archive", context=ReadContext()))
    assert [(d.id, d.label) for d in documents] == [("arxiv:0704.0001", "math"), ("arxiv:0704.0003", "cs"),
                                                    ("arxiv:0704.0009", "physics")]
    assert documents[0].metadata["categories"] == ["math.CO", "cs.DM"]  # every category kept (multi-label)
    assert [category_archive(c) for c in ("cond-mat.mes-hall", "hep-th", "math-ph", "q-bio.NC", "chao-dyn")] == \
        ["cond-mat", "hep-th", "math-ph", "q-bio", "chao-dyn"]
    assert len(set(CURRENT_ARCHIVES) | set(RETIRED_ARCHIVES)) == 38  # DocSplit's "38 classes"
    with pytest.raises(ValueError, match="label_by 'primary'"):
        list(iter_arxiv_metadata(str(snapshot), label_by="primary", context=ReadContext()))


def test_snapshot_fixture_reads_with_archive_labels_and_a_held_out_test_split(tmp_path):
    snapshot = write_arxiv_snapshot(tmp_path / "arxiv-metadata-oai-snapshot.json")
    dm = ArxivDataModule(source=str(snapshot), label_by="archive", cache_dir=str(tmp_path / "cache"), batch_size=4,
                         num_workers=0, val_fraction=0.25, test_fraction=0.25)
    dm.setup("fit")
    splits = [dm.train_set, dm.val_set, dm.test_set]
    ids = [{dm.documents[int(i)].id for i in split.indices} for split in splits]
    assert sum(map(len, ids)) == 24 and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    labels = {dm.documents[i].label for i in range(24)}
    assert labels == {"cs", "math"}
    paper = dm.documents[0]
    assert [s.heading for s in paper.sections] == ["Title", "Abstract"]
    assert paper.sections[1].text == labelled_docs(1)[0].text  # the hard wrap and leading spaces joined away
    assert paper.metadata["categories"] == ARXIV_SNAPSHOT_CATEGORIES["code"][0].split()
    assert "arxiv:math/0406004" in {dm.documents[i].id for i in range(24)}
    first = ArxivDataModule(source=str(snapshot), cache_dir=str(tmp_path / "cache"), val_fraction=0.0)
    first.setup("fit")  # the same file, the other reading: its own cache, the first categories as labels
    assert {first.documents[i].label for i in range(24)} == {"cs.PL", "cs.SE", "math.GR", "math.DS"}


def test_archive_labels_are_refused_on_the_classification_set(classification_root, tmp_path):
    dm = ArxivDataModule(source=str(classification_root), label_by="archive", cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="label_by 'archive' applies to the metadata snapshot"):
        dm.setup("fit")
    with pytest.raises(ConfigError, match="label_by"):
        ArxivDataModule(source=str(classification_root), label_by="primary")
