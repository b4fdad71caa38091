"""arXiv: the long-document classification set (He et al. 2019) or the arXiv metadata snapshot (CTPE)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.corpora.arxiv_formats import LABEL_READINGS, iter_arxiv_classification, iter_arxiv_metadata
from lit_docemb.data.core.datamodule import DocumentDataModule, DocumentDataset, stable_fraction
from lit_docemb.data.core.few_shot import ids_at, keep_few_shot
from lit_docemb.data.core.reading import ReadContext, cached_documents, require_path
from lit_docemb.errors import ConfigError, require

LAYOUT = """\
  classification set: <source>/<class>/<paper>.txt, one folder per class (cs.AI, cs.CE, ..., math.ST), or
  metadata snapshot:  <source> = arxiv-metadata-oai-snapshot.json (JSON lines; .gz/.bz2/.xz accepted)"""


class ArxivDataModule(DocumentDataModule):
    """arXiv papers as documents with a category label.

    Two sources (:mod:`lit_docemb.data.corpora.arxiv_formats` describes both formats)::

      classification set: <source>/<class>/<paper>.txt, one folder per class (cs.AI, cs.CE, ..., math.ST), or
      metadata snapshot:  <source> = arxiv-metadata-oai-snapshot.json (JSON lines; .gz/.bz2/.xz accepted)

    * The long-document classification set of He et al. 2019 (arXiv-11, full texts, label = folder name, ids
      ``arxiv11:<class>/<file>``): the per-class archives published with the paper
      (github.com/LiqunW/Long-document-dataset), extracted; the same texts with train/validation/test splits
      are on the Hugging Face hub as ``ccdv/arxiv-classification``
      (use :class:`~lit_docemb.data.corpora.labelled.LabelledTextDataModule` for that copy).
    * The metadata snapshot (Kaggle ``Cornell-University/arxiv``): sections ``Title`` | ``Abstract``, ids
      ``arxiv:<arXiv id>``, label = the first category or its archive (``label_by``; every category kept in
      ``metadata["categories"]``).

    Both are converted once into an Arrow cache under ``cache_dir``. Neither release has splits: validation
    documents are held out by id hash (``val_fraction``), and so is a test split (``test_fraction``), disjoint
    from validation, so that ``test`` never scores the documents that selected the checkpoint. Graph-RoBERTa's
    arXiv-11 split is random 80/10/10 (25,568/3,196/3,197; the paper's own draw is not published):
    ``val_fraction: 0.1``, ``test_fraction: 0.1``.

    Args:
        source: The class-folder root or the snapshot file.
        source_format: ``"auto"`` (a folder is the classification set, a file the snapshot),
            ``"classification"`` or ``"metadata"``.
        classes: Classification set: read only these class folders (``None``: all).
        category_prefixes: Snapshot: keep only papers with a category starting with one of these (``["cs."]``).
        label_by: Snapshot: the label is the paper's first category (``"first_category"``: ``cs.AI``) or that
            category's archive (``"archive"``: ``cs``; the 38 classes of DocSplit's arXiv set, seed paper 001
            §4.2). The classification set's label is its folder: ``"archive"`` is refused there.
        encoding: Encoding of the classification set's text files.
        strict: Raise on a malformed record instead of skipping and counting it.
        cache_dir: Cache of ``datasets`` (Arrow files); ``None`` uses its default.
        test_fraction: Share of documents held out as the test split (by id hash, disjoint from validation);
            ``0`` has no test split, and ``test`` is refused.
        few_shot_per_class: Train on this many documents of each label only (DocSplit Table 2: 10 per class),
            drawn from the training split once validation and test are held out, which stay those of the full run
            (:mod:`lit_docemb.data.core.few_shot`); every label of the training split must have that many.
            ``None`` trains on the whole split.
        few_shot_seed: Which draw (DocSplit's 10 repeats: seeds 0-9).
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(
        self,
        source: str,
        source_format: Literal["auto", "classification", "metadata"] = "auto",
        classes: list[str] | None = None,
        category_prefixes: list[str] | None = None,
        label_by: Literal["first_category", "archive"] = "first_category",
        encoding: str = "utf-8",
        strict: bool = False,
        cache_dir: str | None = None,
        test_fraction: float = 0.0,
        few_shot_per_class: int | None = None,
        few_shot_seed: int = 0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        require(few_shot_per_class is None or few_shot_per_class >= 1, "few_shot_per_class", ">= 1 or null",
                few_shot_per_class)
        self.few_shot_per_class, self.few_shot_seed = few_shot_per_class, few_shot_seed
        require(0.0 <= test_fraction and self.val_fraction + test_fraction < 1.0, "test_fraction",
                "in [0, 1 - val_fraction)", test_fraction)
        require(label_by in LABEL_READINGS, "label_by", f"one of {list(LABEL_READINGS)}", label_by)
        self.test_fraction = test_fraction
        self.label_by = label_by
        self.test_set: DocumentDataset | None = None
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
            if self.label_by != "first_category":
                raise ConfigError(f"data.init_args.label_by {self.label_by!r} applies to the metadata snapshot; "
                                  f"{self.source!r} is the classification set, labelled by its class folders: "
                                  "remove label_by")
            reader, kwargs = iter_arxiv_classification, {"root": str(path), "classes": self.classes}
        else:
            reader, kwargs = iter_arxiv_metadata, {"path": str(path), "category_prefixes": self.category_prefixes,
                                                   "label_by": self.label_by}
        context = ReadContext(strict=self.strict, encoding=self.encoding)
        documents = cached_documents(reader, kwargs, inputs=[path], context=context, cache_dir=self.cache_dir)
        self.stats.update(context.stats)
        return documents

    def setup(self, stage: str | None = None) -> None:
        """The base split, then the test documents taken out of the training ones: those whose id hash falls in
        ``[val_fraction, val_fraction + test_fraction)``; then the few-shot draw (``few_shot_per_class``)."""
        if self.train_set is not None:
            return
        super().setup(stage)
        if self.test_fraction:
            self._hold_out_test()
        if self.few_shot_per_class is not None:
            keep_few_shot(self, self.few_shot_per_class, self.few_shot_seed)

    def _hold_out_test(self) -> None:
        train = self.train_set.indices
        ids = ids_at(self.documents, train)
        bound = self.val_fraction + self.test_fraction
        held_out = np.fromiter((stable_fraction(doc_id, self.seed) < bound for doc_id in ids), dtype=bool,
                               count=len(ids))
        if held_out.all():
            raise ConfigError(f"data.init_args.test_fraction {self.test_fraction} leaves no training document "
                              f"(of {len(ids)}): lower it")
        self.train_set = DocumentDataset(self.documents, train[~held_out])
        self.test_set = DocumentDataset(self.documents, train[held_out])
        self._open_token_cache()
        self.report_reading("test split", int(held_out.sum()), {"train": len(self.train_set), "validation":
                            len(self.val_set), "test": len(self.test_set)}, Counter())

    def _open_token_cache(self) -> None:
        super()._open_token_cache()
        if self.test_set is not None:
            self.test_set.documents = self.train_set.documents

    def test_dataloader(self):
        """The held-out test documents (``test_fraction``), never the validation ones."""
        if self.test_set is None:
            raise ConfigError("ArxivDataModule has no test split (data.init_args.test_fraction is 0) and its "
                              "validation documents select the checkpoint: set data.init_args.test_fraction "
                              "(Graph-RoBERTa: 0.1)")
        return self._loader(self.test_set, "validate", shuffle=False)
