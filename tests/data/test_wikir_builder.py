"""The WIKIR builder on a MediaWiki dump fixture: wikIR's construction (first-sentence or title queries, the own
article relevant 2, first-sentence links 1, redirects followed), sections kept so the section graph has them, and
the collection read back by WIKIRDataModule."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from corpus_files import WIKIR_TOPICS, export_xml, page_xml, wikir_title, write_wikir_dump

from lit_docemb.data.core.document import Section
from lit_docemb.data.retrieval.trec import read_qrels, read_queries, read_run
from lit_docemb.data.corpora.wikir import WIKIRDataModule, iter_wikir_documents
from lit_docemb.data.corpora.wikir_builder import WikirBuilder, first_sentence_links, structured_text
from lit_docemb.errors import ConfigError

SMALL = {"min_document_words": 40, "validation_queries": 2, "test_queries": 2}


def page_id(i: int) -> str:
    return str(101 + i % 16)


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    return write_wikir_dump(tmp_path_factory.mktemp("dump") / "enwiki-20201220-pages-articles-multistream.xml")


@pytest.fixture(scope="module")
def built(dump, tmp_path_factory) -> tuple[Path, dict]:
    output = tmp_path_factory.mktemp("wikirs") / "wikIRS62k"
    return output, WikirBuilder(str(output), **SMALL).build([str(dump)])


def test_counts_and_record(built, dump):
    output, record = built
    assert record["documents"] == 17 and record["queries"] == {"training": 12, "validation": 2, "test": 2}
    assert record["counts"] == {"document": 17, "redirect": 16, "short_article": 1, "non_article_namespace": 1,
                                "no_first_sentence": 1, "sections_not_recovered": 1}  # Headless Hall: its heading
    assert json.loads((output / "build.json").read_text()) == {**record, "dumps": [str(dump)]}


def test_documents_keep_sections_without_the_first_sentence(built):
    output, _ = built
    documents = {d.id: d for d in iter_wikir_documents([str(output / "documents.csv")], Counter())}
    assert set(documents) == {page_id(i) for i in range(16)} | {"303"}  # not the short article, talk page, redirects
    lantern = documents["101"]
    assert [s.heading for s in lantern.sections] == ["", "History", "Geography / Climate"]
    assert lantern.sections[0].text.startswith("Its keepers trade with The Ember Hall and Nowhere Hall.")
    assert "is a lantern house" not in lantern.text and "Infobox" not in lantern.text and "sources" not in lantern.text
    assert lantern.sections[2].text.startswith("Winter 0 brought lantern snow")


def test_first_sentence_queries_and_link_judgements(built):
    output, _ = built
    queries, qrels = {}, {}
    for split in ("training", "validation", "test"):
        queries.update(read_queries(output / split / "queries.csv"))
        qrels.update(read_qrels(output / split / "qrels"))
    assert len(queries) == 16 and "303" not in queries
    assert queries["101"].text == ("The Lantern Hall is a lantern house near The Orchard Hall, the glacier one, "
                                   "The Violin Halls and Old The Compass Hall.")
    for i in range(16):
        # own article 2; i+1, i+2, i+3 and i+4 (through its redirect) 1; not i+8 (a later sentence), not Nowhere Hall
        assert qrels[page_id(i)] == {page_id(i): 2, **{page_id(i + k): 1 for k in range(1, 5)}}


def test_splits_are_disjoint_and_seeded(built, dump, tmp_path):
    output, _ = built
    ids = {split: list(read_queries(output / split / "queries.csv")) for split in ("training", "validation", "test")}
    assert sum(map(len, ids.values())) == len(set().union(*map(set, ids.values()))) == 16
    again = tmp_path / "again"
    WikirBuilder(str(again), **SMALL).build([str(dump)])
    assert (again / "test" / "queries.csv").read_text() == (output / "test" / "queries.csv").read_text()
    other = tmp_path / "other"
    WikirBuilder(str(other), **SMALL, seed=1).build([str(dump)])
    assert {(other / s / "queries.csv").read_text() for s in ("validation", "test")} != {
        (output / s / "queries.csv").read_text() for s in ("validation", "test")}


def test_bm25_run_ranks_each_query_of_its_split(built):
    output, _ = built
    for split in ("training", "validation", "test"):
        run = read_run(output / split / "BM25.res")
        assert set(run) == set(read_queries(output / split / "queries.csv"))
        assert all(0 < len(ranked) <= 17 for ranked in run.values())
    runs = {}
    for split in ("training", "validation", "test"):
        runs.update(read_run(output / split / "BM25.res"))
    # 'The Lantern Hall is a lantern house near ...' ranks its own article first, though its first sentence is gone
    assert max(runs["101"], key=runs["101"].get) == "101"


def test_title_queries_and_all_links(dump, tmp_path):
    record = WikirBuilder(str(tmp_path / "wikIR62k"), queries="title", links="all", **SMALL).build([str(dump)])
    assert record["queries"]["training"] == 12
    queries, qrels = {}, {}
    for split in ("training", "validation", "test"):
        queries.update(read_queries(tmp_path / "wikIR62k" / split / "queries.csv"))
        qrels.update(read_qrels(tmp_path / "wikIR62k" / split / "qrels"))
    assert {q.text for q in queries.values()} == {wikir_title(i) for i in range(16)}
    assert qrels["105"] == {"105": 2, **{page_id(4 + k): 1 for k in (1, 2, 3, 4, 8)}}


def test_kept_first_sentence_and_strict_thresholds(dump, tmp_path):
    WikirBuilder(str(tmp_path / "kept"), skip_first_sentence=False, **SMALL).build([str(dump)])
    documents = {d.id: d for d in iter_wikir_documents([str(tmp_path / "kept" / "documents.csv")], Counter())}
    assert documents["102"].text.startswith(f"The Orchard Hall is a {WIKIR_TOPICS[1]} house")
    with pytest.raises(ConfigError, match=r"--validation_queries/--test_queries: 0 queries qualify"):
        WikirBuilder(str(tmp_path / "strict"), **{**SMALL, "min_relevant": 7}).build([str(dump)])
    with pytest.raises(ConfigError, match=r"--min_relevant: must be at least 1, got 0"):
        WikirBuilder(str(tmp_path / "zero"), min_relevant=0)


def test_bad_dumps(tmp_path):
    with pytest.raises(FileNotFoundError, match="Wikipedia dump"):
        WikirBuilder(str(tmp_path / "out"), **SMALL).build([str(tmp_path / "missing.xml.bz2")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"--input: no \.xml or \.xml\.bz2 file in"):
        WikirBuilder(str(tmp_path / "out"), **SMALL).build([str(tmp_path / "empty")])
    truncated = tmp_path / "truncated.xml"
    truncated.write_text(export_xml([page_xml("A", 1, "'''A''' is a page.")])[:-40])
    with pytest.raises(ConfigError, match=r"truncated\.xml is not a complete MediaWiki dump"):
        WikirBuilder(str(tmp_path / "out"), **SMALL).build([str(truncated)])


def test_first_sentence_links_skip_templates_and_later_sentences():
    text = "{{Box | a = b. c. | d = e.}}\n'''X''' is near [[Y]]. It is also near [[Z]].\n\n== H ==\nSee [[W]]."
    assert first_sentence_links("X", "1", text, "X is near Y.") == ["Y"]
    assert first_sentence_links("X", "1", text, "X is near Y. It is also near Z.") == ["Y", "Z"]


def test_structured_text_reads_back_as_its_sections():
    from lit_docemb.data.corpora.wikir import wikir_sections

    sections = [Section("", "Lead one.\n\nLead two."), Section("History", "Old times.\n\nMore of them.")]
    assert structured_text(sections) == "Lead one.\nLead two.\n\nHistory\nOld times.\nMore of them."
    assert wikir_sections(structured_text(sections)) == [Section("", "Lead one.\nLead two."),
                                                         Section("History", "Old times.\nMore of them.")]


def test_wikir_datamodule_reads_the_built_collection(built, tmp_path):
    output, _ = built
    dm = WIKIRDataModule(str(output), mode="retrieval", num_negatives=1, cache_dir=str(tmp_path / "cache"),
                         batch_size=4, num_workers=0)
    dm.setup()
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (60, 10, 10)  # 5 relevant per query
    assert max(len(dm.corpus[i].sections) for i in range(len(dm.corpus))) == 3
    qrels = read_qrels(output / "training" / "qrels")
    for i in range(len(dm.train_set)):
        example = dm.train_set[i]
        assert qrels[example.query_id][example.positive.id] >= 1
        assert len(example.negatives) == 1 and example.negatives[0].id not in qrels[example.query_id]
