"""Any labelled text-classification set: Hugging Face datasets, CSV/TSV/JSON-lines files or one folder per class."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Literal

from lit_docemb.data.arrow import ArrowDocuments
from lit_docemb.data.datamodule import DocumentDataModule, DocumentDataset
from lit_docemb.data.labelled_formats import iter_class_folders, iter_hf_labelled, iter_labelled_table, table_format_of
from lit_docemb.data.reading import ReadContext, cached_documents, load_hf_splits, looks_like_local_path

log = logging.getLogger(__name__)

LAYOUT = """\
  a Hugging Face dataset name (e.g. SetFit/20_newsgroups, stanfordnlp/imdb, ccdv/arxiv-classification), a
  save_to_disk folder, or a folder of parquet files; or
  <file>.csv | .tsv | .jsonl (optionally .gz/.bz2/.xz): one document per record; or
  <folder>/{train,test}.csv|.tsv|.jsonl, or <folder>/{train,test}/<label>/<document file>; or
  <folder>/<label>/<document file> (no test split)"""


class LabelledTextDataModule(DocumentDataModule):
    """Documents with string labels for classification probes and supervised training.

    Where users get the sets: the Hugging Face hub (20 Newsgroups ``SetFit/20_newsgroups``, IMDB
    ``stanfordnlp/imdb``, BBC News ``SetFit/bbc-news``, arXiv-11 ``ccdv/arxiv-classification``, R8/R52/Ohsumed/MR
    in several community conversions) or the original archives, which are folder-per-class
    (``20news-bydate-train/<newsgroup>/<n>``, ``aclImdb/train/{neg,pos}/*.txt``, ``bbc/<topic>/*.txt``).
    ``source`` is one of:

    * a Hugging Face dataset name, a ``save_to_disk`` folder, or a folder of parquet/arrow files;
    * a ``.csv`` / ``.tsv`` / ``.jsonl`` file (optionally ``.gz``/``.bz2``/``.xz``), one document per record;
    * a folder holding ``train.<ext>`` and ``test.<ext>`` tables, or ``train/`` and ``test/`` class-folder trees
      (the names are ``train_split`` / ``test_split``);
    * a folder ``<label>/<document file>`` (no test split).

    A test split is read when the source has one (``test_split``; a hub split, a ``test`` file or folder beside
    ``train``, or ``test_source``); it is served by ``test_dataloader``, and validation documents are held out
    of the training split by id hash. Ids: ``id_column`` if given, else ``"<split>:<row>"`` (hub),
    ``"<file name>:<line>"`` (tables) or ``"<split>/<label>/<file>"`` (folders). Bad records are skipped and
    counted (see :mod:`lit_docemb.data.reading`).

    Args:
        source: One of the sources listed above.
        source_format: ``"auto"`` (by what ``source`` is), ``"hf"``, ``"csv"``, ``"tsv"``, ``"jsonl"`` or
            ``"folders"``.
        subset: Configuration name of a hub dataset.
        train_split: Split (hub) or file / folder name (local) of the training documents.
        test_split: Same for the test documents; ``None`` reads no test split.
        test_source: A local test file or folder elsewhere (overrides ``test_split`` for local sources).
        text_column: Column of the text, or several columns, each becoming a section headed by its name.
        label_column: Column of the label; ``None`` reads unlabelled text.
        id_column: Column of unique document ids; ``None`` derives ids from the position.
        title_column: Column of the title, if any.
        column_names: Column names of a CSV/TSV file without header line.
        delimiter: Field separator of a delimited file (``None``: by extension).
        csv_quoting: Honour ``"``-quoted fields (``None``: for ``.csv``, not for ``.tsv``).
        classes: Folder layout: read only these class folders (e.g. ``["neg", "pos"]`` for aclImdb).
        encoding: Encoding of local files (``"latin-1"`` for the original 20 Newsgroups).
        strict: Raise on a malformed record instead of skipping and counting it.
        cache_dir: Cache of ``datasets`` (converted Arrow tables); ``None`` uses its default.
        **kwargs: See :class:`~lit_docemb.data.datamodule.DocumentDataModule`.
    """

    def __init__(
        self,
        source: str,
        source_format: Literal["auto", "hf", "csv", "tsv", "jsonl", "folders"] = "auto",
        subset: str | None = None,
        train_split: str = "train",
        test_split: str | None = "test",
        test_source: str | None = None,
        text_column: str | list[str] = "text",
        label_column: str | None = "label",
        id_column: str | None = None,
        title_column: str | None = None,
        column_names: list[str] | None = None,
        delimiter: str | None = None,
        csv_quoting: bool | None = None,
        classes: list[str] | None = None,
        encoding: str = "utf-8",
        strict: bool = False,
        cache_dir: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.source, self.source_format, self.subset = source, source_format, subset
        self.train_split, self.test_split, self.test_source = train_split, test_split, test_source
        self.columns = {"text_column": text_column, "label_column": label_column, "id_column": id_column,
                        "title_column": title_column}
        self.table_options = {"column_names": column_names, "delimiter": delimiter, "quoting": csv_quoting}
        self.classes, self.encoding, self.strict, self.cache_dir = classes, encoding, strict, cache_dir
        self.test_set: DocumentDataset | None = None

    # ------------------------------------------------------------------------------------------------- sources
    def _local_split(self, split: str) -> Path | None:
        """The file or class-folder tree of a split of a local ``source``, None when there is none."""
        if split == self.test_split and self.test_source is not None:
            return Path(self.test_source).expanduser()
        root = Path(self.source).expanduser()
        if root.is_file():
            return root if split == self.train_split else None
        found = self._split_entry(root, split)
        if found is None and split == self.train_split:
            if self.test_split is not None and self._split_entry(root, self.test_split) is not None:
                raise FileNotFoundError(f"{self.source!r} has a {self.test_split!r} split but no "
                                        f"{self.train_split!r}. Expected:\n{LAYOUT}")
            return root  # <folder>/<label>/<file>
        return found

    @staticmethod
    def _split_entry(root: Path, split: str) -> Path | None:
        candidates = [root / split, *sorted(p for p in root.glob(f"{split}.*") if table_format_of(p))]
        return next((p for p in candidates if p.exists()), None)

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        local = looks_like_local_path(self.source)
        return {"source": (self.source if local else None, "a labelled-text file or folder, or a hub name"),
                "test_source": (self.test_source, "a local test file or folder")}

    def _is_hf(self) -> bool:
        if self.source_format != "auto":
            return self.source_format == "hf"
        path = Path(self.source).expanduser()
        if not path.exists():
            if looks_like_local_path(self.source):
                raise FileNotFoundError(f"labelled-text source not found at {self.source!r}. Expected:\n{LAYOUT}")
            return True  # a hub name
        if path.is_file():
            return path.suffix in (".parquet", ".arrow")
        hf_files = [*path.glob("*.parquet"), *path.glob("*.arrow"), *path.glob("data/*.parquet")]
        return bool(hf_files) or (path / "state.json").exists() or (path / "dataset_dict.json").exists()

    def _read_split(self, split: str) -> ArrowDocuments | None:
        context = ReadContext(strict=self.strict, encoding=self.encoding)
        if self._is_hf():
            splits = load_hf_splits(self.source, self.subset, self.cache_dir)
            if split not in splits:
                if split == self.train_split:
                    raise ValueError(f"{self.source!r} has no split {split!r} (splits: {sorted(splits)})")
                return None
            kwargs = {"source": self.source, "subset": self.subset, "split": split, "cache_dir": self.cache_dir}
            documents = cached_documents(iter_hf_labelled, {**kwargs, **self.columns}, inputs=[], context=context,
                                         cache_dir=self.cache_dir, identity=[splits[split]._fingerprint],
                                         description=f"{self.source}[{split}]")
        else:
            path = self._local_split(split)
            if path is None:
                return None
            path = Path(path)
            if not path.exists():
                raise FileNotFoundError(f"{split} split not found at {str(path)!r}. Expected:\n{LAYOUT}")
            documents = self._read_local(path, split, context)
        self.stats.update(context.stats)
        return documents

    def _read_local(self, path: Path, split: str, context: ReadContext) -> ArrowDocuments:
        fmt = self.source_format if self.source_format not in ("auto", "hf") else None
        if path.is_dir() and fmt in (None, "folders"):
            prefix = f"{split}/" if path != Path(self.source).expanduser() else ""
            kwargs = {"root": str(path), "classes": self.classes, "id_prefix": prefix}
            return cached_documents(iter_class_folders, kwargs, inputs=[path], context=context,
                                    cache_dir=self.cache_dir)
        fmt = fmt or table_format_of(path)
        if fmt is None or path.is_dir():
            raise ValueError(f"cannot tell the format of {str(path)!r}; set source_format. Expected:\n{LAYOUT}")
        kwargs = {"path": str(path), "table_format": fmt, **self.columns, **self.table_options}
        return cached_documents(iter_labelled_table, kwargs, inputs=[path], context=context, cache_dir=self.cache_dir)

    # ------------------------------------------------------------------------------------------------- splits
    def load_documents(self) -> ArrowDocuments:
        return self._read_split(self.train_split)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        super().setup(stage)  # reads the training split
        before = Counter(self.stats)
        test = self._read_split(self.test_split) if self.test_split is not None else None
        self.test_set = DocumentDataset(test) if test is not None else None
        if test is not None:
            self.report_reading("test", len(test), {"test": len(test)}, self.stats - before)

    @property
    def labels(self) -> list[str]:
        """Sorted label names of the training split (after ``setup``)."""
        return sorted(label for label in self.train_set.documents.table.unique("label") if label is not None)

    def test_dataloader(self):
        """The source's test split when it has one, else the held-out validation documents."""
        return self._loader(self.test_set if self.test_set is not None else self.val_set, "validate", shuffle=False)
