"""The New York Times Annotated Corpus (Sandhaus 2008, LDC2008T19) as LDC ships it, labelled by news topic.

The release (``nyt_corpus/``) holds ``data/<year>/<month>.tgz``, 1987-2007; each archive holds one NITF 3.3 XML
file per article, ``<month>/<day>/<doc id>.xml``. An article is read from its ``<nitf>`` element:

* id: ``head/docdata/doc-id/@id-string``;
* title: the headline ``body/body.head/hedline/hl1`` (else ``head/title``);
* text: the ``<p>`` paragraphs of ``body/body.content/block[@class="full_text"]``, each with its whitespace
  collapsed, one blank line between paragraphs; an article without a full-text block is read from its
  ``lead_paragraph`` block (the corpus's full text starts with the lead paragraph, so both are never joined);
* label: the topic its ``label_field`` values give (:func:`nyt_topic`), ``metadata`` holding the publication
  date and the field's values.

Which field and which topics: DocSplit's Table 1-2 NYT set (13,081 articles, 5 classes, §4.2) cites this corpus
but names neither its classes nor its articles. The count and class number are those of Meng et al.'s NYT topic
set (WeSTClass, 2018: arts, business, politics, science, sports), so :data:`PAPER_TOPICS` gives those five,
each from the corpus's ``online_sections`` values (the newspaper's web sections; politics is the "Washington"
section of those years). Articles with none of the topics' values are skipped and counted
(``"outside_the_topics"``, not a warning: most articles are); articles whose values give two topics are skipped
and counted (``"several_topics"``).
"""

from __future__ import annotations

import heapq
import tarfile
from collections.abc import Iterator
from pathlib import Path

from lit_docemb.data.core.datamodule import stable_fraction
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import MalformedInputError, ReadContext, walk_files

LABEL_FIELDS = ("online_sections", "taxonomic_classifier", "desk")
"""The NITF fields an article may be labelled by: ``<meta name="online_sections">`` (``;``-separated web sections,
e.g. ``Arts; Books``), the ``<classifier type="taxonomic_classifier">`` paths (``Top/News/Business/Markets``)
and ``<meta name="dsk">`` (the newsroom desk, ``Business/Financial Desk``)."""

PAPER_TOPICS = {"arts": ["Arts"], "business": ["Business"], "politics": ["Washington"], "science": ["Science"],
                "sports": ["Sports"]}
"""DocSplit's five NYT classes (see the module docstring) from ``online_sections``."""

EXPECTED = ("an LDC2008T19 folder nyt_corpus/ with data/<year>/<month>.tgz archives of <month>/<day>/<id>.xml NITF "
            "files (or those XML files unpacked)")


def nyt_topic(values: list[str], topics: dict[str, list[str]]) -> list[str]:
    """The topics an article's field values give: a value gives a topic when it equals one of the topic's values
    or lies below it (``Top/News/Business/Markets`` below ``Top/News/Business``). Sorted, without repeats."""
    found = {topic for topic, wanted in topics.items() for value in values for entry in wanted
             if value == entry or value.startswith(entry + "/")}
    return sorted(found)


def _field_values(head, label_field: str) -> list[str]:
    if label_field == "taxonomic_classifier":
        return [" ".join("".join(c.itertext()).split()) for c in head.iter("classifier")
                if c.get("type") == "taxonomic_classifier"]
    name = "dsk" if label_field == "desk" else label_field
    values = [m.get("content") or "" for m in head.iter("meta") if m.get("name") == name]
    if name == "online_sections":
        values = [part for value in values for part in value.split(";")]
    return [v.strip() for v in values if v.strip()]


def _paragraphs(block) -> str:
    paragraphs = (" ".join("".join(p.itertext()).split()) for p in block.iter("p"))
    return "\n\n".join(p for p in paragraphs if p)


def parse_nitf(data: bytes, where: str, label_field: str, topics: dict[str, list[str]],
               context: ReadContext) -> Document | None:
    """One NITF article → Document labelled by its topic, or None (counted) when it is malformed, outside the
    topics or in several.

    Args:
        data: The XML file's bytes.
        where: Its location for messages (``archive!member``).
        label_field: One of :data:`LABEL_FIELDS`.
        topics: Topic → the field values that give it.
        context: Bad-input policy and counters.
    """
    from xml.etree import ElementTree

    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as err:
        context.malformed(where, f"not well-formed XML ({err})", EXPECTED)
        return None
    head, body = root.find("head"), root.find("body")
    doc_id = root.find("head/docdata/doc-id")
    if root.tag != "nitf" or head is None or body is None or doc_id is None or not doc_id.get("id-string"):
        context.malformed(where, "no <nitf> with <head>, <body> and <doc-id id-string>", EXPECTED)
        return None
    values = _field_values(head, label_field)
    found = nyt_topic(values, topics)
    if not found:
        context.stats["outside_the_topics"] += 1
        return None
    if len(found) > 1:
        context.stats["several_topics"] += 1
        return None
    blocks = {block.get("class"): block for block in body.iter("block")}
    text = _paragraphs(blocks["full_text"]) if "full_text" in blocks else ""
    if not text and "lead_paragraph" in blocks:
        text = _paragraphs(blocks["lead_paragraph"])
    headline = body.find("body.head/hedline/hl1")
    title_element = headline if headline is not None else head.find("title")
    title = " ".join("".join(title_element.itertext()).split()) if title_element is not None else ""
    published = root.find("head/pubdata")
    metadata = {label_field: "; ".join(values)}
    if published is not None and published.get("date.publication"):
        metadata["published"] = published.get("date.publication")
    return Document(id=doc_id.get("id-string"), title=title, sections=[Section("", text)], label=found[0],
                    metadata=metadata)


def _nitf_files(root: Path, context: ReadContext) -> Iterator[tuple[str, bytes]]:
    """``(where, bytes)`` of every article under ``root`` (its ``data/`` folder when there is one), archives in
    path order, their members in archive order."""
    base = root / "data" if (root / "data").is_dir() else root
    for path in walk_files(base):
        name = path.name.lower()
        if name.endswith((".tgz", ".tar.gz")):
            try:
                with tarfile.open(path, "r:gz") as archive:
                    for member in archive:
                        if member.isfile() and member.name.lower().endswith(".xml"):
                            handle = archive.extractfile(member)
                            yield f"{path}!{member.name}", handle.read()
            except (tarfile.TarError, OSError, EOFError) as err:
                raise MalformedInputError(f"{path}: not a readable .tgz archive ({err}); expected {EXPECTED}") \
                    from None
        elif name.endswith(".xml"):
            yield str(path), path.read_bytes()


def iter_nyt_annotated(root: str, label_field: str = "online_sections", topics: dict[str, list[str]] | None = None,
                       sample_size: int | None = None, seed: int = 0, *,
                       context: ReadContext) -> Iterator[Document]:
    """The labelled articles of the corpus (see the module docstring), in archive order.

    Args:
        root: The release's ``nyt_corpus`` folder (or any folder of its ``.tgz`` archives or XML files).
        label_field: One of :data:`LABEL_FIELDS`.
        topics: Topic → the field values that give it; ``None``: :data:`PAPER_TOPICS`.
        sample_size: Keep this many labelled articles, those with the smallest seeded hash of their id (a
            uniform draw, the same for a given seed whatever the archive order); ``None`` keeps them all.
        seed: Seed of that draw.
    """
    path = Path(root).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"NYT Annotated Corpus not found at {root!r}: expected {EXPECTED}")
    if label_field not in LABEL_FIELDS:
        raise ValueError(f"label_field {label_field!r}: expected one of {list(LABEL_FIELDS)}")
    topics = PAPER_TOPICS if topics is None else topics
    found = 0
    documents = ((where, parse_nitf(data, where, label_field, topics, context))
                 for where, data in _nitf_files(path, context))
    if sample_size is None:
        for _, document in documents:
            found += document is not None
            if document is not None and context.keep(document):
                yield document
    else:
        kept: list[tuple[float, int, Document]] = []  # a max-heap of the smallest hashes: (-hash, -order, doc)
        for order, (_, document) in enumerate(documents):
            if document is None:
                continue
            found += 1
            item = (-stable_fraction(document.id, seed), -order, document)
            if len(kept) < sample_size:
                heapq.heappush(kept, item)
            elif item > kept[0]:
                heapq.heapreplace(kept, item)
        for _, _, document in sorted(kept, key=lambda item: -item[1]):
            if context.keep(document):
                yield document
        context.stats["left_out_of_the_sample"] += max(found - sample_size, 0)
    if not found:
        raise MalformedInputError(f"{root}: no article of the topics {sorted(topics)} (by {label_field}); expected "
                                  f"{EXPECTED}")
