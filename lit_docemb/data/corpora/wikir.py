"""WIKIR (Frej et al. 2019): Wikipedia-based ad hoc retrieval collections in the wikIR release layout."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import ReadContext, cached_documents, require_path
from lit_docemb.data.retrieval.datamodule import QuerySplit, RetrievalDataModule
from lit_docemb.data.retrieval.trec import read_csv_rows, read_qrels, read_queries
from lit_docemb.data.corpora.wikipedia_formats import split_plain_text_sections

DOCUMENT_FORMAT = "a CSV row 'id,text' under the header id_right,text_right"
LAYOUT = """a wikIR collection folder:
    documents.csv                  CSV, header id_right,text_right
    <split>/queries.csv            CSV, header id_left,text_left     (split: training, validation, test)
    <split>/qrels                  TREC qrels: qid 0 docid relevance (2: the query's article, 1: linked)
    <split>/BM25.res               TREC run: qid Q0 docid rank score tag (BM25 top 100)"""


def wikir_sections(text: str) -> list[Section]:
    """Sections of a WIKIR document text.

    The released collections are flattened (lowercased words, punctuation removed, no line breaks): such a
    text is one untitled section. A text that kept its blank-line-separated blocks (a collection rebuilt with
    structure, as Graph-RoBERTa did; ``build-wikir`` writes one block per section) is split with the heading
    heuristic of :func:`~lit_docemb.data.corpora.wikipedia_formats.split_plain_text_sections`; empty sections are
    dropped.
    """
    if not text.strip():
        return []
    if "\n" not in text.strip():
        return [Section("", " ".join(text.split()))]
    return [s for s in split_plain_text_sections(text) if s.text.strip()]


def iter_wikir_documents(sources: list[str], stats: Counter, strict: bool = False,
                         encoding: str = "utf-8") -> Iterator[Document]:
    """Documents of ``documents.csv`` files (the title is not part of a WIKIR document: ``title=""``)."""
    context = ReadContext(strict=strict, encoding=encoding, stats=stats)
    for path in sources:
        for line_no, row in read_csv_rows(Path(path), context, ("id_right", "text_right")):
            if len(row) != 2 or not row[0].strip():
                context.malformed(f"{path}, line {line_no}", f"{len(row)} field(s)", DOCUMENT_FORMAT,
                                  key="malformed_document_row")
                continue
            yield Document(id=row[0].strip(), sections=wikir_sections(row[1]))


def _read_documents(sources: list[str], *, context: ReadContext) -> Iterator[Document]:
    """:func:`iter_wikir_documents` as the Arrow cache calls a reader."""
    return iter_wikir_documents(sources, context.stats, context.strict, context.encoding)


class WIKIRDataModule(RetrievalDataModule):
    """WIKIR collections (wikIR1k, wikIR59k, or one built with the wikIR tool) in the release layout.

    Build one with sections kept, as Graph-RoBERTa did for Table 5, from a Wikipedia dump with ``python -m
    lit_docemb build-wikir`` (:mod:`lit_docemb.data.corpora.wikir_builder`; ``--queries title`` for WIKIR62K,
    first-sentence queries otherwise as in WIKIRS62K), or obtain the flattened public ones from
    https://github.com/getalp/wikIR (links to the Zenodo archives ``wikIR1k.zip`` / ``wikIR59k.zip``; unzip).
    ``documents.csv`` (2.4M documents for wikIR59k) is streamed once into an Arrow cache under ``cache_dir``.
    Expected layout under ``root``::

        documents.csv                  id_right,text_right
        <split>/queries.csv            id_left,text_left        (split: training, validation, test)
        <split>/qrels                  TREC qrels (2: the query's own article, 1: an article it links to)
        <split>/BM25.res               TREC run, BM25 top 100 (negatives="run")

    Use ``min_positive_relevance=2`` to train on the query's own article only; negatives always exclude both
    levels. See :func:`wikir_sections` for the section structure.

    Args:
        root: The collection folder.
        train_split: Folder of the training split.
        val_split: Folder of the validation split (None: none).
        test_split: Folder of the test split (None: none).
        run_file: Name of the run file in each split folder.
        cache_dir: Cache of ``datasets`` (Arrow files); None uses its default.
        encoding: Text encoding of the files (undecodable bytes are replaced and counted).
        **kwargs: See :class:`~lit_docemb.data.retrieval.datamodule.RetrievalDataModule` (``mode``, negatives...) and
            :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, root: str, train_split: str = "training", val_split: str | None = "validation",
                 test_split: str | None = "test", run_file: str = "BM25.res", cache_dir: str | None = None,
                 encoding: str = "utf-8", **kwargs) -> None:
        super().__init__(**kwargs)
        self.root, self.run_file, self.cache_dir, self.encoding = Path(root), run_file, cache_dir, encoding
        self.train_split, self.val_split, self.test_split = train_split, val_split, test_split

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        return {**super().config_paths(), "root": (str(self.root), "the WIKIR collection folder")}

    def load_documents(self) -> ArrowDocuments:
        path = require_path(self.root / "documents.csv", "WIKIR documents", LAYOUT)
        context = ReadContext(strict=self.strict, encoding=self.encoding, stats=self.stats)
        return cached_documents(_read_documents, {"sources": [str(path)]}, inputs=[path], context=context,
                                cache_dir=self.cache_dir)

    def load_split(self, name: str) -> QuerySplit:
        folder = require_path(self.root / name, f"WIKIR {name} split", LAYOUT)
        stats: Counter = Counter()
        queries = read_queries(require_path(folder / "queries.csv", f"WIKIR {name} queries", LAYOUT), stats,
                               self.strict, format="csv", encoding=self.encoding)
        qrels = read_qrels(require_path(folder / "qrels", f"WIKIR {name} qrels", LAYOUT), stats, self.strict)
        self.count(name, stats)
        return QuerySplit(queries, qrels, str(folder / self.run_file))
