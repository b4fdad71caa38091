"""Robust04DataModule on fixture files in the real TREC formats: Disks 4 & 5 SGML (plain, gzip and
unix-compress), a TREC topics file, TREC qrels and a folds file. Every article, topic text and id is invented;
only the markup and the layouts are TREC's."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from corpus_files import lzw_compress, write_robust04

from lit_docemb.data.retrieval.bm25 import bm25_run
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.reading import MalformedInputError
from lit_docemb.data.retrieval.datamodule import RetrievalExample
from lit_docemb.data.corpora.robust04 import (
    Robust04DataModule,
    iter_trec_documents,
    parse_trec_document,
    read_trec_topics,
    unlzw,
)
from lit_docemb.data.retrieval.trec import write_run
from lit_docemb.errors import ConfigError


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return write_robust04(tmp_path_factory.mktemp("robust04"))


def _datamodule(root: Path, tmp_path: Path, **kwargs) -> Robust04DataModule:
    return Robust04DataModule([str(root / "disk4"), str(root / "disk5")], topics=str(root / "04.testset"),
                              qrels=str(root / "qrels.robust2004.txt"), folds=str(root / "folds.json"),
                              cache_dir=str(tmp_path / "cache"), num_workers=0, **kwargs)


@pytest.mark.parametrize("max_bits", [12, 16])
def test_unlzw_decodes_compress_output_with_width_changes_and_clear(max_bits):
    rng = random.Random(max_bits)
    words = ["quill", "harbor", "tin", "oak", "lantern", "mist", "copper", "reed"]
    text = " ".join(rng.choice(words) for _ in range(40_000)).encode()
    noise = bytes(rng.randrange(256) for _ in range(90_000))  # fills the 16-bit table
    for data in (b"a", b"abababababab", text, noise):
        for clear_at in (frozenset(), frozenset({len(data) // 3, len(data) // 2})):
            compressed = lzw_compress(data, max_bits, clear_at)
            assert unlzw(compressed) == data
            if shutil.which("gzip"):  # the reference decoder agrees that this is valid .Z data
                assert subprocess.run(["gzip", "-dc"], input=compressed, capture_output=True).stdout == data
    with pytest.raises(ValueError, match="not unix-compress"):
        unlzw(b"plain text")
    with pytest.raises(ValueError, match="corrupt"):
        unlzw(b"\x1f\x9d\x90" + (97 | 300 << 9).to_bytes(3, "little"))  # "a", then an unknown code


def test_sgml_documents_from_every_collection_and_compression(root):
    stats: Counter = Counter()
    files = sorted(str(p) for p in root.rglob("*") if p.is_file() and p.parent.name != "robust04")
    docs = {d.id: d for d in iter_trec_documents([f for f in files if "disk" in f], stats)}
    assert len(docs) == 22 and "CR93E-1" not in docs and docs["LA010289-0004"].is_empty()
    assert docs["FT911-2"].title == "FT 14 MAY 91 / News on beekeeping"
    assert docs["FT911-2"].text == "Article 2 reports on beekeeping in an invented town.\n\n" \
                                   "A second paragraph about beekeeping follows."
    assert docs["FBIS3-1"].title == "Bulletin on lighthouse"
    assert docs["FBIS3-1"].text.startswith("Language: English Article Type:BFN\n\n[Text] Article 1 reports")
    assert docs["LA010103-0001"].title == "A STORY OF TRAMWAY" and "caption" not in docs["LA010103-0001"].text
    assert docs["LA010103-0001"].text.count("\n\n") == 1
    fr = docs["FR940104-0-00004"]  # read from the unix-compressed file
    assert fr.title == "Rules on salt marsh" and "PJG" not in fr.text and "Non-binding & brief." in fr.text
    assert docs["LA010289-0003"].title == "CAFÉ NEWS" and "A café in Latin-1 bytes." in docs["LA010289-0003"].text
    assert stats == Counter(excluded_document=1, file_without_documents=1, unterminated_document=1,
                            document_without_docno=1, line_outside_document=1, line_decoded_with_fallback_encoding=2)
    with pytest.raises(MalformedInputError, match=r"LA010289, line 1: <DOC> without </DOC>; expected <DOC>"):
        list(iter_trec_documents([str(root / "disk5/LATIMES/LA010289")], Counter(), strict=True))
    replaced: Counter = Counter()
    list(iter_trec_documents([str(root / "disk5/LATIMES/LA010289")], replaced, fallback_encoding=None))
    assert replaced["undecodable_line"] == 2
    assert parse_trec_document("<DOC>\n<TEXT>no number</TEXT>\n</DOC>") is None


def test_topics_fields_numbers_and_bad_records(root, tmp_path):
    stats: Counter = Counter()
    topics = read_trec_topics(root / "04.testset", "title", stats)
    assert len(topics) == 10 and stats == Counter(malformed_topic=1)
    assert topics["301"].text == "lighthouse news" and "305" in topics  # "0305" -> "305"
    assert topics["602"].fields["desc"] == "Find reports about beekeeping."
    assert topics["602"].fields["narr"] == "A relevant document discusses beekeeping in any town."
    assert read_trec_topics(root / "04.testset", "desc")["303"].text == "Find reports about tramway."
    assert read_trec_topics(root / "04.testset", "title+desc")["303"].text == "tramway news Find reports about tramway."
    with pytest.raises(MalformedInputError, match=r"04\.testset, line \d+: missing <num> or <title>"):
        read_trec_topics(root / "04.testset", "title", strict=True)
    (tmp_path / "cut").write_text("<top>\n<num> Number: 1\n<title> one\n</top>\n<top>\n<num> Number: 2\n")
    stats = Counter()
    assert list(read_trec_topics(tmp_path / "cut", stats=stats)) == ["1"]
    assert stats == Counter(unterminated_topic=1)


def test_folds_make_the_splits_and_negatives_are_uniform_and_never_relevant(root, tmp_path):
    dm = _datamodule(root, tmp_path, mode="retrieval", test_fold=2, batch_size=4)
    dm.collate_fn = list
    dm.setup()
    assert set(dm.test_set.query_ids) == {"302", "602"} and set(dm.val_set.query_ids) == {"303", "603"}
    assert set(dm.train_set.query_ids) == {"301", "601", "304", "604", "305", "605"}
    assert len(dm.train_set) == 6 * 4 and dm.stats["topics/qrels_topic_not_in_folds"] == 1
    assert dm.stats["topics/malformed_topic"] == 1
    theme_of = {d: k for k in range(1, 6) for d in (f"FT911-{k}", f"FBIS3-{k}", f"LA0101{k:02d}-0001",
                                                     f"FR940104-0-{k:05d}")}
    for i in range(len(dm.train_set)):
        example = dm.train_set[(1, i)]
        k = int(example.query_id) % 100
        assert theme_of[example.positive.id] == k and len(example.negatives) == 8  # the paper's 8 uniform
        assert all(theme_of.get(d.id) != k for d in example.negatives)
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 4 and all(isinstance(e, RetrievalExample) for e in batch)
    assert len(next(iter(dm.test_dataloader()))) == 4


def test_bm25_run_negatives_and_documents_mode(root, tmp_path):
    dm = _datamodule(root, tmp_path, mode="retrieval", negatives="run", val_fold=None)
    with pytest.raises(FileNotFoundError, match="needs a run file for the train split"):
        dm.setup()
    corpus = _datamodule(root, tmp_path, val_fraction=0.2, batch_size=5)
    corpus.collate_fn = list
    corpus.setup()
    assert len(corpus.train_set) + len(corpus.val_set) == 21  # 22 parsed, the empty one dropped and counted
    assert corpus.stats["excluded_document"] == 1 and corpus.stats["empty_document"] == 1
    batch = next(iter(corpus.train_dataloader()))
    assert len(batch) == 5 and all(isinstance(d, Document) for d in batch)
    documents = [corpus.all_set[i] for i in range(len(corpus.all_set))]
    topics = read_trec_topics(root / "04.testset")
    write_run(bm25_run(documents, topics, depth=10), tmp_path / "bm25.run")
    dm = _datamodule(root, tmp_path, mode="retrieval", negatives="run", negatives_run=str(tmp_path / "bm25.run"),
                     num_negatives=2, val_fold=None)
    dm.setup()
    assert len(dm.val_set) == 0
    run = {}
    for line in (tmp_path / "bm25.run").read_text().splitlines():
        run.setdefault(line.split()[0], set()).add(line.split()[2])
    for i in range(len(dm.train_set)):
        example = dm.train_set[i]
        negatives = {d.id for d in example.negatives}
        assert not any(d.endswith(f"-{int(example.query_id) % 100}") for d in negatives if d.startswith("FT"))
        assert len(negatives - run[example.query_id]) <= 2  # from the run unless its pool ran short


def test_parallel_parsing_gives_the_same_corpus_and_counts(root, tmp_path):
    one = _datamodule(root, tmp_path / "one")
    two = _datamodule(root, tmp_path / "two", num_proc=2)
    one.setup()
    two.setup()
    assert sorted(one.all_set.documents.ids) == sorted(two.all_set.documents.ids) and one.stats == two.stats


def test_missing_inputs(root, tmp_path):
    with pytest.raises(FileNotFoundError, match="expected TREC Disks 4 & 5 document files"):
        Robust04DataModule([str(tmp_path / "no_disk")], cache_dir=str(tmp_path / "cache")).setup()
    with pytest.raises(ValueError, match="needs topics, folds"):
        Robust04DataModule([str(root / "disk4")], qrels="q", mode="retrieval", cache_dir=str(tmp_path / "c")).setup()
    with pytest.raises(ValueError, match="test_fold != val_fold"):
        _datamodule(root, tmp_path, mode="retrieval", test_fold=6).setup()


def test_an_empty_fold_is_refused_only_where_it_is_used(root, tmp_path):
    folds = json.loads((root / "folds.json").read_text()) + [[]]  # a sixth fold, empty
    (tmp_path / "folds6.json").write_text(json.dumps(folds))

    def datamodule(**kwargs) -> Robust04DataModule:
        return Robust04DataModule([str(root / "disk4"), str(root / "disk5")], topics=str(root / "04.testset"),
                                  qrels=str(root / "qrels.robust2004.txt"), folds=str(tmp_path / "folds6.json"),
                                  cache_dir=str(tmp_path / "cache"), num_workers=0, mode="retrieval", **kwargs)

    dm = datamodule(test_fold=2)
    dm.setup()
    assert set(dm.test_set.query_ids) == {"302", "602"} and set(dm.val_set.query_ids) == {"303", "603"}
    assert set(dm.train_set.query_ids) == {"301", "601", "304", "604", "305", "605"}
    with pytest.raises(ConfigError, match=r"^data\.init_args\.test_fold: fold 6 of .*folds6\.json is empty"):
        datamodule(test_fold=6).setup()
    with pytest.raises(ConfigError, match=r"^data\.init_args\.val_fold: fold 6 of .*folds6\.json is empty"):
        datamodule(test_fold=5).setup()  # val_fold "next": the empty sixth
