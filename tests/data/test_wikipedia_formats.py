"""Wikipedia readers on synthetic files in the real formats: a MediaWiki XML export and the HF parquet release.

Every sentence here is invented; only the markup and the file layouts are Wikipedia's.
"""

from __future__ import annotations

import bz2
import random
import re
import time
import tracemalloc
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_files import export_xml, page_xml

from lit_docemb.data.core.document import Section
from lit_docemb.data.corpora.wikipedia_formats import (
    _remove_templates,
    iter_wikipedia_parquet,
    iter_wikipedia_xml,
    iter_xml_pages,
    looks_like_heading,
    normalize_title,
    wikipedia_record_to_document,
    wikitext_to_document,
)

# ---------------------------------------------------------------------------------------------------------------------
# MediaWiki XML export
# ---------------------------------------------------------------------------------------------------------------------

HILLS = """{{Short description|Fictional range of hills}}
{{Infobox hills
| name = Quenning Hills
| highest = {{convert|512|m|ft}}
| map = {{Location map|Nowhere|label={{small|Quenning}}}}
}}
'''Quenning Hills''' are a range of [[Low hill|low hills]] in the imaginary county of [[Brindlemarsh]].\
<ref name="atlas">{{cite book|title=Atlas of Nowhere|year=1999}}</ref> They are known for ''glowing'' \
[[zorblat_mineral#Deposits|zorblat]] deposits.<ref>A plain footnote.</ref>
[[File:Quenning view.jpg|thumb|left|The hills seen from [[Brindlemarsh]] at [[Dusk (time)|dusk]]]]
<!-- editors: keep this lead short -->

== History ==
Shepherds grazed sheep here for centuries.<ref name="atlas" /> A survey in 1802 is described at \
[http://example.org/survey the county archive].

=== Early settlement ===
The first village was [[Oldmoor]].

{| class="wikitable"
|-
! Year !! Population
|-
| 1802 || {{nts|40}}
|}
Population figures are uncertain.

== Geology ==
The rock is mostly [[Sandstone]] and [[Basalt|volcanic basalt]].

== See also ==
* [[List of imaginary hills]]

== References ==
{{Reflist}}

== External links ==
* [http://example.org Official site]

[[Category:Imaginary hills]]
[[Category:Brindlemarsh|Quenning]]
"""

ZORBLAT = """{{Infobox mineral|name=Zorblat|formula={{chem|Zr|2}}}}
'''Zorblat''' (also ''zorblatite''; {{lang-xx|Zorbl}}) is a soft mineral.<ref group="note">Named by \
[[Anna Quill]].</ref> It was catalogued by [[Anna Quill|the collector Quill]] in the [[Quenning Hills]].\
&nbsp;Its colour is &quot;pale&quot;.
__NOTOC__
== Properties ==
=== Optical ===
Under [[blue light]] it appears <span style="color:green">green</span>.<br />Some samples glow.
# First observation
# Second observation
=== Hardness ===
It scratches [[glass]] easily.
== Occurrence in [[Brindlemarsh]] ==
Deposits lie near the [[:Category:Imaginary hills|imaginary hills]] and [[wikt:ridge|ridges]].
== Notes ==
{{notelist}}
[[Category:Minerals]]
[[de:Zorblat]]
"""


@pytest.fixture(scope="module")
def dump_path(tmp_path_factory):
    pages = [
        page_xml("Quenning Hills", 101, HILLS),
        page_xml("Quenning", 102, "#REDIRECT [[Quenning Hills]]\n\n{{R from short name}}", redirect="Quenning Hills"),
        page_xml("Talk:Quenning Hills", 103, "Is the atlas reliable?\n== Naming ==\nWho named the hills?", ns=1),
        page_xml("Zorblat mineral", 104, ZORBLAT),
        page_xml("Hill list stub", 105, "{{Disambiguation}}\n<!-- nothing yet -->\n[[Category:Stubs]]"),
    ]
    path = tmp_path_factory.mktemp("dump") / "enwiki-20240101-pages-articles1.xml-p1p105.bz2"
    with bz2.open(path, "wt", encoding="utf-8") as f:
        f.write(export_xml(pages))
    return str(path)


def test_xml_dump_articles_sections_links_categories(dump_path):
    stats = Counter()
    hills, zorblat = list(iter_wikipedia_xml(dump_path, stats=stats))
    assert stats == Counter({"document": 2, "redirect": 1, "non_article_namespace": 1, "empty": 1})

    assert (hills.id, hills.title) == ("wiki:101", "Quenning Hills")
    assert hills.sections == [
        Section("", "Quenning Hills are a range of low hills in the imaginary county of Brindlemarsh. "
                    "They are known for glowing zorblat deposits."),
        Section("History", "Shepherds grazed sheep here for centuries. "
                           "A survey in 1802 is described at the county archive."),
        Section("History / Early settlement", "The first village was Oldmoor.\n\nPopulation figures are uncertain."),
        Section("Geology", "The rock is mostly Sandstone and volcanic basalt."),
    ]
    # Dusk (time) is only in the dropped file caption; See also's link is kept although its section is not.
    assert hills.metadata["links"] == ["Low hill", "Brindlemarsh", "Zorblat mineral", "Oldmoor", "Sandstone",
                                       "Basalt", "List of imaginary hills"]
    assert hills.metadata["categories"] == ["Imaginary hills", "Brindlemarsh"]

    assert zorblat.sections == [
        Section("", 'Zorblat (also zorblatite) is a soft mineral. It was catalogued by the collector Quill in the '
                    'Quenning Hills. Its colour is "pale".'),
        Section("Properties / Optical",
                "Under blue light it appears green. Some samples glow.\nFirst observation\nSecond observation"),
        Section("Properties / Hardness", "It scratches glass easily."),
        Section("Occurrence in Brindlemarsh", "Deposits lie near the imaginary hills and ridges."),
    ]
    assert zorblat.metadata["links"] == ["Anna Quill", "Quenning Hills", "Blue light", "Glass", "Brindlemarsh"]
    assert zorblat.metadata["categories"] == ["Minerals"]


def test_xml_dump_namespaces_and_redirects_on_request(dump_path):
    stats = Counter()
    documents = {d.title: d for d in iter_wikipedia_xml(dump_path, namespaces=None, skip_redirects=False,
                                                         stats=stats)}
    assert stats == Counter({"document": 4, "empty": 1})
    assert documents["Talk:Quenning Hills"].sections == [Section("", "Is the atlas reliable?"),
                                                         Section("Naming", "Who named the hills?")]
    assert documents["Quenning"].sections == []
    assert documents["Quenning"].metadata["redirect"] == "Quenning Hills"


def test_datamodule_counts_the_skips_of_every_dump_file(dump_path, tmp_path, caplog):
    from lit_docemb.data.corpora.wikipedia import WikipediaDataModule

    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "enwiki-pages-articles1.xml.bz2").write_bytes(open(dump_path, "rb").read())
    with bz2.open(folder / "enwiki-pages-articles2.xml.bz2", "wt", encoding="utf-8") as f:
        f.write(export_xml([page_xml("Plain page", 201, "Plain words here."),
                            page_xml("Plain", 202, "#REDIRECT [[Plain page]]", redirect="Plain page"),
                            page_xml("Talk:Plain page", 203, "Talk words.", ns=1)]))
    for _ in ("built", "cached"):
        dm = WikipediaDataModule(str(folder), cache_dir=str(tmp_path / "cache"), val_fraction=0.0)
        caplog.clear()
        with caplog.at_level("INFO", logger="lit_docemb.data.core.datamodule"):
            dm.setup()
        assert sorted(dm.all_set.documents.ids) == ["wiki:101", "wiki:104", "wiki:201"]
        assert dm.stats == Counter(document=3, redirect=2, non_article_namespace=2, empty=1)
        assert [(r.levelname, r.getMessage()) for r in caplog.records] == [(
            "WARNING", "WikipediaDataModule documents: read 3 documents (train 3, validation 0); skipped 5 "
                       "(empty 1, non_article_namespace 2, redirect 2)")]


def test_xml_pages_any_schema_version_plain_and_without_ns(tmp_path):
    # export-0.11 namespace, plain .xml; the second page has no <ns> (old schemas): namespace from its title.
    path = tmp_path / "pages.xml"
    path.write_text(export_xml([page_xml("Plain page", 1, "Plain words here."),
                                page_xml("Talk:Plain page", 2, "Talk words.", ns=None)], version="0.11"))
    pages = list(iter_xml_pages(str(path)))
    assert [(p.title, p.namespace, p.page_id, p.text) for p in pages] == [
        ("Plain page", 0, "1", "Plain words here."), ("Talk:Plain page", 1, "2", "Talk words.")]
    assert [d.sections for d in iter_wikipedia_xml(str(path))] == [[Section("", "Plain words here.")]]


def test_xml_streaming_memory_is_bounded(tmp_path):
    def peak_bytes(n_pages: int) -> int:
        path = tmp_path / f"many{n_pages}.xml.bz2"
        with bz2.open(path, "wt", encoding="utf-8") as f:
            f.write(export_xml([page_xml(f"Page {i}", i + 1, f"Sentence number {i} of the set. " * 20)
                                for i in range(n_pages)]))
        tracemalloc.start()
        count = sum(1 for _ in iter_wikipedia_xml(str(path)))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == n_pages
        return peak

    small, large = peak_bytes(200), peak_bytes(2000)
    assert large < 2 * small, (small, large)  # 10x the pages, not 10x the memory


# ---------------------------------------------------------------------------------------------------------------------
# Wikitext details and robustness
# ---------------------------------------------------------------------------------------------------------------------


def test_link_forms_and_title_normalisation():
    doc = wikitext_to_document("T", 1, "See [[foo_bar#Baz|here]], [[Paris, Texas|]], [[Help:Contents|help]], "
                                       "[[Image:X.png|a [[Nested]] caption]], [[:File:Y.png|the file]] and "
                                       "[[Apple]]s. [[fr:Pomme]]")
    assert doc.text == "See here, Paris, help, the file and Apples."
    assert doc.metadata["links"] == ["Foo bar", "Paris, Texas", "Apple"]
    assert normalize_title(" new_york city#History ") == "New york city"
    assert normalize_title("A|B") == ""


@pytest.mark.parametrize("wikitext, expected", [
    ("Before {{unclosed template|x=1 and after.", "Before unclosed template|x=1 and after."),
    ("Before [[unclosed link and after.", "Before unclosed link and after."),
    ("Before<ref>unclosed ref and after.", "Beforeunclosed ref and after."),
    ("Stray }} closers ]] here.", "Stray closers here."),
    ("Intro.\n{| class=x\n| cell\n== Next ==\nKept text.", "Intro.\n\nKept text."),
    ("{{a|{{b}}}}{{{param|{{c}}}}}Only this.", "Only this."),
    ("Text <!-- unterminated comment hides the rest", "Text"),
])
def test_malformed_wikitext_returns_text(wikitext, expected):
    assert wikitext_to_document("T", 1, wikitext).text == expected


def test_malformed_megabyte_is_linear_time():
    rng = random.Random(0)
    pieces = ["{{", "}}", "[[", "]]", "<ref>", "</ref>", "<ref name=x/>", "{|", "\n|}", "'''", "[http://x.org ",
              "]", "<!--", "-->", "\n== H ==\n", "|", "<span ", ">", "=", "word ", "Word. ", "\n"]
    fuzz = "".join(rng.choice(pieces) for _ in range(150_000))
    for text in (fuzz, "{{a " * 250_000, "[[a|" * 250_000, "<ref>a " * 150_000, "[[" * 250_000 + "]]" * 250_000,
                 "[http://a b " * 90_000, "{|\n|a\n" * 150_000):
        start = time.process_time()  # CPU time of this process: other processes on the machine do not count
        document = wikitext_to_document("T", 1, text)
        assert time.process_time() - start < 15.0, text[:20]  # linear: ~1 s; quadratic: many minutes
        assert isinstance(document.text, str)
    assert "Word." in wikitext_to_document("T", 1, "{{a " * 250_000 + "Word.").text


def _naive_remove_templates(text: str) -> str:
    """Reference: delete innermost {{...}} (no braces inside) until none is left."""
    while True:
        text, n = re.subn(r"\{\{[^{}]*\}\}", "", text)
        if not n:
            return text


def test_template_removal_matches_naive_reference_on_balanced_nesting():
    rng = random.Random(1)

    def balanced(depth: int) -> str:
        parts = []
        for _ in range(rng.randint(0, 3)):
            if depth < 5 and rng.random() < 0.4:
                parts.append("{{" + rng.choice(["t", "cite", "x|"]) + balanced(depth + 1) + "}}")
            else:
                parts.append(rng.choice(["a", "b c", "|", "[[l]]", "=", "\n"]))
        return "".join(parts)

    for _ in range(500):
        text = balanced(0)
        assert _remove_templates(text) == _naive_remove_templates(text), text


def test_random_markup_never_raises():
    rng = random.Random(2)
    alphabet = ["{", "}", "[", "]", "|", "=", "<", ">", "/", "!", "'", ":", "#", "*", "\n", " ", "a", "ref",
                "File:", "Category:", "http://", "&amp;", "-->", "<!--"]
    for _ in range(2000):
        wikitext_to_document("T", 1, "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))


# ---------------------------------------------------------------------------------------------------------------------
# Hugging Face wikimedia/wikipedia parquet
# ---------------------------------------------------------------------------------------------------------------------

GLIMMERFEN = (
    "Glimmerfen is a small marsh in the imaginary county of Brindlemarsh. Herons nest there.\n\n"
    "History\nThe marsh was drained in 1850 and flooded again in 1901.\n\n"
    "Later surveys counted forty ponds.\n\n"
    "Wildlife\n\n"
    "Birds\nHerons, rails and bitterns are common.\nSome winters bring geese.\n\n"
    "See also\nList of imaginary marshes\nBrindlemarsh\n\n"
    "References\n\n"
    "External links\nOfficial marsh society\n\n"
    "Marshes of Brindlemarsh\nImaginary wetlands"
)
RECORDS = [
    {"id": "12", "url": "https://en.wikipedia.org/wiki/Glimmerfen", "title": "Glimmerfen", "text": GLIMMERFEN},
    {"id": "13", "url": "https://en.wikipedia.org/wiki/Pebble%20Cove", "title": "Pebble Cove",
     "text": "Pebble Cove may refer to:\n\nPebble Cove, a bay in the north\nPebble Cove, a village"},
    {"id": "14", "url": "https://en.wikipedia.org/wiki/Blank", "title": "Blank", "text": ""},
]


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory):
    schema = pa.schema([("id", pa.string()), ("url", pa.string()), ("title", pa.string()), ("text", pa.string())])
    path = tmp_path_factory.mktemp("hf") / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(RECORDS, schema=schema), path, row_group_size=2)
    return str(path)


def test_parquet_sections_recovered_and_boilerplate_dropped(parquet_path):
    stats = Counter()
    glimmerfen, cove = list(iter_wikipedia_parquet([parquet_path], batch_size=1, stats=stats))
    assert stats == Counter({"document": 2, "empty": 1})
    assert (glimmerfen.id, glimmerfen.title) == ("wiki:12", "Glimmerfen")
    assert glimmerfen.metadata == {"url": "https://en.wikipedia.org/wiki/Glimmerfen"}
    assert glimmerfen.sections == [
        Section("", "Glimmerfen is a small marsh in the imaginary county of Brindlemarsh. Herons nest there."),
        Section("History", "The marsh was drained in 1850 and flooded again in 1901.\n\n"
                           "Later surveys counted forty ponds."),
        Section("Birds", "Herons, rails and bitterns are common.\nSome winters bring geese."),
    ]
    # "Pebble Cove, a bay in the north" has no final punctuation but follows "...:": a list, not a heading.
    assert cove.sections == [Section("", "Pebble Cove may refer to:\n\n"
                                         "Pebble Cove, a bay in the north\nPebble Cove, a village")]


def test_parquet_boilerplate_is_configurable():
    kept = wikipedia_record_to_document(RECORDS[0], boilerplate_headings=())
    assert [s.heading for s in kept.sections] == ["", "History", "Birds", "See also", "External links",
                                                  "Marshes of Brindlemarsh"]
    assert kept.sections[3].text == "List of imaginary marshes\nBrindlemarsh"


def test_heading_heuristic():
    assert looks_like_heading("Early life and education")
    assert looks_like_heading("Career (1990–2000)")
    assert not looks_like_heading("The marsh was drained in 1850.")
    assert not looks_like_heading("Pebble Cove may refer to:")
    assert not looks_like_heading("lowercase start")
    assert not looks_like_heading("* bullet")
    assert not looks_like_heading("A very long line " * 10)


def test_parquet_random_access_through_datasets(parquet_path, tmp_path):
    datasets = pytest.importorskip("datasets")
    table = datasets.load_dataset("parquet", data_files=[parquet_path], split="train", cache_dir=str(tmp_path))
    assert len(table) == 3
    streamed = next(iter_wikipedia_parquet(parquet_path))
    assert wikipedia_record_to_document(table[0]) == streamed


def test_missing_source_describes_the_layouts(tmp_path):
    from lit_docemb.data.corpora.wikipedia import WikipediaDataModule

    for source in (str(tmp_path / "dumps" / "enwiki"), str(tmp_path)):  # missing local path; folder without files
        with pytest.raises(FileNotFoundError, match=r"(?s)Wikipedia.*parquet.*pages-articles\[N\]\.xml\.bz2"):
            WikipediaDataModule(source, cache_dir=str(tmp_path / "cache")).setup()


def test_truncated_or_malformed_dump_is_counted_or_raises_when_strict(dump_path, tmp_path):
    from lit_docemb.data.core.reading import MalformedInputError
    from lit_docemb.data.corpora.wikipedia import WikipediaDataModule

    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "enwiki-pages-articles1.xml.bz2").write_bytes(open(dump_path, "rb").read())
    pages = [page_xml(f"Plain page {i}", 300 + i, f"Plain words number {i}.") for i in range(50)]
    whole = bz2.compress(export_xml(pages).encode())
    (folder / "enwiki-pages-articles2.xml.bz2").write_bytes(whole[: len(whole) * 3 // 4])  # truncated stream
    broken = export_xml([page_xml("Fine page", 401, "Fine words."), "  <page><title>Broken</titel>\n"])
    (folder / "enwiki-pages-articles3.xml").write_text(broken)  # not well-formed XML
    dm = WikipediaDataModule(str(folder), cache_dir=str(tmp_path / "cache"), val_fraction=0.0)
    dm.setup()
    ids = dm.all_set.documents.ids
    assert dm.stats["corrupt_dump"] == 2
    assert {"wiki:101", "wiki:104", "wiki:401"} <= set(ids)  # what came before the damage is kept
    assert dm.stats["document"] == len(ids) and "wiki:349" not in ids
    with pytest.raises(MalformedInputError, match=r"articles2\.xml\.bz2: corrupt or truncated dump \(Compressed "
                                                  r"file ended.*expected a MediaWiki XML export"):
        WikipediaDataModule(str(folder), cache_dir=str(tmp_path / "cache"), strict=True).setup()
    (folder / "enwiki-pages-articles2.xml.bz2").unlink()
    broken_line = broken.splitlines().index("  <page><title>Broken</titel>") + 1
    with pytest.raises(MalformedInputError, match=rf"articles3\.xml:{broken_line}: corrupt or truncated dump "
                                                  r"\(mismatched tag.*expected a MediaWiki XML export"):
        WikipediaDataModule(str(folder), cache_dir=str(tmp_path / "cache"), strict=True).setup()


def test_undecodable_bytes_in_a_dump_are_replaced_and_counted(tmp_path):
    pages = [page_xml("Caf\u00e9 page", 501, "First caf\u00e9 words."), page_xml("Next page", 502, "Next words.")]
    data = export_xml(pages).encode().replace("First caf\u00e9".encode(), b"First caf\xe9")  # a latin-1 byte
    path = tmp_path / "enwiki-pages-articles.xml"
    path.write_bytes(data)
    stats = Counter()
    documents = {d.title: d for d in iter_wikipedia_xml(str(path), stats=stats)}
    assert documents["Caf\u00e9 page"].sections[0].text == "First caf\ufffd words."
    assert documents["Next page"].sections[0].text == "Next words."
    assert stats == Counter(document=2, undecodable_sequence=1)
