"""OpenWebText, from the Hugging Face dataset or from the original release's xz-compressed archives."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.corpora.openwebtext_formats import iter_openwebtext
from lit_docemb.data.core.reading import (
    ReadContext,
    cached_documents,
    load_hf_splits,
    looks_like_local_path,
    normalise_paragraphs,
    require_path,
)

LAYOUT = """\
  Skylion007/openwebtext (Hugging Face name; needs the hub or a populated HF_DATASETS_CACHE), or
  a local copy of it: a save_to_disk folder, parquet/arrow files or a folder of them (column `text`), or
  the original release: openwebtext.tar.xz, or its extracted folder openwebtext/urlsf_subset<NN>-<M>_data.xz
  (xz-compressed tar archives of <name>.txt files), or any folder of such archives / .txt / .xz files"""


class TableTextDocuments(Sequence):
    """The rows of a Hugging Face table with a text column as documents, converted on access (no copy).

    Ids are ``<id_prefix><row>``. Empty texts are not filtered here: like every lazily indexed corpus, they
    are counted by the method's collator.
    """

    def __init__(self, table, text_column: str = "text", id_prefix: str = "owt:", rows: range | None = None) -> None:
        self.table, self.text_column, self.id_prefix = table, text_column, id_prefix
        self.rows = range(len(table)) if rows is None else rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return TableTextDocuments(self.table, self.text_column, self.id_prefix, self.rows[index])
        row = self.rows[index]
        text = normalise_paragraphs(self.table[row][self.text_column] or "")
        return Document(id=f"{self.id_prefix}{row}", sections=[Section("", text)])

    def __iter__(self) -> Iterator[Document]:
        return (self[i] for i in range(len(self)))

    @property
    def ids(self) -> list[str]:
        return [f"{self.id_prefix}{row}" for row in self.rows]

    @property
    def fingerprint(self) -> str:
        """The table's ``datasets`` fingerprint with the column, id prefix and rows read (see
        :attr:`~lit_docemb.data.core.arrow.ArrowDocuments.fingerprint`)."""
        rows = (self.rows.start, self.rows.stop, self.rows.step)
        return f"{self.table._fingerprint}:{self.text_column}:{self.id_prefix}:{rows}"


class OpenWebTextDataModule(DocumentDataModule):
    """OpenWebText web pages (about 8M documents, one untitled section each, paragraphs kept).

    Where users get it: the Hugging Face dataset ``Skylion007/openwebtext``, or the original release
    ``openwebtext.tar.xz`` from https://skylion007.github.io/OpenWebTextCorpus/ (also on Zenodo). ``source``::

      Skylion007/openwebtext (Hugging Face name; needs the hub or a populated HF_DATASETS_CACHE), or
      a local copy of it: a save_to_disk folder, parquet/arrow files or a folder of them (column `text`), or
      the original release: openwebtext.tar.xz, or its extracted folder openwebtext/urlsf_subset<NN>-<M>_data.xz
      (xz-compressed tar archives of <name>.txt files), or any folder of such archives / .txt / .xz files

    Hugging Face tables are memory-mapped as they are and documents built on access (ids ``owt:<row>``).
    The original release is streamed once into an Arrow cache under ``cache_dir`` (ids
    ``owt:<subset>/<file>.txt``, see :mod:`lit_docemb.data.corpora.openwebtext_formats`); a second run opens it in seconds.

    Args:
        source: See above.
        split: Split of a Hugging Face dataset.
        text_column: Text column of a Hugging Face dataset.
        strict: Raise on a corrupt archive instead of skipping and counting it.
        cache_dir: Cache of ``datasets`` (Arrow files); ``None`` uses its default.
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, source: str = "Skylion007/openwebtext", split: str = "train", text_column: str = "text",
                 strict: bool = False, cache_dir: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.source, self.split, self.text_column = source, split, text_column
        self.strict, self.cache_dir = strict, cache_dir

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        local = looks_like_local_path(self.source)
        return {"source": (self.source if local else None, "an OpenWebText folder or file, or a hub name")}

    def _is_hf(self) -> bool:
        path = Path(self.source).expanduser()
        if not path.exists():
            if looks_like_local_path(self.source):
                require_path(path, "OpenWebText", LAYOUT)
            return True
        if path.is_file():
            return path.suffix in (".parquet", ".arrow")
        return any((path / name).exists() for name in ("state.json", "dataset_dict.json")) or any(
            next(path.glob(pattern), None) is not None for pattern in ("*.parquet", "*.arrow", "data/*.parquet"))

    def load_documents(self) -> Sequence[Document]:
        if self._is_hf():
            splits = load_hf_splits(self.source, cache_dir=self.cache_dir)
            if self.split not in splits or self.text_column not in splits[self.split].column_names:
                raise ValueError(f"{self.source!r} has no split {self.split!r} with a {self.text_column!r} column "
                                 f"(splits: { {name: t.column_names for name, t in splits.items()} })")
            return TableTextDocuments(splits[self.split], self.text_column)
        context = ReadContext(strict=self.strict)
        source = str(Path(self.source).expanduser())
        documents = cached_documents(iter_openwebtext, {"source": source}, inputs=[source], context=context,
                                     cache_dir=self.cache_dir)
        self.stats.update(context.stats)
        return documents
