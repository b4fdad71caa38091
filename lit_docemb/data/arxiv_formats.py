"""Readers for the two arXiv formats: the long-document classification set and the metadata snapshot.

**Long-document classification set** (He et al. 2019, "Long document classification from local word
glimpses via recurrent attention learning", IEEE Access; often called arXiv-11): 11 subject classes
(``cs.AI cs.CE cs.CV cs.DS cs.IT cs.NE cs.PL cs.SY math.AC math.GR math.ST``), the full text of each paper in
one ``.txt`` file, one folder per class: ``<root>/<class>/<paper>.txt`` (the release,
github.com/LiqunW/Long-document-dataset, ships one ``<class>.rar`` per class; some copies name the vision folder
``cs.cv``). Document id ``arxiv11:<class>/<file>``, label = the folder name as it is, one untitled section (the
release has no section markup).

**Metadata snapshot** (``arxiv-metadata-oai-snapshot.json``, Kaggle ``Cornell-University/arxiv``, about 2.5M
lines): JSON lines with ``id, submitter, authors, title, comments, journal-ref, doi, report-no, categories,
license, abstract, versions, update_date, authors_parsed``. Each record becomes a document with id
``arxiv:<id>``, ``title`` = the title, two sections ``Title`` | ``Abstract`` (CTPE splits a document at this
boundary), label = the first category, and ``metadata`` holding ``categories`` (list), ``authors``,
``update_date`` and ``doi`` when present. Hard line wraps are joined (whitespace collapsed); LaTeX is left as is.

Bad input: a line that is not a JSON object, or lacks a string ``id``, or has a non-string title, abstract
or categories is skipped and counted (``"malformed_line"``) or raises under ``strict``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lit_docemb.data.document import Document, Section
from lit_docemb.data.labelled_formats import iter_class_folders
from lit_docemb.data.reading import ReadContext, read_lines

METADATA_EXPECTED = 'one JSON object per line with a string "id" and string "title", "abstract", "categories"'
_METADATA_KEYS = ("authors", "update_date", "doi")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def arxiv_record_to_document(record: dict[str, Any]) -> Document:
    """One snapshot record → Document (see the module docstring); raises ValueError on a bad record."""
    arxiv_id = record.get("id")
    if not isinstance(arxiv_id, str) or not arxiv_id.strip():
        raise ValueError('no string "id"')
    fields = {key: record.get(key) or "" for key in ("title", "abstract", "categories")}
    bad = [key for key, value in fields.items() if not isinstance(value, str)]
    if bad:
        raise ValueError(f"non-string {bad}")
    title, abstract = _one_line(fields["title"]), _one_line(fields["abstract"])
    categories = fields["categories"].split()
    metadata: dict[str, Any] = {"categories": categories}
    metadata.update({key: record[key] for key in _METADATA_KEYS if isinstance(record.get(key), str) and record[key]})
    sections = [Section(heading, text) for heading, text in (("Title", title), ("Abstract", abstract)) if text]
    return Document(id=f"arxiv:{arxiv_id.strip()}", title=title, sections=sections,
                    label=categories[0] if categories else None, metadata=metadata)


def iter_arxiv_metadata(path: str, category_prefixes: list[str] | None = None, *,
                        context: ReadContext) -> Iterator[Document]:
    """Streams the snapshot in file order.

    Args:
        path: ``arxiv-metadata-oai-snapshot.json`` (or a ``.gz``/``.bz2``/``.xz`` of it).
        category_prefixes: Keep only papers with a category starting with one of these (``["cs."]``);
            the others are counted as ``"category_filtered"``.
    """
    prefixes = tuple(category_prefixes or ())
    for line_no, line in read_lines(path, context):
        if not line.strip():
            continue
        try:
            record = context.json(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            document = arxiv_record_to_document(record)
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            context.malformed(f"{path}:{line_no}", str(err), METADATA_EXPECTED, key="malformed_line")
            continue
        if prefixes and not any(c.startswith(prefixes) for c in document.metadata["categories"]):
            context.stats["category_filtered"] += 1
        elif context.keep(document):
            yield document


def iter_arxiv_classification(root: str, classes: list[str] | None = None, *,
                              context: ReadContext) -> Iterator[Document]:
    """Streams ``<root>/<class>/<paper>.txt`` in path order (see the module docstring)."""
    yield from iter_class_folders(root, classes, id_prefix="arxiv11:", context=context)
