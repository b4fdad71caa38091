"""Reading primitives shared by every corpus reader: bad-input policy, files, Hugging Face tables, Arrow cache.

**Bad input** (one policy for every reader of this package, through a :class:`ReadContext`):

* a malformed line or record is skipped and counted under a named key of ``context.stats`` (the first few of
  each key are logged); with ``strict=True`` a :class:`MalformedInputError` names the file, the line (or
  archive member) and the expected format instead;
* undecodable bytes are decoded with ``fallback_encoding`` when one is set, else replaced by U+FFFD
  (``errors="replace"``), and counted (:meth:`ReadContext.decode`); so are JSON escapes of lone surrogates
  (:meth:`ReadContext.json`);
* a compressed stream that is corrupt or ends early stops its file with a ``"corrupt_file"`` count
  (:func:`read_lines`);
* empty documents are dropped and counted under ``"empty_document"`` (:meth:`ReadContext.keep`);
* a missing path raises :class:`FileNotFoundError` saying what was expected there (:func:`require_path`).

Readers that take a ``stats`` Counter and a ``strict`` flag (the TREC files of :mod:`lit_docemb.data.retrieval.trec`)
wrap them in a ReadContext, so they follow the same policy.

**Files.** :func:`open_binary` opens plain, gzip, bzip2 and xz files alike (recognised by their magic bytes).

**Arrow cache.** :func:`cached_documents` runs a reader once into a memory-mapped Arrow table
(``datasets.Dataset.from_generator``) keyed by the reader, its arguments and every input file's size and
modification time, so a second run opens the table in seconds and edited inputs are re-read. The skip counts
of the conversion are stored beside it and merged into ``context.stats`` on every run, cached or not.
"""

from __future__ import annotations

import bz2
import codecs
import functools
import glob
import gzip
import hashlib
import io
import json
import logging
import lzma
import os
import re
import shutil
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

from lit_docemb.data.core.arrow import ArrowDocuments, document_to_row, row_to_document
from lit_docemb.data.core.document import Document
from lit_docemb.errors import ConfigError

log = logging.getLogger(__name__)

CACHE_VERSION = "2"  # bump when a reader's output changes, so stale caches are not reused


class MalformedInputError(ValueError):
    """A record that does not match its format, raised instead of skipping it under ``strict=True``."""


@dataclass
class ReadContext:
    """Bad-input policy and counters of one read.

    Args:
        strict: Raise :class:`MalformedInputError` on a malformed record instead of skipping and counting it.
        encoding: Text encoding of the input files.
        fallback_encoding: Encoding of the pieces ``encoding`` cannot decode (counted); None replaces the bad
            bytes by U+FFFD instead (counted too).
        stats: Skip counts by reason (pass a Counter to count into it).
        extra: Outputs a reader produces besides documents (e.g. AAN pairs), stored with the Arrow cache.
        max_warnings: Malformed records logged one by one per reason; the rest are only counted.
    """

    strict: bool = False
    encoding: str = "utf-8"
    fallback_encoding: str | None = None
    stats: Counter = field(default_factory=Counter)
    extra: dict[str, Any] = field(default_factory=dict)
    max_warnings: int = 5

    def malformed(self, where: str, reason: str, expected: str, key: str = "malformed_record") -> None:
        """Skips and counts a bad record (``where``: "file:line", "file, line N" or "archive!member"), or raises
        when strict."""
        message = f"{where}: {reason}; expected {expected}"
        if self.strict:
            raise MalformedInputError(message)
        self.stats[key] += 1
        if self.stats[key] <= self.max_warnings:
            log.warning("skipped (%s): %s", key, message)

    def decode(self, data: bytes, unit: str = "record") -> str:
        """``data`` decoded; a failure is counted as ``"undecodable_<unit>"``, or as
        ``"<unit>_decoded_with_fallback_encoding"`` when ``fallback_encoding`` decodes it."""
        try:
            return data.decode(self.encoding)
        except UnicodeDecodeError:
            if self.fallback_encoding is not None:
                self.stats[f"{unit}_decoded_with_fallback_encoding"] += 1
                return data.decode(self.fallback_encoding, errors="replace")
            self.stats[f"undecodable_{unit}"] += 1
            return data.decode(self.encoding, errors="replace")

    def json(self, line: str, unit: str = "record") -> Any:
        """``json.loads(line)``, with lone surrogates (``"\\ud800"`` escapes that encode no character, which UTF-8
        and Arrow cannot store) replaced by U+FFFD like undecodable bytes, and counted as ``"undecodable_<unit>"``."""
        value = json.loads(line)
        if _SURROGATE_ESCAPE.search(line):
            repaired = _replace_surrogates(value)
            if repaired != value:
                self.stats[f"undecodable_{unit}"] += 1
            value = repaired
        return value

    def keep(self, document: Document) -> bool:
        """False (and counted) for a document without text."""
        if document.is_empty():
            self.stats["empty_document"] += 1
            return False
        return True


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every surrogate code point in its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------------

_MAGIC_OPENERS = ((b"\x1f\x8b", gzip.open), (b"BZh", bz2.open), (b"\xfd7zXZ\x00", lzma.open))
_LZW_MAGIC = b"\x1f\x9d"
_BUFFER_SIZE = 1 << 20  # large reads: line iteration over a decompressor is faster than with 8 KiB
DECOMPRESSION_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error)
_BLANK_LINES = re.compile(r"\n[ \t\f\v]*\n\s*")


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """Opens a plain, gzip, bzip2 or xz file for buffered binary reading (compression recognised by its magic
    bytes). Unix-compress (``.Z``) data raises ValueError: :func:`lit_docemb.data.corpora.robust04.open_trec_file`
    decodes it."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, opener in _MAGIC_OPENERS:
        if head.startswith(magic):
            return io.BufferedReader(opener(path, "rb"), buffer_size=_BUFFER_SIZE)
    if head.startswith(_LZW_MAGIC):
        raise ValueError(f"{path} is unix-compress (.Z) data: see lit_docemb.data.corpora.robust04.open_trec_file, or run "
                         "`uncompress` (or `gzip -d`) on it first")
    return open(path, "rb", buffering=_BUFFER_SIZE)


class Utf8Repair(io.RawIOBase):
    """A binary UTF-8 stream with every undecodable byte sequence replaced by U+FFFD (re-encoded as UTF-8) and
    counted as ``stats["undecodable_<unit>"]``: for parsers that read bytes and would stop at the first bad one
    (``ElementTree.iterparse``). A character split between two reads is decoded whole.

    Args:
        stream: The binary stream.
        stats: Receives the counts.
        unit: What a count is called (``"undecodable_<unit>"``).
    """

    _REPLACEMENT = "\ufffd".encode()  # a U+FFFD that was in the input, not a replacement

    def __init__(self, stream: BinaryIO, stats: Counter, unit: str = "sequence") -> None:
        super().__init__()
        self.stream, self.stats, self.key = stream, stats, f"undecodable_{unit}"
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.tail = b""  # the last 2 bytes read: a U+FFFD of the input may be split between reads

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size == 0:
            return b""
        text, data = "", b"-"
        while not text and data:  # an incomplete character decodes to nothing yet: read on
            data = self.stream.read(-1 if size is None else size)
            text = self.decoder.decode(data, final=not data)
            genuine = (self.tail + data).count(self._REPLACEMENT)
            self.tail = (self.tail + data)[-2:]
            if text.count("\ufffd") > genuine:
                self.stats[self.key] += text.count("\ufffd") - genuine
        return text.encode("utf-8")


def read_lines(path: str | os.PathLike, context: ReadContext, keepends: bool = False, unit: str = "record",
               opener: Callable[[str | os.PathLike], BinaryIO] = open_binary) -> Iterator[tuple[int, str]]:
    """Yields ``(line number from 1, line)``, each line decoded on its own (only ``\\n`` ends a line; a BOM is
    dropped); undecodable lines are counted as ``"undecodable_<unit>"`` (see :meth:`ReadContext.decode`).

    A compressed stream that ends early or is corrupt stops the file with a ``"corrupt_file"`` count.
    """
    line_no = 0
    with opener(path) as stream:
        try:
            for line_no, raw in enumerate(stream, 1):
                line = context.decode(raw, unit)
                if line_no == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield line_no, line if keepends else line.rstrip("\r\n")
        except DECOMPRESSION_ERRORS as err:
            context.malformed(f"{path}:{line_no + 1}", f"compressed data is corrupt or truncated ({err})",
                              "a complete gzip/bzip2/xz stream", key="corrupt_file")


#: ``stats`` keys that count what a reader yielded, not what it skipped (left out of the skip summaries).
READ_COUNT_KEYS = frozenset({"document"})


def is_decoding_count(key: str) -> bool:
    """Whether a ``stats`` key counts kept text whose bytes the encoding could not decode (decoded with the
    fallback encoding, or bytes replaced by U+FFFD), not a skipped record."""
    return key.endswith("_decoded_with_fallback_encoding") or key.startswith("undecodable_")


def reading_summary(name: str, documents_read: int, splits: dict[str, int], skipped: dict[str, int]) -> str:
    """One line saying what a read gave: ``<name>: read 50 documents (train 40, validation 10); skipped 3
    (empty_document 1, malformed_record 2)``, then, for the counts of :func:`is_decoding_count` (kept, not
    skipped), ``; kept with bytes not in the encoding 1 (record_decoded_with_fallback_encoding 1)``."""
    parts = ", ".join(f"{split} {n}" for split, n in splits.items())
    dropped = {reason: n for reason, n in skipped.items() if n and not is_decoding_count(reason)}
    decoded = {reason: n for reason, n in skipped.items() if n and is_decoding_count(reason)}
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(dropped.items()))
    line = (f"{name}: read {documents_read} documents" + (f" ({parts})" if parts else "")
            + f"; skipped {sum(dropped.values())}" + (f" ({reasons})" if reasons else ""))
    if decoded:
        line += (f"; kept with bytes not in the encoding {sum(decoded.values())} ("
                 + ", ".join(f"{reason} {n}" for reason, n in sorted(decoded.items())) + ")")
    return line


class MissingPathError(FileNotFoundError, ConfigError):
    """A file or folder that a corpus needs (often inside the configured root) does not exist: a
    ``FileNotFoundError`` for library callers, and a config error that the command line reports in one line."""


def require_path(path: str | os.PathLike, what: str, expected: str) -> Path:
    """``Path(path)``, or a :class:`MissingPathError` naming ``what`` was not found and what is ``expected`` there
    (a format, or a layout whose lines are joined into the one-line message)."""
    if not os.path.exists(path):
        layout = "; ".join(" ".join(line.split()) for line in expected.splitlines() if line.strip())
        raise MissingPathError(f"{what} not found: {path} does not exist; expected {layout}")
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
# Arrow cache
# ---------------------------------------------------------------------------------------------------------------------


def _row_features():
    import datasets

    text = datasets.Value("string")
    return datasets.Features({"id": text, "title": text, "headings": datasets.List(text),
                              "texts": datasets.List(text), "label": text, "metadata": text})


def _document_rows(shards: list[tuple[int, dict[str, Any]]], reader: Callable[..., Iterable[Document]],
                   policy: dict[str, Any], counts_dir: str) -> Iterator[dict[str, Any]]:
    """Rows of the non-empty documents ``reader(**kwargs, context=...)`` yields for each shard ``(index,
    kwargs)``, each shard's counts saved as ``<counts_dir>/<index>.json``.

    ``datasets`` calls this once per element of every list in ``gen_kwargs``: the only list is ``shards``,
    and a shard's arguments travel in a dict, so a list argument of the reader (its files) is never split.
    """
    for index, kwargs in shards:
        context = ReadContext(**policy)
        documents = 0
        for document in reader(**kwargs, context=context):
            if context.keep(document):
                documents += 1
                yield document_to_row(document)
        os.makedirs(counts_dir, exist_ok=True)
        path = os.path.join(counts_dir, f"{index}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"documents": documents, "stats": dict(context.stats), "extra": context.extra}, f)
        os.replace(path + ".tmp", path)


def _shards(reader_kwargs: dict[str, Any], shard_over: str | None, num_proc: int | None) -> list[dict[str, Any]]:
    """``reader_kwargs`` with the list ``reader_kwargs[shard_over]`` cut into ``num_proc`` contiguous parts."""
    if not num_proc or num_proc <= 1:
        return [reader_kwargs]
    if shard_over is None:
        raise ValueError("num_proc > 1 needs shard_over, the reader argument (a list) to split among processes")
    items = list(reader_kwargs[shard_over])
    bounds = [len(items) * i // num_proc for i in range(num_proc + 1)]
    return [{**reader_kwargs, shard_over: items[start:stop]} for start, stop in pairwise(bounds) if stop > start]


def _merge_saved_counts(counts_dir: str, num_shards: int, context: ReadContext, description: str) -> int | None:
    """Adds the saved counts of every shard to ``context``; the number of documents, None when some are missing."""
    documents = 0
    for index in range(num_shards):
        path = os.path.join(counts_dir, f"{index}.json")
        if not os.path.exists(path):
            log.warning("skip counts of the cached conversion of %s are missing (%s deleted?)", description, path)
            context.stats["cached_conversion_without_counts"] += 1
            return None
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        documents += saved["documents"]
        context.stats.update(saved["stats"])
        context.extra.update(saved["extra"])
    return documents


def table_from_generator(generator: Callable[..., Iterator[dict[str, Any]]], **kwargs):
    """``datasets.Dataset.from_generator(generator, **kwargs)``, raising the generator's own error (strict mode, a
    missing file...) rather than the ``DatasetGenerationError`` that wraps it."""
    import datasets
    from datasets.exceptions import DatasetGenerationError

    try:
        return datasets.Dataset.from_generator(generator, **kwargs)
    except DatasetGenerationError as err:
        if err.__cause__ is None:
            raise
        raise err.__cause__ from None


def cached_documents(reader: Callable[..., Iterable[Document]], reader_kwargs: dict[str, Any], *,
                     inputs: Sequence[str | Path], context: ReadContext, cache_dir: str | None = None,
                     identity: Sequence[str] = (), description: str | None = None, num_proc: int | None = None,
                     shard_over: str | None = None) -> ArrowDocuments:
    """Converts ``reader(**reader_kwargs, context=...)`` once into a memory-mapped Arrow table.

    Empty documents are dropped and counted (``"empty_document"``); a conversion without any document raises
    ValueError. A cache that cannot be read (truncated by a kill or a full disk) is rebuilt, with a warning.

    Args:
        reader: A module-level function yielding documents (runs only when no cache matches).
        reader_kwargs: Its JSON-serialisable arguments (part of the cache key).
        inputs: Files or folders it reads; their sizes and mtimes are part of the cache key.
        context: Strictness and encodings of the read; receives the skip counts and extra outputs of the
            conversion (stored beside the cache, so a cached run reports the same counts).
        cache_dir: Cache of ``datasets``; ``None`` uses its default.
        identity: Other strings identifying the input content (e.g. a Hugging Face table fingerprint).
        description: What is read, for messages (default: the inputs).
        num_proc: Processes converting in parallel, each reading a contiguous part of the list
            ``reader_kwargs[shard_over]`` (None: one). Their extra outputs are merged with ``dict.update``.
        shard_over: The reader argument split among the processes (e.g. ``"sources"``).
    """
    import datasets
    import pyarrow as pa

    shards = _shards(reader_kwargs, shard_over, num_proc)
    policy = {"strict": context.strict, "encoding": context.encoding, "fallback_encoding": context.fallback_encoding}
    key = json.dumps({"reader": f"{reader.__module__}.{reader.__qualname__}", "kwargs": reader_kwargs, **policy,
                      "inputs": file_signature(inputs), "identity": list(identity), "shards": len(shards),
                      "version": CACHE_VERSION}, sort_keys=True, default=repr)
    fingerprint = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    counts_dir = os.path.join(cache_dir or datasets.config.HF_DATASETS_CACHE, "lit_docemb_stats", fingerprint)
    description = description or ", ".join(str(p) for p in inputs) or ", ".join(identity)
    gen_kwargs = {"shards": list(enumerate(shards)), "reader": reader, "policy": policy, "counts_dir": counts_dir}
    build = functools.partial(table_from_generator, _document_rows, features=_row_features(), cache_dir=cache_dir,
                              gen_kwargs=gen_kwargs, fingerprint=fingerprint,
                              num_proc=len(shards) if len(shards) > 1 else None)
    try:
        try:
            table = build()
        except (OSError, pa.ArrowException) as err:  # a truncated cache (a kill or a full disk while it was written)
            stale = glob.glob(os.path.join(cache_dir or datasets.config.HF_DATASETS_CACHE, "generator",
                                           f"*{fingerprint}*"))
            if not stale:
                raise
            log.warning("the Arrow cache of %s cannot be read (%s: %s); rebuilding it from the corpus (%s)",
                        description, type(err).__name__, str(err).splitlines()[0] if str(err) else "", stale[0])
            for path in stale:
                if os.path.isdir(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
            table = build()
    except (MalformedInputError, ConfigError):  # strict mode, files that disagree: the reader's error as it is
        raise
    except ValueError as err:  # datasets refuses a table without rows
        if _merge_saved_counts(counts_dir, len(shards), context, description) != 0:
            raise
        raise ValueError(f"no documents in {description}; skipped {dict(context.stats) or 'nothing'}") from err
    _merge_saved_counts(counts_dir, len(shards), context, description)
    return ArrowDocuments(table, row_to_document)
