"""Documents backed by a memory-mapped Hugging Face ``datasets`` table: random access at any corpus size."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from lit_docemb.data.core.document import Document, Section


class ArrowDocuments(Sequence):
    """A lazily converted, indexable view of a ``datasets.Dataset``.

    Rows become :class:`Document` only when indexed (in the dataloader workers), so a corpus of millions of
    documents costs its memory-mapped Arrow file, not Python objects. ``ids`` reads the id column alone.

    Args:
        table: The ``datasets.Dataset``.
        to_document: Row (dict) → Document.
        id_column: Column holding the document id.
    """

    def __init__(self, table, to_document: Callable[[dict[str, Any]], Document], id_column: str = "id") -> None:
        self.table = table
        self.to_document = to_document
        self.id_column = id_column

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ArrowDocuments(self.table.select(range(len(self))[index]), self.to_document, self.id_column)
        return self.to_document(self.table[int(index)])

    def __getitems__(self, indices: Sequence[int]) -> list[Document]:
        """The documents at ``indices``, read from Arrow in one call (the DataLoader's batched read): row by row,
        ``datasets``' formatter costs a call per row, half of a Doc2VecC worker's time on R8."""
        if len(indices) == 0:
            return []
        columns = self.table[[int(i) for i in indices]]  # {column: [values]}
        names = list(columns)
        return [self.to_document(dict(zip(names, values))) for values in zip(*columns.values())]

    def __iter__(self) -> Iterator[Document]:
        for row in self.table:
            yield self.to_document(row)

    @property
    def fingerprint(self) -> str:
        """The table's ``datasets`` fingerprint: the same for every opening of the same cache files (and for the
        same slice of them), different for another conversion. Keys caches derived from this corpus."""
        return self.table._fingerprint

    @property
    def ids(self) -> list[str]:
        """The id column, read through Arrow (3.2M MSMARCO ids in about a second, where formatting them row by
        row through ``datasets`` takes half a minute)."""
        return list(map(str, self.table.with_format("arrow")[self.id_column].to_pylist()))


def document_to_row(doc: Document) -> dict[str, Any]:
    """A flat Arrow-friendly row (metadata as JSON) that :func:`row_to_document` turns back into the document."""
    return {
        "id": doc.id,
        "title": doc.title,
        "headings": [s.heading for s in doc.sections],
        "texts": [s.text for s in doc.sections],
        "label": doc.label,
        "metadata": json.dumps(doc.metadata, ensure_ascii=False),
    }


def row_to_document(row: dict[str, Any]) -> Document:
    """The document of a row that :func:`document_to_row` wrote (from a document already checked by
    :meth:`Document.from_dict`, so not checked again: this runs for every document of every epoch)."""
    metadata = row["metadata"]
    return Document(id=row["id"], title=row["title"],
                    sections=[Section(h, t) for h, t in zip(row["headings"], row["texts"], strict=True)],
                    label=row["label"], metadata=json.loads(metadata) if metadata != "{}" else {})
