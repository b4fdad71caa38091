"""A retrieval collection in the BEIR layout (Thakur et al. 2021), as the ``beir`` package's ``GenericDataLoader`` and
most retrieval tools read it: Cranfield, SciFact, NFCorpus, FiQA, TREC-COVID and the other BEIR sets."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import ReadContext, cached_documents, read_lines, require_path
from lit_docemb.data.retrieval.datamodule import QuerySplit, RetrievalDataModule
from lit_docemb.data.retrieval.trec import Qrels, QueryRecord, has_visible_text
from lit_docemb.errors import ConfigError

LAYOUT = """a BEIR folder:
    corpus.jsonl                   one {"_id", "title", "text"} object a line
    queries.jsonl                  one {"_id", "text"} object a line
    qrels/<split>.tsv              query-id<TAB>corpus-id<TAB>score, after a header line (split: train, dev, test)"""
CORPUS_RECORD = 'one JSON object {"_id", "title", "text"} a line'
QUERY_RECORD = 'one JSON object {"_id", "text"} a line'
QRELS_LINE = "query-id<TAB>corpus-id<TAB>score (an integer), after the header line query-id corpus-id score"


def _records(path: str | Path, context: ReadContext, expected: str) -> Iterator[tuple[str, dict]]:
    """("<file>, line N", record) of each JSON line with a string or number ``_id``; other lines counted."""
    for line_no, line in read_lines(path, context, unit="line"):
        if not line.strip():
            continue
        where = f"{path}, line {line_no}"
        try:
            record = context.json(line, unit="line")
        except json.JSONDecodeError as err:
            context.malformed(where, f"invalid JSON ({err.msg})", expected, key="malformed_line")
            continue
        if not isinstance(record, dict) or not isinstance(record.get("_id"), str | int) \
                or not str(record["_id"]).strip():
            context.malformed(where, "not a JSON object with an _id", expected, key="malformed_line")
            continue
        yield where, record


def iter_beir_corpus(path: str, *, context: ReadContext) -> Iterator[Document]:
    """Documents of a BEIR ``corpus.jsonl``: id = ``_id``, title = ``title``, one section = ``text`` (whitespace
    runs of a paragraph collapsed, as the file has no paragraphs to keep); a repeated ``_id`` is counted
    (``duplicate_document_id``) and skipped, as BEIR's loader keeps one document per id."""
    seen: set[str] = set()
    for where, record in _records(path, context, CORPUS_RECORD):
        document_id = str(record["_id"]).strip()
        if document_id in seen:
            context.malformed(where, f"_id {document_id!r} seen before", CORPUS_RECORD, key="duplicate_document_id")
            continue
        seen.add(document_id)
        title, text = record.get("title") or "", record.get("text") or ""
        if not (isinstance(title, str) and isinstance(text, str)):
            context.malformed(where, "title or text is not a string", CORPUS_RECORD)
            continue
        yield Document(id=document_id, title=" ".join(title.split()), sections=[Section("", text.strip())])


def read_beir_queries(path: Path, context: ReadContext) -> dict[str, QueryRecord]:
    """query id → :class:`~lit_docemb.data.retrieval.trec.QueryRecord` of a BEIR ``queries.jsonl``; empty queries and
    repeated ids are counted and skipped."""
    queries: dict[str, QueryRecord] = {}
    for where, record in _records(path, context, QUERY_RECORD):
        query_id, text = str(record["_id"]).strip(), record.get("text")
        if not isinstance(text, str) or not has_visible_text(text):
            context.malformed(where, "empty query text", QUERY_RECORD, key="empty_query")
        elif query_id in queries:
            context.malformed(where, f"query id {query_id!r} seen before", QUERY_RECORD, key="duplicate_query_id")
        else:
            queries[query_id] = QueryRecord(query_id, " ".join(text.split()), {"text": text})
    return queries


def read_beir_qrels(path: Path, context: ReadContext) -> Qrels:
    """A BEIR ``qrels/<split>.tsv``: the header line skipped (as BEIR's loader skips it), then one judgement a
    line; malformed lines and repeated pairs are counted and skipped."""
    qrels: Qrels = {}
    for line_no, line in read_lines(path, context, unit="line"):
        fields = line.split("\t")
        if line_no == 1 and fields[0].strip() == "query-id" or not line.strip():
            continue
        where = f"{path}, line {line_no}"
        score = fields[2].strip() if len(fields) == 3 else ""
        if len(fields) != 3 or not score.lstrip("-").isdigit() or not fields[0].strip() or not fields[1].strip():
            context.malformed(where, f"got {line[:80]!r}", QRELS_LINE, key="malformed_qrels_line")
            continue
        judged = qrels.setdefault(fields[0].strip(), {})
        if fields[1].strip() in judged:
            context.malformed(where, f"({fields[0].strip()}, {fields[1].strip()}) judged twice", QRELS_LINE,
                              key="duplicate_qrels_entry")
            continue
        judged[fields[1].strip()] = int(score)
    return qrels


class BEIRDataModule(RetrievalDataModule):
    """A BEIR folder: its corpus as documents (pre-training, embedding), its test qrels ranked by ``evaluate``
    (nDCG@10, MRR@10, Recall@100...), and, where it has train qrels, retrieval fine-tuning examples
    (``mode: retrieval``, as for the other ranking corpora). Expected layout under ``root``::

        corpus.jsonl                   {"_id", "title", "text"} a line
        queries.jsonl                  {"_id", "text"} a line (every split's queries)
        qrels/<split>.tsv              query-id  corpus-id  score, after a header line

    A split's queries are those its qrels judge (read from ``queries.jsonl``), as BEIR's loader keeps them. The
    folders are published at https://github.com/beir-cellar/beir (each set a zip) and on the hub as
    ``BeIR/<name>``; ``corpus.jsonl`` is read once into an Arrow cache under ``cache_dir``. The files are UTF-8
    (JSON); undecodable bytes are replaced and counted.

    Args:
        root: The BEIR folder.
        train_split: Name of the training qrels (``qrels/<train_split>.tsv``), read in ``mode: retrieval`` and for
            ``val_queries_from_train``; ``None``: none (Cranfield has test qrels only).
        val_split: Name of the validation qrels (``dev`` where the set has them); ``None``: none.
        test_split: Name of the test qrels, the queries ``evaluate`` ranks; ``None``: none.
        negatives: ``"uniform"`` (the default here: a BEIR folder carries no run), or ``"run"`` with
            ``negatives_run`` (e.g. written by ``dense-search`` from an earlier checkpoint).
        cache_dir: Cache of ``datasets`` (Arrow files); None uses its default.
        **kwargs: See :class:`~lit_docemb.data.retrieval.datamodule.RetrievalDataModule` (``mode``, ``num_negatives``...)
            and :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, root: str, train_split: str | None = "train", val_split: str | None = None,
                 test_split: str | None = "test", negatives: Literal["uniform", "run"] = "uniform",
                 cache_dir: str | None = None, **kwargs) -> None:
        super().__init__(negatives=negatives, **kwargs)
        self.root, self.cache_dir = Path(root).expanduser(), cache_dir
        self.train_split, self.val_split, self.test_split = train_split, val_split, test_split
        if self.mode == "retrieval" and train_split is None:
            raise ConfigError("data.init_args.train_split is null, but mode: retrieval trains on the training qrels: "
                              "name them (qrels/<train_split>.tsv), or use mode: documents")
        if negatives == "run" and self.negatives_run is None:
            raise ConfigError("data.init_args.negatives: run needs data.init_args.negatives_run (a BEIR folder has no "
                              "run file): give one (dense-search writes it), or use negatives: uniform")

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        return {**super().config_paths(), "root": (str(self.root), "a BEIR folder (corpus.jsonl, queries.jsonl, "
                                                                   "qrels/<split>.tsv)")}

    def load_documents(self) -> ArrowDocuments:
        path = require_path(self.root / "corpus.jsonl", "BEIR corpus", LAYOUT)
        context = ReadContext(strict=self.strict, stats=self.stats)
        return cached_documents(iter_beir_corpus, {"path": str(path)}, inputs=[path], context=context,
                                cache_dir=self.cache_dir)

    def load_split(self, name: str) -> QuerySplit:
        qrels_path = self.root / "qrels" / f"{name}.tsv"
        if not qrels_path.is_file():
            key = next(k for k in ("train_split", "val_split", "test_split") if getattr(self, k) == name)
            present = sorted(p.stem for p in (self.root / "qrels").glob("*.tsv"))
            raise ConfigError(f"data.init_args.{key}: {qrels_path} does not exist (the folder's qrels: "
                              f"{present or 'none'}): name one of them, or set {key} to null")
        stats: Counter = Counter()
        context = ReadContext(strict=self.strict, stats=stats)
        qrels = read_beir_qrels(qrels_path, context)
        everything = read_beir_queries(require_path(self.root / "queries.jsonl", "BEIR queries", LAYOUT), context)
        queries = {q: everything[q] for q in qrels if q in everything}
        self.count(name, stats)
        return QuerySplit(queries, qrels, None)
