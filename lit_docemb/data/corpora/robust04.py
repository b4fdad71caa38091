"""TREC Robust 2004: the news articles of TREC Disks 4 & 5 (minus the Congressional Record), 250 topics.

**Documents** are SGML records, many per file, in files that are plain, gzip or unix-compress (``.z``,
``.Z``, ``.0z``...: LZW, recognised by its magic bytes and decoded in memory, one file at a time, by
:func:`unlzw`, a pure-Python decoder writing about 10 MB/s; the Arrow cache means it runs once, ``num_proc``
runs it in parallel, and ``uncompress`` or ``gzip -d`` beforehand makes it unnecessary)::

    <DOC>
    <DOCNO> FBIS3-1 </DOCNO>
    <HEADER> ... <H3> <TI> Title of the article </TI> </H3> </HEADER>
    <TEXT> paragraphs, separated by blank lines or <P> ... </P> </TEXT>
    </DOC>

The title is the first of ``<HEADLINE>`` (FT, LA Times), ``<TI>`` (FBIS), ``<DOCTITLE>`` (Federal Register);
the body is every ``<TEXT>`` block with SGML comments and tags removed, entities decoded (``&hyph;`` and
``&blank;`` too) and paragraphs (``<P>`` or blank lines) kept as blank-line-separated paragraphs of one
untitled section: news articles have no section headings. Other fields (dates, bylines, LA Times graphics
captions) are not kept.

**Topics** (``04.testset``, the TREC topic format, optionally gzip)::

    <top>
    <num> Number: 301
    <title> keyword query
    <desc> Description: A one-sentence statement of the information need.
    <narr> Narrative: What makes a document relevant or not.
    </top>

**Folds.** The five-fold cross-validation splits must come from a file
(:func:`~lit_docemb.data.retrieval.trec.read_folds`): two different assignments circulate as "the" five Robust04
folds (the one in ir_datasets ``trec_robust04.py``, from DRMM's ``NN4IR.cpp``, and Anserini's
``robust04-paper2-folds.json``), so none is built in; say which one you used.
"""

from __future__ import annotations

import glob
import html
import io
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import ReadContext, cached_documents, open_binary, read_lines, require_path
from lit_docemb.data.retrieval.datamodule import QuerySplit, RetrievalDataModule
from lit_docemb.data.retrieval.trec import Qrels, QueryRecord, read_folds, read_qrels
from lit_docemb.errors import ConfigError

DOCUMENT_FORMAT = "<DOC> ... </DOC> records holding a <DOCNO>"
TOPIC_FORMAT = "<top> <num> Number: N <title> ... [<desc> Description: ...] [<narr> Narrative: ...] </top>"
LAYOUT = """TREC Disks 4 & 5 document files (many <DOC> records per file; plain, .gz or unix-compress .z/.Z),
given as files, folders (read recursively) or globs, e.g. disk4/FT, disk4/FR94, disk5/FBIS, disk5/LATIMES
(leave out disk4/CR: the Congressional Record is not part of Robust04)"""

# ---------------------------------------------------------------------------------------------------------------------
# unix compress (.Z)
# ---------------------------------------------------------------------------------------------------------------------

_LZW_MAGIC = b"\x1f\x9d"


def unlzw(data: bytes) -> bytes:
    """Decompresses unix ``compress`` data (LZW, 9 to 16-bit codes, block mode with CLEAR), as ``uncompress``.

    Codes are packed LSB first in groups of 8 codes (``bits`` bytes); when the code width grows or a CLEAR
    code arrives, the rest of the group is padding (the format's historical quirk, as in pigz's ``unlzw``).
    """
    if len(data) < 3 or data[:2] != _LZW_MAGIC:
        raise ValueError("not unix-compress data (magic bytes 1f 9d)")
    max_bits, block_mode = data[2] & 0x1F, bool(data[2] & 0x80)
    if not 9 <= max_bits <= 16:
        raise ValueError(f"unix-compress data with unsupported code width {max_bits}")
    table = [bytes([i]) for i in range(256)] + ([b""] if block_mode else [])
    out, prev, bits, pos = bytearray(), b"", 9, 3
    while pos < len(data):
        group = data[pos : pos + bits]
        pos += len(group)
        value, mask = int.from_bytes(group, "little"), (1 << bits) - 1
        for _ in range(len(group) * 8 // bits):
            code, value = value & mask, value >> bits
            if code == 256 and block_mode:  # CLEAR: back to 9 bits, rest of the group is padding
                del table[256:]
                bits = 9
                break
            if code < len(table):
                entry = table[code]
            elif code == len(table) and prev:
                entry = prev + prev[:1]
            else:
                raise ValueError(f"corrupt unix-compress data: code {code} with {len(table)} entries")
            out += entry
            if prev and len(table) <= mask:
                table.append(prev + entry[:1])
            prev = entry
            if len(table) > mask and bits < max_bits:
                bits += 1
                break
    return bytes(out)


def open_trec_file(path: str | os.PathLike) -> IO[bytes]:
    """Opens a plain, gzip, bzip2 or unix-compress file for binary reading (decided by its first bytes)."""
    with open(path, "rb") as f:
        if f.read(2) == _LZW_MAGIC:
            f.seek(0)
            return io.BytesIO(unlzw(f.read()))
    return open_binary(path)


# ---------------------------------------------------------------------------------------------------------------------
# SGML documents
# ---------------------------------------------------------------------------------------------------------------------

_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.S | re.I)
_TITLES = [re.compile(rf"<{tag}>(.*?)</{tag}>", re.S | re.I) for tag in ("HEADLINE", "TI", "DOCTITLE")]
_TEXT = re.compile(r"<TEXT>(.*?)</TEXT>", re.S | re.I)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_PARAGRAPH_TAG = re.compile(r"</?P\b[^>]*>", re.I)
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n")
_SGML_ENTITIES = {"&hyph;": "-", "&blank;": " ", "&space;": " ", "&lsqb;": "[", "&rsqb;": "]"}
_ENTITY = re.compile("|".join(map(re.escape, _SGML_ENTITIES)))


def sgml_to_paragraphs(sgml: str) -> str:
    """Plain text of an SGML fragment: paragraphs (``<P>`` or blank lines) joined by blank lines, each on one
    line; comments and tags removed, entities decoded."""
    text = _TAG.sub(" ", _PARAGRAPH_TAG.sub("\n\n", _COMMENT.sub(" ", sgml)))
    text = html.unescape(_ENTITY.sub(lambda m: _SGML_ENTITIES[m.group()], text))
    paragraphs = (" ".join(p.split()) for p in _BLANK_LINES.split(text))
    return "\n\n".join(p for p in paragraphs if p)


def parse_trec_document(sgml: str) -> Document | None:
    """One ``<DOC>...</DOC>`` record → Document (id = DOCNO), or None when it has no DOCNO."""
    docno = _DOCNO.search(sgml)
    if docno is None or not docno.group(1):
        return None
    title = next((m for m in (p.search(sgml) for p in _TITLES) if m), None)
    body = "\n\n".join(sgml_to_paragraphs(m.group(1)) for m in _TEXT.finditer(sgml))
    return Document(id=docno.group(1), title=" ".join(sgml_to_paragraphs(title.group(1)).split()) if title else "",
                    sections=[Section("", body.strip())])


def _records(path: str, context: ReadContext) -> Iterator[tuple[int, str]]:
    """(first line, text) of each ``<DOC>`` record of one file; unterminated records and stray text are counted."""
    record: list[str] | None = None
    start, stray, n_records = 0, [], 0
    for line_no, line in read_lines(path, context, unit="line", opener=open_trec_file):
        stripped = line.strip()
        if stripped.upper().startswith("<DOC>"):
            if record is not None:
                context.malformed(f"{path}, line {start}", "<DOC> without </DOC>", DOCUMENT_FORMAT,
                                  key="unterminated_document")
            record, start = [], line_no
        if record is None:
            if stripped:
                stray.append(line_no)
            continue
        record.append(line)
        if stripped.upper().endswith("</DOC>"):
            n_records += 1
            yield start, "\n".join(record)
            record = None
    if record is not None:
        context.malformed(f"{path}, line {start}", "<DOC> without </DOC>", DOCUMENT_FORMAT, key="unterminated_document")
    if not n_records:
        context.stats["file_without_documents"] += 1
    elif stray:
        context.malformed(f"{path}, line {stray[0]}", f"{len(stray)} non-blank line(s) outside <DOC> records",
                          DOCUMENT_FORMAT, key="line_outside_document")
        context.stats["line_outside_document"] += len(stray) - 1


def iter_trec_documents(sources: list[str], stats: Counter, strict: bool = False, encoding: str = "utf-8",
                        fallback_encoding: str | None = "latin-1",
                        exclude_docno_prefixes: tuple[str, ...] = ("CR",)) -> Iterator[Document]:
    """Documents of TREC SGML files (see the module docstring); records whose DOCNO starts with one of
    ``exclude_docno_prefixes`` are skipped and counted (``excluded_document``)."""
    context = ReadContext(strict=strict, encoding=encoding, fallback_encoding=fallback_encoding, stats=stats)
    for path in sources:
        for line_no, sgml in _records(path, context):
            doc = parse_trec_document(sgml)
            if doc is None:
                context.malformed(f"{path}, line {line_no}", "no <DOCNO>", DOCUMENT_FORMAT,
                                  key="document_without_docno")
            elif doc.id.startswith(tuple(exclude_docno_prefixes)):
                context.stats["excluded_document"] += 1
            else:
                doc.metadata["file"] = os.path.basename(path)
                yield doc


def _read_documents(sources: list[str], exclude_docno_prefixes: tuple[str, ...], *,
                    context: ReadContext) -> Iterator[Document]:
    """:func:`iter_trec_documents` as the Arrow cache calls a reader."""
    return iter_trec_documents(sources, context.stats, context.strict, context.encoding, context.fallback_encoding,
                               tuple(exclude_docno_prefixes))


def expand_sources(sources: list[str]) -> list[str]:
    """Files named by ``sources`` (files, folders read recursively, or globs), sorted within each source."""
    files: list[str] = []
    for source in sources:
        if os.path.isdir(source):
            found = [str(p) for p in Path(source).rglob("*") if p.is_file()]
        else:
            found = [p for p in glob.glob(source, recursive=True) if os.path.isfile(p)]
        if not found:
            raise FileNotFoundError(f"no file at {source!r}; expected {LAYOUT}")
        files += sorted(found)
    return files


# ---------------------------------------------------------------------------------------------------------------------
# Topics
# ---------------------------------------------------------------------------------------------------------------------

_FIELD_TAG = re.compile(r"<(num|title|desc|narr)>", re.I)
_FIELD_LABEL = re.compile(r"^\s*(Number|Topic|Description|Narrative)\s*:", re.I)
QueryField = Literal["title", "desc", "narr", "title+desc"]


def read_trec_topics(path, query_field: QueryField = "title", stats: Counter | None = None,
                     strict: bool = False) -> dict[str, QueryRecord]:
    """Reads TREC topics; ``QueryRecord.text`` is the ``query_field`` (``"title+desc"``: both, joined by a space) and
    ``QueryRecord.fields`` has every field. Numeric topic numbers lose leading zeros ("051" → "51", as in qrels).
    A topic without a number or the chosen field, or without ``</top>``, is skipped and counted."""
    context = ReadContext(strict=strict, stats=Counter() if stats is None else stats)
    path = require_path(path, "TREC topics file", f"a TREC topics file: {TOPIC_FORMAT}")
    text = "\n".join(line for _, line in read_lines(path, context, unit="line"))
    topics: dict[str, QueryRecord] = {}
    for start, block in _topic_blocks(text, path, context):
        fields = _topic_fields(block)
        wanted = [fields.get(name, "") for name in query_field.split("+")]
        if not fields.get("num") or not all(wanted):
            context.malformed(f"{path}, line {start}", f"missing <num> or <{query_field}>", TOPIC_FORMAT,
                              key="malformed_topic")
            continue
        qid = str(int(fields["num"])) if fields["num"].isdigit() else fields["num"]
        topics[qid] = QueryRecord(qid, " ".join(wanted), fields)
    return topics


def _topic_blocks(text: str, path, context: ReadContext) -> Iterator[tuple[int, str]]:
    lower = text.lower()
    start = lower.find("<top>")
    while start >= 0:
        end, following = lower.find("</top>", start), lower.find("<top>", start + 5)
        line_no = text.count("\n", 0, start) + 1
        if end < 0 or 0 <= following < end:
            context.malformed(f"{path}, line {line_no}", "<top> without </top>", TOPIC_FORMAT, key="unterminated_topic")
        else:
            yield line_no, text[start + 5 : end]
        start = following


def _topic_fields(block: str) -> dict[str, str]:
    parts = _FIELD_TAG.split(block)
    fields = {}
    for name, value in zip(parts[1::2], parts[2::2], strict=True):
        value = _FIELD_LABEL.sub("", value, count=1)
        fields[name.lower()] = " ".join(value.split())
    return fields


# ---------------------------------------------------------------------------------------------------------------------
# DataModule
# ---------------------------------------------------------------------------------------------------------------------


class Robust04DataModule(RetrievalDataModule):
    """TREC Robust 2004: 528K news articles (TREC Disks 4 & 5 without the Congressional Record), 250 topics
    (301-450, 601-700; 249 have a relevant document), cross-validated over five folds of topics.

    The documents are licensed by NIST (TREC Disks 4 and 5, https://trec.nist.gov/data/cd45/index.html); the
    topics and qrels are https://trec.nist.gov/data/robust/04.testset.gz and ``.../robust/qrels.robust2004.txt``.
    The fold file is for example Anserini's ``src/main/resources/fine_tuning/robust04-paper2-folds.json`` or
    ir_datasets' ``FOLDS`` (``trec_robust04.py``) saved as JSON; see the module docstring. The document
    files are parsed once into an Arrow cache under ``cache_dir``.

    In retrieval mode the ``test_fold`` is the test split, ``val_fold`` the validation split and the other
    folds the training split. Graph-RoBERTa §3.3 draws 8 uniform negatives per training query (the defaults).
    Robust04 ships no BM25 run: for ``negatives="run"`` write one (e.g. with
    :func:`~lit_docemb.data.retrieval.bm25.bm25_run` or Anserini) and set ``negatives_run``.

    Args:
        documents: Document files, folders (read recursively) or globs, e.g. ``[disk4/FT, disk4/FR94, disk5/FBIS,
            disk5/LATIMES]``; plain, gzip or unix-compress files, many ``<DOC>`` records each.
        topics: TREC topics file (needed in retrieval mode).
        qrels: TREC qrels file (needed in retrieval mode).
        folds: Folds file (needed in retrieval mode).
        test_fold: Test fold, counted from 1.
        val_fold: Validation fold counted from 1, ``"next"`` for the fold after ``test_fold`` (cyclically), or
            None for no validation split.
        query_field: Topic field used as the query text.
        exclude_docno_prefixes: Records skipped (and counted) by DOCNO prefix; None: ``["CR"]``, the
            Congressional Record, which is on disk 4 but not in Robust04.
        cache_dir: Cache of ``datasets`` (Arrow files); None uses its default.
        encoding: Text encoding of the files.
        fallback_encoding: Encoding of lines ``encoding`` cannot decode (counted); None replaces the bad
            bytes instead (counted too). The disks are 1990s 8-bit text: Latin-1 recovers their accents.
        num_proc: Processes parsing the document files when the cache is built (None: one).
        num_negatives: See :class:`~lit_docemb.data.retrieval.datamodule.RetrievalDataModule`.
        negatives: See :class:`~lit_docemb.data.retrieval.datamodule.RetrievalDataModule`.
        **kwargs: See :class:`~lit_docemb.data.retrieval.datamodule.RetrievalDataModule` and
            :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, documents: list[str], topics: str | None = None, qrels: str | None = None,
                 folds: str | None = None, test_fold: int = 1, val_fold: int | Literal["next"] | None = "next",
                 query_field: QueryField = "title", exclude_docno_prefixes: list[str] | None = None,
                 cache_dir: str | None = None, encoding: str = "utf-8", fallback_encoding: str | None = "latin-1",
                 num_proc: int | None = None, num_negatives: int = 8,
                 negatives: Literal["uniform", "run"] = "uniform", **kwargs) -> None:
        super().__init__(num_negatives=num_negatives, negatives=negatives, **kwargs)
        self.sources, self.topics_file, self.qrels_file, self.folds_file = documents, topics, qrels, folds
        self.test_fold, self.val_fold, self.query_field = test_fold, val_fold, query_field
        self.exclude_docno_prefixes = ["CR"] if exclude_docno_prefixes is None else exclude_docno_prefixes
        self.cache_dir, self.encoding, self.fallback_encoding = cache_dir, encoding, fallback_encoding
        self.num_proc = num_proc
        self.val_split = None if val_fold is None else "val"
        self.test_split = "test"
        self._judged: tuple[dict[str, QueryRecord], Qrels, list[list[str]]] | None = None

    def config_paths(self) -> dict[str, tuple[str | list[str] | None, str]]:
        return {**super().config_paths(), "documents": (self.sources, "the TREC Disks 4 & 5 files or folders"),
                "topics": (self.topics_file, "the TREC topics file"), "qrels": (self.qrels_file, "the qrels file"),
                "folds": (self.folds_file, "the folds file")}

    def load_documents(self) -> ArrowDocuments:
        context = ReadContext(strict=self.strict, encoding=self.encoding, fallback_encoding=self.fallback_encoding,
                              stats=self.stats)
        files = expand_sources(self.sources)
        kwargs = {"sources": files, "exclude_docno_prefixes": tuple(self.exclude_docno_prefixes)}
        return cached_documents(_read_documents, kwargs, inputs=files, context=context, cache_dir=self.cache_dir,
                                num_proc=self.num_proc, shard_over="sources")

    def fold_ids(self, n_folds: int) -> dict[str, list[int]]:
        """Fold indices (from 0) of the train, val and test splits."""
        val = self.test_fold % n_folds + 1 if self.val_fold == "next" else self.val_fold
        if not 1 <= self.test_fold <= n_folds or val == self.test_fold or (val is not None and not 1 <= val <= n_folds):
            raise ValueError(f"need 1 <= test_fold != val_fold <= {n_folds}, got {self.test_fold} and {val}")
        held_out = {self.test_fold - 1} | ({val - 1} if val else set())
        return {"train": [i for i in range(n_folds) if i not in held_out], "test": [self.test_fold - 1],
                "val": [val - 1] if val else []}

    def _load_judged(self) -> tuple[dict[str, QueryRecord], Qrels, list[list[str]]]:
        if self._judged is None:
            missing = [n for n, v in (("topics", self.topics_file), ("qrels", self.qrels_file),
                                      ("folds", self.folds_file)) if v is None]
            if missing:
                raise ValueError(f"Robust04DataModule in retrieval mode needs {', '.join(missing)} file(s)")
            stats: Counter = Counter()
            topics = read_trec_topics(self.topics_file, self.query_field, stats, self.strict)
            qrels = read_qrels(self.qrels_file, stats, self.strict)
            folds = read_folds(self.folds_file)
            in_folds = {q for fold in folds for q in fold}
            stats["qrels_topic_not_in_folds"] += len(set(qrels) - in_folds)
            stats["fold_topic_not_in_topics"] += len(in_folds - set(topics))
            self.count("topics", stats)
            self._judged = topics, qrels, folds
        return self._judged

    def load_split(self, name: str) -> QuerySplit:
        topics, qrels, folds = self._load_judged()
        chosen = self.fold_ids(len(folds))[name]
        if name in ("test", "val"):  # an empty training fold only adds no query; an empty held-out fold is no split
            key = "test_fold" if name == "test" else "val_fold"
            for i in chosen:
                if not folds[i]:
                    raise ConfigError(f"data.init_args.{key}: fold {i + 1} of {self.folds_file} is empty; choose "
                                      f"a fold with queries or fill it in the folds file")
        wanted = {q for i in chosen for q in folds[i]}
        return QuerySplit({q: t for q, t in topics.items() if q in wanted},
                          {q: j for q, j in qrels.items() if q in wanted}, None)
