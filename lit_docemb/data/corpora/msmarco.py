"""MS MARCO document ranking (Bajaj et al. 2016; the TREC 2019 Deep Learning track's document task)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import ReadContext, cached_documents, read_lines, require_path
from lit_docemb.data.retrieval.datamodule import QuerySplit, RetrievalDataModule
from lit_docemb.data.retrieval.trec import read_qrels, read_queries

DOCUMENT_FORMAT = "'docid<TAB>url<TAB>title<TAB>body' (4 tab-separated fields, non-empty docid)"
LAYOUT = """MS MARCO document ranking files, e.g. in one folder:
    msmarco-docs.tsv[.gz]                  docid<TAB>url<TAB>title<TAB>body, one document per line
    msmarco-doc{train,dev}-queries.tsv.gz  qid<TAB>query
    msmarco-doc{train,dev}-qrels.tsv.gz    TREC qrels: qid 0 docid 1
    msmarco-doc{train,dev}-top100.gz       TREC run: qid Q0 docid rank score runstring (official BM25 top 100)"""


def iter_msmarco_documents(sources: list[str], stats: Counter, strict: bool = False,
                           encoding: str = "utf-8") -> Iterator[Document]:
    """Documents of ``msmarco-docs.tsv`` files; lines without exactly four fields are skipped and counted.

    The body is one flat line of text (the release keeps no paragraph or heading structure), so a document
    has one untitled section; the url goes to ``metadata["url"]``. Blank lines are ignored.
    """
    context = ReadContext(strict=strict, encoding=encoding, stats=stats)
    for path in sources:
        for line_no, line in read_lines(path, context, unit="line"):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 4 or not fields[0].strip():
                context.malformed(f"{path}, line {line_no}", f"{len(fields)} tab-separated field(s)", DOCUMENT_FORMAT,
                                  key="malformed_document_line")
                continue
            docid, url, title, body = (f.strip() for f in fields)
            yield Document(id=docid, title=title, sections=[Section("", body)], metadata={"url": url})


def _read_documents(sources: list[str], *, context: ReadContext) -> Iterator[Document]:
    """:func:`iter_msmarco_documents` as the Arrow cache calls a reader."""
    return iter_msmarco_documents(sources, context.stats, context.strict, context.encoding)


class MSMARCODataModule(RetrievalDataModule):
    """MS MARCO document ranking: 3.2M web documents, 367K training and 5,193 dev queries.

    Obtain the files from https://microsoft.github.io/msmarco/ ("Document Ranking" / TREC-DL 2019 documents
    task: ``msmarco-docs.tsv.gz`` and the ``msmarco-doc{train,dev}-{queries.tsv,qrels.tsv,top100}.gz`` files;
    the TREC DL 2019 test topics ``msmarco-test2019-queries.tsv.gz`` with NIST's ``2019qrels-docs.txt``).
    ``msmarco-docs-lookup.tsv.gz`` is not needed. The documents file is streamed once into an Arrow cache
    under ``cache_dir`` (about 22 GB of text: minutes, once) and memory-mapped from then on; its ``.gz`` is read
    directly. Expected layout::

        msmarco-docs.tsv[.gz]                  docid<TAB>url<TAB>title<TAB>body
        msmarco-doc{train,dev}-queries.tsv.gz  qid<TAB>query
        msmarco-doc{train,dev}-qrels.tsv.gz    TREC qrels (qid 0 docid 1)
        msmarco-doc{train,dev}-top100.gz       TREC run (qid Q0 docid rank score runstring)

    File arguments are relative to ``root`` (or absolute); a name that does not exist is also tried with
    ``.gz`` added or removed. Splits: ``"train"``, ``"dev"`` and, when ``test_queries`` is set, ``"test"``.

    Args:
        root: Folder holding the files.
        documents: The documents TSV.
        train_queries: Training queries TSV.
        train_qrels: Training qrels.
        train_run: Official training top-100 run (negatives="run").
        dev_queries: Dev queries TSV.
        dev_qrels: Dev qrels.
        dev_run: Official dev top-100 run.
        test_queries: Test queries TSV (e.g. ``msmarco-test2019-queries.tsv.gz``), None for no test split.
        test_qrels: Test qrels (e.g. ``2019qrels-docs.txt``).
        test_run: Test run (e.g. ``msmarco-doctest2019-top100.gz``).
        val_split: ``"dev"``, or None for no validation split (see also ``val_queries_from_train``).
        cache_dir: Cache of ``datasets`` (Arrow files); None uses its default.
        encoding: Text encoding of the files (undecodable bytes are replaced and counted).
        **kwargs: See :class:`~lit_docemb.data.retrieval.datamodule.RetrievalDataModule` (``mode``, negatives...) and
            :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, root: str, documents: str = "msmarco-docs.tsv",
                 train_queries: str = "msmarco-doctrain-queries.tsv.gz",
                 train_qrels: str = "msmarco-doctrain-qrels.tsv.gz", train_run: str = "msmarco-doctrain-top100.gz",
                 dev_queries: str = "msmarco-docdev-queries.tsv.gz", dev_qrels: str = "msmarco-docdev-qrels.tsv.gz",
                 dev_run: str = "msmarco-docdev-top100.gz", test_queries: str | None = None,
                 test_qrels: str | None = None, test_run: str | None = None, val_split: Literal["dev"] | None = "dev",
                 cache_dir: str | None = None, encoding: str = "utf-8", **kwargs) -> None:
        super().__init__(**kwargs)
        self.root, self.documents_file, self.cache_dir, self.encoding = root, documents, cache_dir, encoding
        self.split_files = {"train": (train_queries, train_qrels, train_run),
                            "dev": (dev_queries, dev_qrels, dev_run),
                            "test": (test_queries, test_qrels, test_run)}
        self.val_split = val_split
        self.test_split = "test" if test_queries else None

    def _path(self, name: str) -> Path:
        path = Path(self.root) / name
        if not path.exists():
            other = path.with_name(path.name.removesuffix(".gz") if path.suffix == ".gz" else path.name + ".gz")
            path = other if other.exists() else path
        return path

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        return {**super().config_paths(), "root": (self.root, "the MS MARCO document-ranking folder")}

    def load_documents(self) -> ArrowDocuments:
        path = require_path(self._path(self.documents_file), "MS MARCO documents TSV", LAYOUT)
        context = ReadContext(strict=self.strict, encoding=self.encoding, stats=self.stats)
        return cached_documents(_read_documents, {"sources": [str(path)]}, inputs=[path], context=context,
                                cache_dir=self.cache_dir)

    def load_split(self, name: str) -> QuerySplit:
        queries_file, qrels_file, run_file = self.split_files[name]
        if not queries_file or not qrels_file:
            raise ValueError(f"MSMARCODataModule: the {name} split needs both a queries and a qrels file")
        stats: Counter = Counter()
        queries = read_queries(require_path(self._path(queries_file), f"MS MARCO {name} queries", LAYOUT), stats,
                               self.strict, encoding=self.encoding)
        qrels = read_qrels(require_path(self._path(qrels_file), f"MS MARCO {name} qrels", LAYOUT), stats, self.strict)
        self.count(name, stats)
        return QuerySplit(queries, qrels, str(self._path(run_file)) if run_file else None)
