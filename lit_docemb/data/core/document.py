"""The document record every DataModule produces and every method consumes.

A :class:`Document` keeps the structure that long-document methods need: ordered sections (heading + text),
so that Graph-RoBERTa can build its section graph and CoLDE can split on real section boundaries, plus an
optional label and free-form metadata (links, categories, source path...). It is a plain dataclass so it
pickles cheaply into dataloader workers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Section:
    """One section of a document: its heading ("" for the lead or an untitled section) and its body text."""

    heading: str
    text: str


@dataclass
class Document:
    """A document with ordered sections.

    Args:
        id: Corpus-wide unique identifier (kept as a string, e.g. "wiki:12", "D1555982").
        title: Document title ("" if the corpus has none).
        sections: Ordered sections; the lead paragraph of an article is a section with heading "".
        label: Optional class label (classification / clustering sets).
        metadata: Anything else the corpus provides (links, categories, url...).
    """

    id: str
    title: str = ""
    sections: list[Section] = field(default_factory=list)
    label: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """Body text of all sections joined by blank lines (headings excluded)."""
        return "\n\n".join(s.text for s in self.sections if s.text)

    def is_empty(self) -> bool:
        return not any(s.text.strip() for s in self.sections)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Document:
        """Builds a document from a JSON record: either ``sections`` ([{heading, text}]) or a flat ``text``.

        ``id`` is a string or an integer; ``title``, ``text``, a section's ``heading`` and ``text`` are strings
        (``null`` or missing: ""); ``label`` a string, a number or ``null``; ``metadata`` an object or ``null``.
        Any other type raises TypeError naming the field (readers skip and count such records), so that no
        document reaches a collator with a number or a list where its text should be.
        """
        if not isinstance(record, dict):
            raise TypeError(f"a document record is a JSON object, got {type(record).__name__}")
        doc_id = record["id"]
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
            raise TypeError(f"field 'id' must be a string or an integer, got {type(doc_id).__name__}")
        if "sections" in record:
            if not isinstance(record["sections"], list) or not all(isinstance(s, dict) for s in record["sections"]):
                raise TypeError("field 'sections' must be a list of {\"heading\", \"text\"} objects")
            sections = [Section(_string(s, "heading", "sections[].heading"), _string(s, "text", "sections[].text"))
                        for s in record["sections"]]
        else:
            sections = [Section("", _string(record, "text", "text"))]
        label = record.get("label")
        if label is not None and (isinstance(label, bool) or not isinstance(label, str | int | float)):
            raise TypeError(f"field 'label' must be a string, a number or null, got {type(label).__name__}")
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise TypeError(f"field 'metadata' must be an object or null, got {type(metadata).__name__}")
        return cls(id=str(doc_id), title=_string(record, "title", "title"), sections=sections,
                   label=None if label is None else str(label), metadata=metadata)


@dataclass
class Query(Document):
    """A retrieval query, embedded like a document by any method's document collator; a method that embeds
    queries differently tells them apart by this type (Graph-RoBERTa: a single-node graph, §3.3)."""


def query_document(query_id: str, text: str) -> Query:
    """A query as a one-section, untitled :class:`Query` with id ``query:<query_id>``."""
    return Query(f"query:{query_id}", sections=[Section("", text)])


def _string(record: dict[str, Any], key: str, name: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"field {name!r} must be a string or null, got {type(value).__name__}")
    return value


def doc_index(doc_id: str) -> int:
    """A stable signed 63-bit integer for a document id (the same on every rank and worker)."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "big") >> 1
