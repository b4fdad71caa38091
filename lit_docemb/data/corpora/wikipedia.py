"""English Wikipedia, from the Hugging Face parquet release or from a raw MediaWiki XML dump."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from xml.etree.ElementTree import ParseError

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.reading import (
    DECOMPRESSION_ERRORS,
    ReadContext,
    cached_documents,
    looks_like_local_path,
    require_path,
)

LAYOUT = """\
  a Hugging Face dataset name (e.g. wikimedia/wikipedia, with subset 20231101.en), or
  local parquet files of it (columns id, url, title, text): a file, a folder or a glob, or
  raw MediaWiki dumps enwiki-<date>-pages-articles[N].xml.bz2 (or .xml): a file, a folder or a glob"""
DUMP_FORMAT = "a MediaWiki XML export (<mediawiki><page><title>, <ns>, <id>, <revision><text>...)"


def _read_dumps(paths: list[str], *, context: ReadContext) -> Iterator[Document]:
    """The articles of every dump file in turn, their skip counts (and ``"document"``) in ``context.stats``.

    A dump that is not well-formed XML or whose compressed stream is corrupt or truncated ends there: the
    articles before are kept, the file is counted as ``"corrupt_dump"`` (an error naming the file and line with
    ``context.strict``).
    """
    from lit_docemb.data.corpora.wikipedia_formats import iter_wikipedia_xml

    for path in paths:
        try:
            yield from iter_wikipedia_xml(path, stats=context.stats)
        except (ParseError, *DECOMPRESSION_ERRORS) as err:
            line = err.position[0] if isinstance(err, ParseError) else None
            where = path if line is None else f"{path}:{line}"
            context.malformed(where, f"corrupt or truncated dump ({err})", DUMP_FORMAT, key="corrupt_dump")


def _is_dump(path: str) -> bool:
    return path.endswith((".xml", ".xml.bz2"))


class WikipediaDataModule(DocumentDataModule):
    """Wikipedia articles as sectioned documents (headings kept, outgoing links in ``metadata["links"]``).

    ``source`` may be:

    * a Hugging Face dataset name, e.g. ``wikimedia/wikipedia`` with ``subset: 20231101.en`` (needs the hub
      or a populated ``HF_DATASETS_CACHE``);
    * local parquet files of that dataset (a file, a folder or a glob);
    * raw dump files ``enwiki-*-pages-articles*.xml.bz2`` (a file, a folder or a glob), streamed once
      into an Arrow cache under ``cache_dir`` and memory-mapped from then on; what was skipped (redirects,
      other namespaces, empty articles, the rest of a corrupt or truncated dump) is counted in ``stats`` and
      logged.

    Args:
        source: See above.
        subset: Configuration name of a hub dataset (ignored for local files).
        cache_dir: Cache of ``datasets`` (Arrow files); ``None`` uses its default.
        strict: Raise on a corrupt or truncated dump (naming the file and line) instead of counting it.
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, source: str, subset: str | None = None, cache_dir: str | None = None, strict: bool = False,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.subset = subset
        self.cache_dir = cache_dir
        self.strict = strict

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        local = looks_like_local_path(self.source) and not any(ch in self.source for ch in "*?")
        return {"source": (self.source if local else None, "a Wikipedia parquet / dump file or folder, or a hub name")}

    def _local_files(self) -> list[str]:
        pattern = os.path.join(self.source, "*") if os.path.isdir(self.source) else self.source
        return sorted(p for p in glob.glob(pattern) if p.endswith((".parquet", ".xml", ".xml.bz2")))

    def load_documents(self) -> ArrowDocuments:
        import datasets

        from lit_docemb.data.corpora.wikipedia_formats import wikipedia_record_to_document

        files = self._local_files()
        dumps = [f for f in files if _is_dump(f)]
        if dumps:
            context = ReadContext(strict=self.strict, stats=self.stats)
            return cached_documents(_read_dumps, {"paths": dumps}, inputs=dumps, context=context,
                                    cache_dir=self.cache_dir, description=f"Wikipedia dumps {self.source}")
        if files:
            table = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=self.cache_dir)
        elif os.path.exists(self.source) or any(ch in self.source for ch in "*?"):
            raise FileNotFoundError(f"no .parquet or .xml(.bz2) Wikipedia files at {self.source!r}; expected\n{LAYOUT}")
        else:
            if looks_like_local_path(self.source):
                require_path(self.source, "Wikipedia", LAYOUT)
            table = datasets.load_dataset(self.source, self.subset, split="train", cache_dir=self.cache_dir)
        return ArrowDocuments(table, wikipedia_record_to_document)
