"""Documents stored as JSON Lines in lit_docemb's own record format (one :class:`Document` per line)."""

from __future__ import annotations

import json
from pathlib import Path

from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.reading import ReadContext, read_lines, require_path

EXPECTED = ('one JSON object per line: {"id", "title", "sections": [{"heading", "text"}, ...] or "text", "label", '
            '"metadata"}; only "id" is required (plain, .gz, .bz2 or .xz file)')


def read_jsonl(path: str | Path, context: ReadContext | None = None) -> list[Document]:
    """Reads ``{"id", "title", "sections": [{"heading", "text"}] | "text", "label", "metadata"}`` lines.

    Bad input follows :mod:`lit_docemb.data.core.reading`: a line that is not a JSON object with an ``id`` is skipped
    and counted as ``"malformed_record"`` (with ``context.strict``, a :class:`~lit_docemb.data.core.reading.
    MalformedInputError` names the file, the line and this format); undecodable bytes are replaced and counted
    (``"undecodable_record"``); blank lines are not records. Empty documents are returned (the DataModule counts
    and drops them). Compressed files are recognised by their content.
    """
    context = ReadContext() if context is None else context
    path = require_path(path, "JSONL corpus", EXPECTED)
    documents = []
    for line_no, line in read_lines(path, context):
        if not line.strip():
            continue
        try:
            documents.append(Document.from_dict(context.json(line)))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            context.malformed(f"{path}:{line_no}", f"{type(err).__name__}: {err}", EXPECTED)
    return documents


class JSONLDataModule(DocumentDataModule):
    """Any corpus converted to lit_docemb JSONL (``.jsonl``, or compressed ``.jsonl.gz`` / ``.bz2`` / ``.xz``; one or
    several files).

    Args:
        paths: JSONL files; their documents are concatenated in order.
        strict: Raise on a malformed line (naming file and line) instead of skipping and counting it.
        **kwargs: see :class:`DocumentDataModule`.
    """

    def __init__(self, paths: list[str], strict: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.paths = paths
        self.strict = strict

    def config_paths(self) -> dict[str, tuple[list[str], str]]:
        return {"paths": (self.paths, "JSONL files")}

    def load_documents(self) -> list[Document]:
        context = ReadContext(strict=self.strict, stats=self.stats)
        return [doc for path in self.paths for doc in read_jsonl(path, context)]
