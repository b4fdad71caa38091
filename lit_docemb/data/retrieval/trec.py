"""Queries, relevance judgements, runs and folds of the ranking corpora (MSMARCO documents, Robust04, WIKIR).

**Formats** (all may be gzip-, bzip2- or xz-compressed; compression is detected from the first bytes):

* queries: ``qid<TAB>text`` lines (MSMARCO ``msmarco-doc{train,dev}-queries.tsv.gz``), or a CSV with the header
  ``id_left,text_left`` (the WIKIR / MatchZoo ``queries.csv``); TREC topic files are read by
  :func:`lit_docemb.data.corpora.robust04.read_trec_topics`;
* qrels (TREC): ``qid iteration docid relevance``, whitespace-separated;
* runs (TREC): ``qid Q0 docid rank score tag``, whitespace-separated. :func:`write_run` orders each query by
  score, descending, and breaks ties by docid, descending (plain string order): the order trec_eval and
  pytrec_eval use themselves, so the ranks written are the ranks evaluated;
* folds: JSON (a list of lists like Anserini's ``robust04-paper2-folds.json``, or ``{"fold1": [...], ...}``)
  or text with one fold per line.

**Bad input.** Readers take a ``stats`` Counter and follow the package's policy
(:class:`~lit_docemb.data.core.reading.ReadContext`): a malformed line is skipped and counted (the first few are
logged with file and line), or, with ``strict=True``, raises
:class:`~lit_docemb.data.core.reading.MalformedInputError` naming the file, the line and the expected format.
Undecodable bytes are replaced and counted (``undecodable_line``). A missing file raises
``FileNotFoundError`` describing what was expected there.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lit_docemb.data.core.reading import (
    MalformedInputError,
    ReadContext,
    open_binary,
    read_lines,
    require_path,
)

Qrels = dict[str, dict[str, int]]
"""query id → {document id: relevance}, the shape pytrec_eval takes."""
Run = dict[str, dict[str, float]]
"""query id → {document id: score}, the shape pytrec_eval takes."""

QRELS_FORMAT = "TREC qrels 'qid iteration docid relevance' (4 whitespace-separated fields, integer relevance)"
RUN_FORMAT = "TREC run 'qid Q0 docid rank score tag' (6 whitespace-separated fields, numeric rank and score)"


@dataclass
class QueryRecord:
    """A query as a queries file holds it: its id, the text the model reads and every field the source has (e.g.
    TREC title/desc/narr). What a method embeds is built from its text:
    :class:`~lit_docemb.data.core.document.Query` (``query_document``)."""

    id: str
    text: str
    fields: dict[str, str] = field(default_factory=dict)


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a letter, digit, punctuation mark or symbol other than U+FFFD: what a tokenizer's
    normaliser keeps (BERT's drops control and format characters, U+FFFD and, when stripping accents, combining
    marks), so that the text cannot tokenize to nothing but special tokens."""
    return any(c != "\ufffd" and unicodedata.category(c)[0] in "LNPS" for c in text)


def read_queries(path, stats: Counter | None = None, strict: bool = False,
                 format: Literal["auto", "tsv", "csv"] = "auto", encoding: str = "utf-8") -> dict[str, QueryRecord]:
    """Reads ``qid<TAB>text`` lines, or a CSV with header ``id_left,text_left`` (``format="auto"``: by the
    ``.csv``/``.csv.gz`` suffix). Lines without both fields, empty queries (no letter, digit, punctuation or
    symbol: whitespace, control and format characters, U+FFFD only) and repeated ids are skipped and counted."""
    context = ReadContext(strict=strict, encoding=encoding, stats=Counter() if stats is None else stats)
    path = require_path(path, "queries file",
                        "a queries file: 'qid<TAB>text' lines, or a CSV with header id_left,text_left")
    is_csv = format == "csv" or (format == "auto" and path.name.removesuffix(".gz").endswith(".csv"))
    expected = "a CSV row 'id,text' under header id_left,text_left" if is_csv else "'qid<TAB>query text'"
    queries: dict[str, QueryRecord] = {}
    for line_no, fields in (read_csv_rows(path, context, ("id_left", "text_left")) if is_csv
                            else _tsv_rows(path, context)):
        where = f"{path}, line {line_no}"
        if len(fields) != 2 or not fields[0].strip():
            context.malformed(where, f"{len(fields)} field(s)", expected, key="malformed_query_line")
        elif not has_visible_text(fields[1]):
            context.malformed(where, "empty query text", expected, key="empty_query")
        elif fields[0].strip() in queries:
            context.malformed(where, f"query id {fields[0]!r} seen before", expected, key="duplicate_query_id")
        else:
            queries[fields[0].strip()] = QueryRecord(fields[0].strip(), " ".join(fields[1].split()))
    return queries


def _tsv_rows(path: Path, context: ReadContext) -> Iterator[tuple[int, list[str]]]:
    for line_no, line in read_lines(path, context, unit="line"):
        if line.strip():
            yield line_no, line.split("\t", 1)


def read_csv_rows(path: Path, context: ReadContext, header: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """CSV rows after checking the header (quoted fields may span lines; numbers are the row's first line)."""
    csv.field_size_limit(2**31 - 1)  # documents are longer than the default 128 KiB field limit
    reader = csv.reader(line for _, line in read_lines(path, context, keepends=True, unit="line"))
    first = next(reader, None)
    if first is None or tuple(c.strip() for c in first) != header:
        raise MalformedInputError(f"{path}, line 1: header {first!r}; expected the CSV header {','.join(header)}")
    line_no = reader.line_num
    for row in reader:
        if row:
            yield line_no + 1, row
        line_no = reader.line_num


def read_qrels(path, stats: Counter | None = None, strict: bool = False) -> Qrels:
    """Reads TREC qrels (``qid iteration docid relevance``); malformed lines and repeated pairs are counted."""
    context = ReadContext(strict=strict, stats=Counter() if stats is None else stats)
    path = require_path(path, "qrels file", f"a qrels file in {QRELS_FORMAT}")
    qrels: Qrels = {}
    for line_no, line in read_lines(path, context, unit="line"):
        parts = line.split()
        if not parts:
            continue
        where = f"{path}, line {line_no}"
        if len(parts) != 4 or not _is_int(parts[3]):
            context.malformed(where, f"got {line[:80]!r}", QRELS_FORMAT, key="malformed_qrels_line")
            continue
        judged = qrels.setdefault(parts[0], {})
        if parts[2] in judged:
            context.malformed(where, f"({parts[0]}, {parts[2]}) judged twice", QRELS_FORMAT,
                              key="duplicate_qrels_entry")
            continue
        judged[parts[2]] = int(parts[3])
    return qrels


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def iter_run(path, stats: Counter | None = None, strict: bool = False) -> Iterator[tuple[str, str, float]]:
    """Streams (query id, document id, score) from a TREC run file; malformed lines are counted or raised."""
    context = ReadContext(strict=strict, stats=Counter() if stats is None else stats)
    path = require_path(path, "run file", f"a run file in {RUN_FORMAT}")
    for line_no, line in read_lines(path, context, unit="line"):
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) != 6:
                raise ValueError
            int(parts[3])
            score = float(parts[4])
            if math.isnan(score):
                raise ValueError
        except ValueError:
            context.malformed(f"{path}, line {line_no}", f"got {line[:80]!r}", RUN_FORMAT, key="malformed_run_line")
            continue
        yield parts[0], parts[2], score


def read_run(path, stats: Counter | None = None, strict: bool = False, depth: int | None = None,
             query_ids: Mapping | set | None = None) -> Run:
    """Reads a TREC run as {qid: {docid: score}}, optionally only ``query_ids`` and each query's top ``depth``
    (in :func:`ranked` order). A document listed twice for a query keeps its first score (counted)."""
    stats = Counter() if stats is None else stats
    run: Run = {}
    for qid, docid, score in iter_run(path, stats, strict):
        if query_ids is not None and qid not in query_ids:
            continue
        scores = run.setdefault(qid, {})
        if docid in scores:
            stats["duplicate_run_entry"] += 1
            continue
        scores[docid] = score
    if depth is not None:
        run = {qid: dict(ranked(scores)[:depth]) for qid, scores in run.items()}
    return run


def ranked(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """(docid, score) by score, descending; ties by docid, descending: trec_eval's own order."""
    by_docid = sorted(scores.items(), reverse=True)
    return sorted(by_docid, key=lambda item: -item[1])


def write_run(run: Mapping[str, Mapping[str, float]], path, run_name: str = "lit_docemb",
              depth: int | None = None) -> None:
    """Writes a TREC run (queries in id order, each in :func:`ranked` order, ranks from 1; ``.gz`` compresses).

    Scores are written with ``repr`` so that :func:`read_run` gives back the same floats.
    """
    if not run_name or any(c.isspace() for c in run_name):
        raise ValueError(f"run_name must be one non-empty token, got {run_name!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        for qid in sorted(run):
            scores = {docid: float(score) for docid, score in run[qid].items()}
            if any(math.isnan(s) for s in scores.values()):
                raise ValueError(f"query {qid}: NaN score")
            for rank, (docid, score) in enumerate(ranked(scores)[:depth], 1):
                f.write(f"{qid} Q0 {docid} {rank} {score!r} {run_name}\n")


def read_folds(path) -> list[list[str]]:
    """Reads cross-validation folds of query ids.

    Accepted: JSON, a list of lists (Anserini's ``robust04-paper2-folds.json``) or an object whose values are
    lists (``{"fold1": [...], ...}``, folds in the file's key order); or text, one fold per non-blank line,
    ids separated by whitespace or commas, ``#`` starting a comment. A query id in two folds or a
    non-string/integer id raises ``ValueError``; an empty JSON fold is kept (a caller refuses it only where it
    uses it, e.g. as the test fold).
    """
    path = require_path(path, "folds file",
                        "a folds file: JSON list of lists / {name: list}, or one fold of query ids per line")
    with open_binary(path) as f:
        text = f.read().decode("utf-8")
    if text.lstrip()[:1] in ("[", "{"):
        data = json.loads(text)
        folds = list(data.values()) if isinstance(data, dict) else data
    else:
        lines = (line.split("#", 1)[0].replace(",", " ").split() for line in text.splitlines())
        folds = [line for line in lines if line]
    return _checked_folds(folds, path)


def _checked_folds(folds, path) -> list[list[str]]:
    checked, owner = [], {}
    for index, fold in enumerate(folds):
        if not isinstance(fold, list) or not all(isinstance(q, (str, int)) for q in fold):
            raise ValueError(f"{path}: fold {index + 1} must be a list of query ids, got {fold!r:.80}")
        for qid in map(str, fold):
            if qid in owner:
                raise ValueError(f"{path}: query {qid} is in folds {owner[qid] + 1} and {index + 1}")
            owner[qid] = index
        checked.append([str(q) for q in fold])
    return checked
