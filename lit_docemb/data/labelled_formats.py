"""Reading primitives shared by the corpus readers, and the generic labelled-text formats.

**Bad input** (one policy for every reader of this package, through a :class:`ReadContext`):

* a malformed line or record is skipped and counted under a named key of ``context.stats``; with
  ``strict=True`` a :class:`MalformedInputError` names the file, the line (or archive member) and the expected
  format instead;
* undecodable bytes are replaced by U+FFFD (``errors="replace"``) and the record is counted under
  ``"undecodable_record"``;
* empty documents are dropped and counted under ``"empty_document"`` (:meth:`ReadContext.keep`);
* a missing path raises :class:`FileNotFoundError` describing the expected layout (:func:`require_path`).

**Arrow cache.** :func:`cached_documents` runs a reader once into a memory-mapped Arrow table
(``datasets.Dataset.from_generator``) keyed by the reader, its arguments and every input file's size and
modification time, so a second run opens the table in seconds and edited inputs are re-read. The skip counts
of the conversion are stored beside it and merged into ``context.stats`` on every run, cached or not.

**Labelled-text formats** (:class:`~lit_docemb.data.labelled.LabelledTextDataModule`, arXiv-11):

* tables: CSV (quotes honoured), TSV (quotes literal) and JSON lines, optionally ``.gz``/``.bz2``/``.xz``
  compressed, with a header line or ``column_names``; one record per document (:func:`iter_table_records`);
* one folder per class: ``<root>/<label>/**/<file>``, one document per file (20 Newsgroups, aclImdb, BBC News,
  arXiv-11), id = the path relative to ``root`` (:func:`iter_class_folders`);
* Hugging Face datasets, labels of ``ClassLabel`` columns turned into their names (:func:`iter_hf_labelled`).

Labels are kept as strings everywhere.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import json
import logging
import lzma
import math
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from lit_docemb.data.arrow import ArrowDocuments, document_to_row, row_to_document
from lit_docemb.data.document import Document, Section

log = logging.getLogger(__name__)

CACHE_VERSION = "1"  # bump when a reader's output changes, so stale caches are not reused


class MalformedInputError(ValueError):
    """A record that does not match its format, raised instead of skipping it under ``strict=True``."""


@dataclass
class ReadContext:
    """Bad-input policy and counters of one read.

    Args:
        strict: Raise :class:`MalformedInputError` on a malformed record instead of skipping and counting it.
        encoding: Text encoding of the input files (undecodable bytes are replaced and counted).
        stats: Skip counts by reason.
        extra: Outputs a reader produces besides documents (e.g. AAN pairs), stored with the Arrow cache.
        max_warnings: Malformed records logged one by one per reason; the rest are only counted.
    """

    strict: bool = False
    encoding: str = "utf-8"
    stats: Counter = field(default_factory=Counter)
    extra: dict[str, Any] = field(default_factory=dict)
    max_warnings: int = 5

    def malformed(self, where: str, reason: str, expected: str, key: str = "malformed_record") -> None:
        """Skips and counts a bad record (``where`` = "file:line" or "archive!member"), or raises when strict."""
        if self.strict:
            raise MalformedInputError(f"{where}: {reason}; expected {expected}")
        self.stats[key] += 1
        if self.stats[key] <= self.max_warnings:
            log.warning("%s: skipped (%s); expected %s", where, reason, expected)

    def decode(self, data: bytes) -> str:
        try:
            return data.decode(self.encoding)
        except UnicodeDecodeError:
            self.stats["undecodable_record"] += 1
            return data.decode(self.encoding, errors="replace")

    def keep(self, document: Document) -> bool:
        """False (and counted) for a document without text."""
        if document.is_empty():
            self.stats["empty_document"] += 1
            return False
        return True


# ---------------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------------

_MAGIC_OPENERS = ((b"\x1f\x8b", gzip.open), (b"BZh", bz2.open), (b"\xfd7zXZ\x00", lzma.open))
DECOMPRESSION_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error)
_BLANK_LINES = re.compile(r"\n[ \t\f\v]*\n\s*")


def open_binary(path: str | Path) -> BinaryIO:
    """Opens a file for reading, decompressing gzip, bzip2 or xz recognised by their magic bytes."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, opener in _MAGIC_OPENERS:
        if head.startswith(magic):
            return opener(path, "rb")
    return open(path, "rb")


def read_lines(path: str | Path, context: ReadContext, keepends: bool = False) -> Iterator[tuple[int, str]]:
    """Yields ``(line number, line)``, each line decoded on its own (only ``\\n`` ends a line; a BOM is dropped).

    A compressed stream that ends early or is corrupt stops the file with a ``"corrupt_file"`` count.
    """
    line_no = 0
    with open_binary(path) as stream:
        try:
            for line_no, raw in enumerate(stream, 1):
                line = context.decode(raw)
                if line_no == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield line_no, line if keepends else line.rstrip("\r\n")
        except DECOMPRESSION_ERRORS as err:
            context.malformed(f"{path}:{line_no + 1}", f"compressed data is corrupt or truncated ({err})",
                              "a complete gzip/bzip2/xz stream", key="corrupt_file")


def require_path(path: str | Path, what: str, layout: str) -> Path:
    """``Path(path)``, or a FileNotFoundError that says what was expected there and how it is laid out."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} not found at {str(path)!r}. Expected layout:\n{layout}")
    return Path(path)


def walk_files(root: str | Path) -> list[Path]:
    """Regular files under ``root`` (or ``[root]`` for a file), sorted by path, hidden entries included."""
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(Path(folder) / name for folder, _, names in os.walk(root) for name in names)


def file_signature(paths: Iterable[str | Path]) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of every file under ``paths``: the cache key of a conversion."""
    signature = []
    for path in paths:
        for file in walk_files(path):
            stat = file.stat()
            signature.append((str(file.resolve()), stat.st_size, stat.st_mtime_ns))
    return signature


def normalise_paragraphs(text: str) -> str:
    """Unix newlines, paragraphs (blank-line separated) stripped and joined by exactly one blank line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n\n".join(p for p in (p.strip() for p in _BLANK_LINES.split(text)) if p)


def looks_like_local_path(source: str) -> bool:
    """Whether a source that does not exist was meant as a local path rather than a Hugging Face name."""
    return (os.path.isabs(source) or source.startswith((".", "~")) or source.count("/") > 1
            or Path(source).suffix.lower() in {".csv", ".tsv", ".jsonl", ".json", ".txt", ".gz", ".xz", ".bz2",
                                               ".parquet", ".arrow", ".tar"})


# ---------------------------------------------------------------------------------------------------------------------
# Arrow cache and Hugging Face tables
# ---------------------------------------------------------------------------------------------------------------------


def _row_features():
    import datasets

    strings = datasets.List(datasets.Value("string"))
    return datasets.Features({"id": datasets.Value("string"), "title": datasets.Value("string"), "headings": strings,
                              "texts": strings, "label": datasets.Value("string"),
                              "metadata": datasets.Value("string")})


def _document_rows(reader: Callable[..., Iterable[Document]], reader_kwargs: dict, strict: bool, encoding: str,
                   sidecar: str, description: str) -> Iterator[dict[str, Any]]:
    context = ReadContext(strict=strict, encoding=encoding)
    count = 0
    for document in reader(**reader_kwargs, context=context):
        count += 1
        yield document_to_row(document)
    if count == 0:
        raise ValueError(f"no documents in {description}; skipped {dict(context.stats) or 'nothing'}")
    os.makedirs(os.path.dirname(sidecar), exist_ok=True)
    with open(sidecar + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"stats": dict(context.stats), "extra": context.extra}, f)
    os.replace(sidecar + ".tmp", sidecar)


def cached_documents(reader: Callable[..., Iterable[Document]], reader_kwargs: dict[str, Any], *,
                     inputs: Sequence[str | Path], context: ReadContext, cache_dir: str | None = None,
                     identity: Sequence[str] = (), description: str | None = None) -> ArrowDocuments:
    """Converts ``reader(**reader_kwargs, context=...)`` once into a memory-mapped Arrow table.

    Args:
        reader: A module-level function yielding documents (runs only when no cache matches).
        reader_kwargs: Its JSON-serialisable arguments (part of the cache key).
        inputs: Files or folders it reads; their sizes and mtimes are part of the cache key.
        context: Strictness and encoding of the read; receives the skip counts and extra outputs of the
            conversion (stored beside the cache, so a cached run reports the same counts).
        cache_dir: Cache of ``datasets``; ``None`` uses its default.
        identity: Other strings identifying the input content (e.g. a Hugging Face table fingerprint).
        description: What is read, for messages (default: the inputs).
    """
    import datasets
    from datasets.exceptions import DatasetGenerationError

    key = json.dumps({"reader": f"{reader.__module__}.{reader.__qualname__}", "kwargs": reader_kwargs,
                      "strict": context.strict, "encoding": context.encoding, "inputs": file_signature(inputs),
                      "identity": list(identity), "version": CACHE_VERSION}, sort_keys=True, default=repr)
    fingerprint = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    sidecar = os.path.join(cache_dir or datasets.config.HF_DATASETS_CACHE, "lit_docemb_stats", f"{fingerprint}.json")
    description = description or ", ".join(str(p) for p in inputs) or ", ".join(identity)
    gen_kwargs = {"reader": reader, "reader_kwargs": reader_kwargs, "strict": context.strict,
                  "encoding": context.encoding, "sidecar": sidecar, "description": description}
    try:
        table = datasets.Dataset.from_generator(_document_rows, features=_row_features(), cache_dir=cache_dir,
                                                gen_kwargs=gen_kwargs, fingerprint=fingerprint)
    except DatasetGenerationError as err:  # show the reader's own error (strict mode, empty corpus)
        if err.__cause__ is None:
            raise
        raise err.__cause__ from None
    if os.path.exists(sidecar):
        with open(sidecar, encoding="utf-8") as f:
            saved = json.load(f)
        context.stats.update(saved["stats"])
        context.extra.update(saved["extra"])
    else:
        log.warning("skip counts of the cached conversion of %s are missing (%s deleted?)", description, sidecar)
        context.stats["cached_conversion_without_counts"] += 1
    return ArrowDocuments(table, row_to_document)


def load_hf_splits(source: str, subset: str | None = None, cache_dir: str | None = None) -> dict[str, Any]:
    """The splits of a Hugging Face dataset: a hub name, a ``save_to_disk`` folder, a folder of data files
    (parquet, arrow...) or one parquet/arrow file (its rows are split ``"train"``)."""
    import datasets

    path = Path(source).expanduser()
    if path.is_dir() and any((path / name).exists() for name in ("state.json", "dataset_dict.json")):
        loaded = datasets.load_from_disk(str(path))
    elif path.is_file() and path.suffix in (".parquet", ".arrow"):
        loaded = datasets.load_dataset(path.suffix[1:], data_files={"train": [str(path)]}, cache_dir=cache_dir)
    else:
        loaded = datasets.load_dataset(source if not path.exists() else str(path), subset, cache_dir=cache_dir)
    return {"train": loaded} if isinstance(loaded, datasets.Dataset) else dict(loaded)


# ---------------------------------------------------------------------------------------------------------------------
# Labelled text: tables, Hugging Face tables, one folder per class
# ---------------------------------------------------------------------------------------------------------------------

TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


def table_format_of(path: str | Path) -> str | None:
    """``"csv"``, ``"tsv"`` or ``"jsonl"`` from the extension (a compression suffix is looked through)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2", ".xz"):
        suffixes = suffixes[:-1]
    return TABLE_FORMATS.get(suffixes[-1]) if suffixes else None


def _iter_jsonl_records(path: str | Path, context: ReadContext) -> Iterator[tuple[int, dict[str, Any]]]:
    expected = "one JSON object per line"
    for line_no, line in read_lines(path, context):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            context.malformed(f"{path}:{line_no}", f"invalid JSON ({err.msg})", expected, key="malformed_line")
            continue
        if not isinstance(record, dict):
            context.malformed(f"{path}:{line_no}", "not a JSON object", expected, key="malformed_line")
            continue
        yield line_no, record


def iter_table_records(path: str | Path, context: ReadContext, table_format: str,
                       column_names: Sequence[str] | None = None, delimiter: str | None = None,
                       quoting: bool | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields ``(first line number, record)`` of a CSV, TSV or JSON-lines file.

    Args:
        table_format: ``"csv"``, ``"tsv"`` or ``"jsonl"``.
        column_names: Names of the columns of a delimited file without header; ``None``: the first line is
            the header.
        delimiter: Field separator; ``None``: ``","`` for CSV, tab for TSV.
        quoting: Honour ``"``-quoted fields (which may span lines); ``None``: for CSV, not for TSV.
    """
    if table_format == "jsonl":
        yield from _iter_jsonl_records(path, context)
        return
    csv.field_size_limit(2**31 - 1)  # documents are longer than the default 128 KiB field limit
    delimiter = delimiter or ("\t" if table_format == "tsv" else ",")
    quoting = table_format == "csv" if quoting is None else quoting
    lines = (line for _, line in read_lines(path, context, keepends=True))
    reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE,
                        strict=quoting)
    header = list(column_names) if column_names else None
    expected = f"{delimiter!r}-separated fields {header or '(named by the header line)'}"
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            context.malformed(f"{path}:{start}", f"bad quoting ({err})", expected, key="malformed_line")
            continue
        if not fields:
            continue  # blank line
        if header is None:
            header, expected = fields, f"{delimiter!r}-separated fields {fields}"
        elif len(fields) != len(header):
            context.malformed(f"{path}:{start}", f"{len(fields)} fields instead of {len(header)}", expected,
                              key="malformed_line")
        else:
            yield start, dict(zip(header, fields, strict=True))


def _cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value if isinstance(value, str) else str(value)


def record_to_document(record: dict[str, Any], where: str, context: ReadContext, *, default_id: str,
                       text_column: str | Sequence[str], label_column: str | None, id_column: str | None = None,
                       title_column: str | None = None) -> Document | None:
    """One table record → Document, or None (counted) when a column is missing or the label is empty.

    One text column gives one untitled section; several give one section each, headed by the column name.
    """
    text_columns = [text_column] if isinstance(text_column, str) else list(text_column)
    wanted = [c for c in (*text_columns, label_column, id_column, title_column) if c is not None]
    expected = f"columns {wanted}"
    missing = [c for c in wanted if c not in record]
    if missing:
        context.malformed(where, f"missing column(s) {missing} (has {sorted(record)})", expected)
        return None
    label = None if label_column is None else _cell_text(record[label_column]).strip()
    if label == "":
        context.malformed(where, f"empty label in column {label_column!r}", expected, key="missing_label")
        return None
    headings = [""] if len(text_columns) == 1 else text_columns
    sections = [Section(heading, normalise_paragraphs(_cell_text(record[column])))
                for heading, column in zip(headings, text_columns, strict=True)]
    return Document(id=_cell_text(record[id_column]) if id_column else default_id,
                    title=_cell_text(record[title_column]).strip() if title_column else "",
                    sections=[s for s in sections if s.text], label=label)


def iter_labelled_table(path: str, table_format: str, text_column: str | list[str], label_column: str | None,
                        id_column: str | None = None, title_column: str | None = None,
                        column_names: list[str] | None = None, delimiter: str | None = None,
                        quoting: bool | None = None, *, context: ReadContext) -> Iterator[Document]:
    """Documents of a CSV/TSV/JSONL file; ids are ``id_column`` or ``"<file name>:<line>"``; duplicate ids
    are counted (``"duplicate_id"``) and skipped."""
    seen: set[str] = set()
    for line_no, record in iter_table_records(path, context, table_format, column_names, delimiter, quoting):
        where = f"{path}:{line_no}"
        document = record_to_document(record, where, context, default_id=f"{Path(path).name}:{line_no}",
                                      text_column=text_column, label_column=label_column, id_column=id_column,
                                      title_column=title_column)
        if document is None or not context.keep(document):
            continue
        if id_column is not None:
            if document.id in seen:
                context.malformed(where, f"duplicate id {document.id!r}", "unique ids", key="duplicate_id")
                continue
            seen.add(document.id)
        yield document


def iter_hf_labelled(source: str, subset: str | None, split: str, text_column: str | list[str],
                     label_column: str | None, id_column: str | None = None, title_column: str | None = None,
                     cache_dir: str | None = None, *, context: ReadContext) -> Iterator[Document]:
    """Documents of one split of a Hugging Face dataset; ``ClassLabel`` values become their names, a label
    outside the names (e.g. -1 for "unlabelled") is a missing label; ids are ``id_column`` or ``"<split>:<row>"``."""
    table = load_hf_splits(source, subset, cache_dir)[split]
    names = getattr(table.features.get(label_column), "names", None) if label_column else None
    for start in range(0, len(table), 1000):
        batch = table[start : start + 1000]
        for offset in range(len(next(iter(batch.values()), []))):
            record = {column: values[offset] for column, values in batch.items()}
            if names is not None and record.get(label_column) is not None:
                value = record[label_column]
                record[label_column] = names[value] if 0 <= value < len(names) else None
            row = start + offset
            document = record_to_document(record, f"{source}[{split}][{row}]", context, default_id=f"{split}:{row}",
                                          text_column=text_column, label_column=label_column,
                                          id_column=id_column, title_column=title_column)
            if document is not None and context.keep(document):
                yield document


def iter_class_folders(root: str, classes: list[str] | None = None, id_prefix: str = "", *,
                       context: ReadContext) -> Iterator[Document]:
    """One document per file of ``<root>/<label>/**``, label = the folder name, id = ``id_prefix`` + the path
    relative to ``root``. Files directly in ``root`` and hidden entries are counted and skipped.

    Args:
        classes: Read only these class folders (e.g. ``["neg", "pos"]`` for aclImdb, leaving out ``unsup``).
    """
    root_path = Path(root)
    folders = sorted(p for p in root_path.iterdir() if p.is_dir() and not p.name.startswith("."))
    missing = sorted(set(classes or ()) - {p.name for p in folders})
    if missing:
        raise ValueError(f"class folders {missing} not in {root!r} (found {[p.name for p in folders]})")
    for entry in sorted(root_path.iterdir()):
        if entry.is_file() and entry.name.startswith("."):
            context.stats["hidden_file"] += 1
        elif entry.is_file():
            context.malformed(str(entry), "file outside a class folder", f"{root}/<label>/<document>",
                              key="file_outside_class_folder")
    for folder in folders:
        if classes is not None and folder.name not in classes:
            log.info("%s: class folder %r not read (not in classes)", root, folder.name)
            continue
        for path in walk_files(folder):
            relative = path.relative_to(root_path).as_posix()
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                context.stats["hidden_file"] += 1
                continue
            text = normalise_paragraphs(context.decode(path.read_bytes()))
            document = Document(id=f"{id_prefix}{relative}", sections=[Section("", text)], label=folder.name)
            if context.keep(document):
                yield document
