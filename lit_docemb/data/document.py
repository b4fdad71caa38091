"""The document record every DataModule produces and every method consumes.

A :class:`Document` keeps the structure that long-document methods need: ordered sections (heading + text),
so that Graph-RoBERTa can build its section graph and CoLDE can split on real section boundaries, plus an
optional label and free-form metadata (links, categories, source path...). It is a plain dataclass so it
pickles cheaply into dataloader workers.
"""

from __future__ import annotations

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
        """Builds a document from a JSON record: either ``sections`` ([{heading, text}]) or a flat ``text``."""
        if "sections" in record:
            sections = [Section(s.get("heading", ""), s.get("text", "")) for s in record["sections"]]
        else:
            sections = [Section("", record.get("text", ""))]
        return cls(
            id=str(record["id"]),
            title=record.get("title", "") or "",
            sections=sections,
            label=None if record.get("label") is None else str(record["label"]),
            metadata=record.get("metadata", {}) or {},
        )
