"""The New York Times Annotated Corpus (LDC2008T19) read as LDC ships it: ``nyt_corpus/data/<year>/<month>.tgz``
archives of NITF articles, labelled by DocSplit's five topics (DocSplit Tables 1-2, NYT). Every text is invented."""

from __future__ import annotations

import io
import re
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from corpus_files import labelled_docs, nitf_article, write_nyt_annotated

from lit_docemb.data.corpora.labelled import LabelledTextDataModule
from lit_docemb.data.corpora.nyt_annotated import iter_nyt_annotated, nyt_topic
from lit_docemb.data.core.reading import MalformedInputError, MissingPathError, ReadContext
from lit_docemb.errors import ConfigError


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_nyt_annotated(tmp_path_factory.mktemp("ldc") / "nyt_corpus")


def test_articles_become_titled_documents_labelled_by_their_topic(corpus):
    context = ReadContext()
    documents = list(iter_nyt_annotated(str(corpus), context=context))
    docs = labelled_docs(24)
    # 24 labelled articles and the Arts one; the Opinion article and the two-topic one are counted, not read
    assert len(documents) == 25
    assert Counter(d.label for d in documents) == {"business": 12, "sports": 12, "arts": 1}
    assert context.stats == {"outside_the_topics": 1, "several_topics": 1}
    sentences = docs[0].text.split(" again. ")
    first = next(d for d in documents if d.id == "0000011")  # labelled_docs' first, 1987/01/01
    assert first.label == "business" and first.title == "The compiler and the compiler"
    assert first.text.split("\n\n") == [f"{sentences[0]} again. {sentences[1]} again.",
                                         f"{sentences[2]} again. {sentences[3]} again.",
                                         f"{sentences[4]} again. {sentences[5]}"]
    assert first.metadata == {"online_sections": "Business", "published": "19870101T000000"}
    third = next(d for d in documents if d.id == "1840002")  # no full-text block: its lead paragraph only
    assert third.label == "business" and third.text == ". ".join(docs[2].text.split(". ")[:2]) + "."
    assert third.metadata["published"] == "20070615T000000"
    # archive order: 1987/01 (its members in archive order) before 2007/06
    ids = [d.id for d in documents]
    assert ids[:3] == ["0000011", "0000048", "0000122"] and all(i.startswith("184") for i in ids[16:])


def test_taxonomic_classifiers_label_by_path_prefix(corpus):
    topics = {"business": ["Top/News/Business"], "arts": ["Top/Features/Arts"], "sports": ["Top/News/Sports"]}
    context = ReadContext()
    documents = list(iter_nyt_annotated(str(corpus), "taxonomic_classifier", topics, context=context))
    arts = [d for d in documents if d.label == "arts"]
    assert len(arts) == 1 and arts[0].metadata["taxonomic_classifier"] == "Top/Features/Arts/Music"
    assert context.stats == {"outside_the_topics": 1, "several_topics": 1}
    assert nyt_topic(["Top/News/Business/Markets"], topics) == ["business"]
    assert nyt_topic(["Top/News/BusinessDay"], topics) == []  # a prefix of the name, not of the path


def test_the_sample_is_a_seeded_draw_independent_of_archive_order(corpus, tmp_path):
    sample = [d.id for d in iter_nyt_annotated(str(corpus), sample_size=10, seed=3, context=ReadContext())]
    assert len(sample) == 10 and sample == sorted(sample, key=[d.id for d in iter_nyt_annotated(
        str(corpus), context=ReadContext())].index)
    other = [d.id for d in iter_nyt_annotated(str(corpus), sample_size=10, seed=4, context=ReadContext())]
    assert set(other) != set(sample)
    unpacked = tmp_path / "unpacked"  # the same articles unpacked, in another path order: the same draw
    for archive in sorted((corpus / "data").rglob("*.tgz"), reverse=True):
        with tarfile.open(archive) as handle:
            handle.extractall(unpacked / f"z{archive.parent.name}" / archive.stem, filter="data")
    context = ReadContext()
    assert {d.id for d in iter_nyt_annotated(str(unpacked), sample_size=10, seed=3, context=context)} == set(sample)
    assert context.stats["left_out_of_the_sample"] == 15


def test_bad_articles_are_counted_and_bad_archives_named(tmp_path):
    root = tmp_path / "nyt_corpus"
    (root / "data" / "1990").mkdir(parents=True)
    good = nitf_article("0400001", "19900301", "Ships", ["The harbour and the wave again."], "Sports", [])
    with tarfile.open(root / "data" / "1990" / "03.tgz", "w:gz") as handle:
        for name, text in [("03/01/0400001.xml", good), ("03/01/0400002.xml", "<nitf><head>"),
                           ("03/01/0400003.xml", "<nitf><head/><body/></nitf>")]:
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            handle.addfile(info, io.BytesIO(text.encode()))
    context = ReadContext()
    assert [d.id for d in iter_nyt_annotated(str(root), context=context)] == ["0400001"]
    assert context.stats == {"malformed_record": 2}
    with pytest.raises(MalformedInputError, match=r"0400002\.xml: not well-formed XML"):
        list(iter_nyt_annotated(str(root), context=ReadContext(strict=True)))
    with pytest.raises(MalformedInputError, match="no article of the topics"):
        list(iter_nyt_annotated(str(root), topics={"arts": ["Arts"]}, context=ReadContext()))
    (root / "data" / "1990" / "04.tgz").write_bytes(b"not gzip")
    with pytest.raises(MalformedInputError, match=r"04\.tgz: not a readable \.tgz archive"):
        list(iter_nyt_annotated(str(root), context=ReadContext()))


def test_datamodule_holds_validation_and_test_out_per_topic(corpus, tmp_path):
    dm = LabelledTextDataModule(source=str(corpus), source_format="nyt_annotated", label_column="online_sections",
                                test_split=None, val_fraction=0.2, test_fraction=0.2, stratified=True,
                                batch_size=4, num_workers=0, cache_dir=str(tmp_path / "cache"))
    dm.collate_fn = list
    dm.setup("fit")
    sizes = {name: Counter(d.label for d in split) for name, split in
             [("train", dm.train_set), ("val", dm.val_set), ("test", dm.test_set)]}
    assert sizes["test"] == {"business": 2, "sports": 2} and sizes["val"] == {"business": 2, "sports": 2}
    assert sizes["train"] == {"business": 8, "sports": 8, "arts": 1}
    assert dm.stats["outside_the_topics"] == 1 and dm.stats["several_topics"] == 1
    assert len(next(iter(dm.test_dataloader()))) == 4


@pytest.mark.parametrize(("options", "message"), [
    ({"label_column": "label"}, "label_column: must be one of ['online_sections', 'taxonomic_classifier', 'desk']"),
    ({"sample_size": 0}, "sample_size: must be >= 1 or null"),
    ({"topics": {"arts": []}}, "topics: must be a mapping of topic -> non-empty list"),
    ({"source_format": "csv"}, "topics and sample_size belong to source_format: nyt_annotated"),
])
def test_bad_options_are_named(options, message):
    arguments = {"source": "data/nyt_corpus", "source_format": "nyt_annotated", "label_column": "online_sections",
                 "sample_size": 13081, **options}
    with pytest.raises(ConfigError, match=re.escape(message)):
        LabelledTextDataModule(**arguments)


def test_a_missing_corpus_is_named(tmp_path):
    dm = LabelledTextDataModule(source=str(tmp_path / "nyt_corpus"), source_format="nyt_annotated",
                                label_column="online_sections", test_split=None, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(MissingPathError, match="NYT Annotated Corpus folder"):
        dm.setup("fit")
