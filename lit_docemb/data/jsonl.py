"""Documents stored as JSON Lines in lit_docemb's own record format (one :class:`Document` per line)."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.data.document import Document

log = logging.getLogger(__name__)


def read_jsonl(path: str | Path, stats=None) -> list[Document]:
    """Reads ``{"id", "title", "sections": [{"heading", "text"}] | "text", "label", "metadata"}`` lines.

    Lines that are not valid JSON or lack an ``id`` are skipped and counted in ``stats["bad_line"]``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"JSONL corpus not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    documents = []
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                documents.append(Document.from_dict(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
                if stats is not None:
                    stats["bad_line"] += 1
                log.warning("%s:%d: skipped (%s)", path, line_no, err)
    return documents


class JSONLDataModule(DocumentDataModule):
    """Any corpus converted to lit_docemb JSONL (``.jsonl`` or ``.jsonl.gz``; one or several files).

    Args:
        paths: JSONL files; their documents are concatenated in order.
        **kwargs: see :class:`DocumentDataModule`.
    """

    def __init__(self, paths: list[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.paths = paths

    def load_documents(self) -> list[Document]:
        return [doc for path in self.paths for doc in read_jsonl(path, self.stats)]
