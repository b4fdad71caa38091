"""USPTO patents as CoLDE reads them (seed paper 003 §4.1.1, PAT): the Claims and Description sections of each
patent, from Google Patents Public Data, the source the paper names (github.com/google/patents-public-data).

What users download: the BigQuery table ``patents-public-data.patents.publications`` exported as newline-delimited
JSON (``bq extract --destination_format NEWLINE_DELIMITED_JSON``, or a query result saved as JSONL; ``.gz`` shards
accepted), one publication per line with the table's own nested fields::

  {"publication_number": "US-9000000-B2", "country_code": "US",
   "title_localized": [{"text": "...", "language": "en", "truncated": false}],
   "abstract_localized": [...], "claims_localized": [...], "description_localized": [...],
   "cpc": [{"code": "G06F16/3347", "inventive": true, "first": true, "tree": [...]}, ...], ...}

A patent becomes a document with id ``publication_number``, its English title, the sections of ``sections`` in
that order (the paper: ``Claims`` then ``Description``; the abstract and the CPC codes are what the paper's
annotators judged by, so they are kept out of the text by default), and ``metadata["cpc"]``: its CPC codes, the
first-listed code first. A line that is not JSON or has no ``publication_number`` is skipped and counted; a
patent without English text in the chosen sections is dropped (``"empty_document"``).

The paper's similarity labels (three annotators, majority vote, on 3,000 sampled patents) are not published:
:class:`~lit_docemb.data.SimilarityGroupDataModule` ``rule: cpc`` groups the patents by their first CPC code, the
code the annotators consulted (see :func:`~lit_docemb.data.corpora.similarity_groups.cpc_groups`).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import ReadContext, cached_documents, read_lines, require_path
from lit_docemb.errors import require

LAYOUT = """\
  the BigQuery table patents-public-data.patents.publications exported as newline-delimited JSON (a file, a folder
  of *.json / *.jsonl shards, optionally .gz, or a glob): one publication per line with publication_number,
  title_localized, claims_localized, description_localized (lists of {"text", "language"}) and cpc ([{"code"}])"""
RECORD = 'a JSON object with "publication_number" and the *_localized / cpc fields of the publications table'
SECTION_FIELDS = {"abstract": ("Abstract", "abstract_localized"), "claims": ("Claims", "claims_localized"),
                  "description": ("Description", "description_localized")}
"""Section name → (heading, field of the publications table)."""


def _english(record: dict, field: str, language: str) -> str:
    """The text of a ``*_localized`` field in ``language`` (a plain string field is taken as it is)."""
    value = record.get(field)
    if isinstance(value, str):
        return value.strip()
    if not isinstance(value, list):
        return ""
    texts = [entry.get("text") or "" for entry in value if isinstance(entry, dict) and entry.get("language") == language]
    return "\n\n".join(text.strip() for text in texts if text.strip())


def _cpc_codes(record: dict) -> list[str]:
    """The CPC codes of a publication, the one marked ``first`` first, then in the table's order."""
    entries = [entry for entry in record.get("cpc") or [] if isinstance(entry, dict) and entry.get("code")]
    entries.sort(key=lambda entry: not entry.get("first", False))
    return list(dict.fromkeys(str(entry["code"]) for entry in entries))


def patent_document(record: dict, sections: list[str], language: str = "en") -> Document:
    """A publication record (see the module docstring) as a document of ``sections``."""
    return Document(id=str(record["publication_number"]), title=_english(record, "title_localized", language),
                    sections=[Section(SECTION_FIELDS[name][0], _english(record, SECTION_FIELDS[name][1], language))
                              for name in sections],
                    metadata={"cpc": _cpc_codes(record)})


def iter_patents(paths: list[str], sections: list[str], language: str, *, context: ReadContext) -> Iterator[Document]:
    """The patents of every export file in turn, malformed lines skipped and counted."""
    for path in paths:
        for number, line in read_lines(path, context):
            if not line.strip():
                continue
            try:
                record = context.json(line)
            except ValueError as err:
                context.malformed(f"{path}:{number}", f"not JSON ({err})", RECORD)
                continue
            if not isinstance(record, dict) or not record.get("publication_number"):
                context.malformed(f"{path}:{number}", "no publication_number", RECORD)
                continue
            yield patent_document(record, sections, language)  # an empty one is dropped and counted by the cache


class PatentDataModule(DocumentDataModule):
    """Patents of a Google Patents Public Data export (see :mod:`lit_docemb.data.corpora.patents`), converted once into an
    Arrow cache, as documents of their Claims and Description sections with their CPC codes in
    ``metadata["cpc"]``.

    Args:
        source: An export file, a folder of export shards (``*.json``, ``*.jsonl``, optionally ``.gz``) or a glob.
        sections: The parts of a patent that become its sections, in order: ``"claims"``, ``"description"``,
            ``"abstract"`` (paper: claims and description).
        language: Language of the ``*_localized`` texts to read.
        strict: Raise on a malformed line (naming the file and line) instead of skipping and counting it.
        cache_dir: Cache of ``datasets`` (Arrow files); ``None`` uses its default.
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, source: str, sections: list[str] | None = None, language: str = "en", strict: bool = False,
                 cache_dir: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        sections = ["claims", "description"] if sections is None else list(sections)
        require(bool(sections) and all(name in SECTION_FIELDS for name in sections) and len(set(sections)) ==
                len(sections), "sections", f"distinct names among {list(SECTION_FIELDS)}", sections)
        self.source, self.sections, self.language = source, sections, language
        self.strict, self.cache_dir = strict, cache_dir

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        plain = not any(ch in self.source for ch in "*?")
        return {"source": (self.source if plain else None, "a patents export file or folder")}

    def _files(self) -> list[str]:
        if os.path.isdir(self.source):
            pattern = os.path.join(self.source, "*")
        else:
            if not any(ch in self.source for ch in "*?"):
                require_path(self.source, "patents export", LAYOUT)
            pattern = self.source
        files = sorted(p for p in glob.glob(os.path.expanduser(pattern))
                       if p.endswith((".json", ".jsonl", ".json.gz", ".jsonl.gz")))
        if not files:
            raise FileNotFoundError(f"no .json / .jsonl patent export files at {self.source!r}; expected\n{LAYOUT}")
        return files

    def load_documents(self) -> ArrowDocuments:
        files = self._files()
        context = ReadContext(strict=self.strict)
        documents = cached_documents(iter_patents, {"paths": files, "sections": self.sections,
                                                    "language": self.language},
                                     inputs=files, context=context, cache_dir=self.cache_dir,
                                     description=f"patents {self.source}")
        self.stats.update(context.stats)
        return documents
