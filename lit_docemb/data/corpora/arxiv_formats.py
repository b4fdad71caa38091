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
boundary), a label, and ``metadata`` holding ``categories`` (list, every category of the paper, the primary one
first), ``authors``, ``update_date`` and ``doi`` when present. Hard line wraps are joined (whitespace collapsed);
LaTeX is left as is.

The label (``label_by``) is one of two readings of the paper's categories:

* ``"first_category"``: the primary category as listed first (``cs.AI``, ``hep-th``; about 150 classes).
* ``"archive"``: the archive of the primary category, the part before the dot (``cs.AI`` → ``cs``,
  ``cond-mat.mes-hall`` → ``cond-mat``, ``hep-th`` stays ``hep-th``). The snapshot holds 38 archives, 20 current
  (:data:`CURRENT_ARCHIVES`) and 18 retired ones that only old papers carry (:data:`RETIRED_ARCHIVES`): DocSplit's
  "arXiv, 38 classes" (seed paper 001, §4.2; the paper does not name its classes, 38 is the archive count).

Every category of a paper stays in ``metadata["categories"]`` for a multi-label reading; no paper implemented here
scores one (DocSplit reports accuracy and macro-F1 over single labels).

Bad input: a line that is not a JSON object, or lacks a string ``id``, or has a non-string title, abstract
or categories is skipped and counted (``"malformed_line"``) or raises under ``strict``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.corpora.labelled_formats import iter_class_folders
from lit_docemb.data.core.reading import ReadContext, read_lines

METADATA_EXPECTED = 'one JSON object per line with a string "id" and string "title", "abstract", "categories"'
_METADATA_KEYS = ("authors", "update_date", "doi")
LABEL_READINGS = ("first_category", "archive")

CURRENT_ARCHIVES = ("astro-ph", "cond-mat", "cs", "econ", "eess", "gr-qc", "hep-ex", "hep-lat", "hep-ph", "hep-th",
                    "math", "math-ph", "nlin", "nucl-ex", "nucl-th", "physics", "q-bio", "q-fin", "quant-ph", "stat")
"""The 20 archives arXiv files new papers in."""
RETIRED_ARCHIVES = ("acc-phys", "adap-org", "alg-geom", "ao-sci", "atom-ph", "bayes-an", "chao-dyn", "chem-ph",
                    "cmp-lg", "comp-gas", "dg-ga", "funct-an", "mtrl-th", "patt-sol", "plasm-ph", "q-alg", "solv-int",
                    "supr-con")
"""The 18 archives merged into others (1996-2000) whose names old papers of the snapshot still carry."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def category_archive(category: str) -> str:
    """The archive of an arXiv category: the part before the dot (``cs.AI`` → ``cs``, ``hep-th`` → ``hep-th``)."""
    return category.split(".", 1)[0]


def arxiv_record_to_document(record: dict[str, Any], label_by: str = "first_category") -> Document:
    """One snapshot record → Document (see the module docstring); raises ValueError on a bad record.

    Args:
        record: One parsed line of the snapshot.
        label_by: ``"first_category"`` or ``"archive"`` (the module docstring's two readings).
    """
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
                    label=_label(categories, label_by), metadata=metadata)


def _label(categories: list[str], label_by: str) -> str | None:
    if not categories:
        return None
    return category_archive(categories[0]) if label_by == "archive" else categories[0]


def iter_arxiv_metadata(path: str, category_prefixes: list[str] | None = None, label_by: str = "first_category", *,
                        context: ReadContext) -> Iterator[Document]:
    """Streams the snapshot in file order.

    Args:
        path: ``arxiv-metadata-oai-snapshot.json`` (or a ``.gz``/``.bz2``/``.xz`` of it).
        category_prefixes: Keep only papers with a category starting with one of these (``["cs."]``);
            the others are counted as ``"category_filtered"``.
        label_by: ``"first_category"`` or ``"archive"`` (the module docstring's two readings).
    """
    if label_by not in LABEL_READINGS:
        raise ValueError(f"label_by {label_by!r}: expected one of {LABEL_READINGS}")
    prefixes = tuple(category_prefixes or ())
    for line_no, line in read_lines(path, context):
        if not line.strip():
            continue
        try:
            record = context.json(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            document = arxiv_record_to_document(record, label_by)
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
