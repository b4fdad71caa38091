"""arXiv: the long-document classification set (He et al. 2019) or the arXiv metadata snapshot (CTPE)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from lit_docemb.data.arrow import ArrowDocuments
from lit_docemb.data.arxiv_formats import iter_arxiv_classification, iter_arxiv_metadata
from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.data.reading import ReadContext, cached_documents, require_path

LAYOUT = """\
  classification set: <source>/<class>/<paper>.txt, one folder per class (cs.AI, cs.CE, ..., math.ST), or
  metadata snapshot:  <source> = arxiv-metadata-oai-snapshot.json (JSON lines; .gz/.bz2/.xz accepted)"""


class ArxivDataModule(DocumentDataModule):
    """arXiv papers as documents with a category label.

    Two sources (:mod:`lit_docemb.data.arxiv_formats` describes both formats)::

      classification set: <source>/<class>/<paper>.txt, one folder per class (cs.AI, cs.CE, ..., math.ST), or
      metadata snapshot:  <source> = arxiv-metadata-oai-snapshot.json (JSON lines; .gz/.bz2/.xz accepted)

    * The long-document classification set of He et al. 2019 (arXiv-11, full texts, label = folder name, ids
      ``arxiv11:<class>/<file>``): the per-class archives published with the paper
      (github.com/LiqunW/Long-document-dataset), extracted; the same texts with train/validation/test splits
      are on the Hugging Face hub as ``ccdv/arxiv-classification``
      (use :class:`~lit_docemb.data.labelled.LabelledTextDataModule` for that copy).
    * The metadata snapshot (Kaggle ``Cornell-University/arxiv``): sections ``Title`` | ``Abstract``, label =
      first category, ids ``arxiv:<arXiv id>``.

    Both are converted once into an Arrow cache under ``cache_dir``; validation documents are held out by id hash.

    Args:
        source: The class-folder root or the snapshot file.
        source_format: ``"auto"`` (a folder is the classification set, a file the snapshot),
            ``"classification"`` or ``"metadata"``.
        classes: Classification set: read only these class folders (``None``: all).
        category_prefixes: Snapshot: keep only papers with a category starting with one of these (``["cs."]``).
        encoding: Encoding of the classification set's text files.
        strict: Raise on a malformed record instead of skipping and counting it.
        cache_dir: Cache of ``datasets`` (Arrow files); ``None`` uses its default.
        **kwargs: See :class:`~lit_docemb.data.datamodule.DocumentDataModule`.
    """

    def __init__(
        self,
        source: str,
        source_format: Literal["auto", "classification", "metadata"] = "auto",
        classes: list[str] | None = None,
        category_prefixes: list[str] | None = None,
        encoding: str = "utf-8",
        strict: bool = False,
        cache_dir: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.source, self.source_format = source, source_format
        self.classes, self.category_prefixes = classes, category_prefixes
        self.encoding, self.strict, self.cache_dir = encoding, strict, cache_dir

    def config_paths(self) -> dict[str, tuple[str, str]]:
        return {"source": (self.source, "the arXiv folder of class folders or the metadata snapshot")}

    def load_documents(self) -> ArrowDocuments:
        path = require_path(Path(self.source).expanduser(), "arXiv source", LAYOUT)
        source_format = self.source_format
        if source_format == "auto":
            source_format = "classification" if path.is_dir() else "metadata"
        if source_format == "classification":
            if not path.is_dir():
                raise NotADirectoryError(f"{self.source!r} is not the class-folder root. Expected:\n{LAYOUT}")
            reader, kwargs = iter_arxiv_classification, {"root": str(path), "classes": self.classes}
        else:
            reader, kwargs = iter_arxiv_metadata, {"path": str(path), "category_prefixes": self.category_prefixes}
        context = ReadContext(strict=self.strict, encoding=self.encoding)
        documents = cached_documents(reader, kwargs, inputs=[path], context=context, cache_dir=self.cache_dir)
        self.stats.update(context.stats)
        return documents
