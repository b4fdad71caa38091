"""Reader for the original OpenWebText release: xz-compressed tar archives of text files, or plain text files.

The release (Gokaslan & Cohen 2019, https://skylion007.github.io/OpenWebTextCorpus/, ``openwebtext.tar.xz``,
about 12 GB) is a tar archive of ``openwebtext/urlsf_subset<NN>-<M>_data.xz`` files (about 20,600), each an
xz-compressed tar archive of a few hundred ``.txt`` files, one web page's text per file: paragraphs separated
by blank lines, no title. :func:`iter_openwebtext` accepts

* the outer ``openwebtext.tar.xz`` itself, streamed (tar mode ``"r|"``, no seeking); each nested subset
  archive is decompressed in memory (a few MB) when its turn comes;
* the extracted ``openwebtext/`` folder, or any folder mixing ``.xz`` / ``.tar`` / ``.tar.gz`` / ``.tar.xz``
  archives of ``.txt`` files, single compressed texts (``.xz``/``.gz``/``.bz2``) and plain ``.txt`` files;
* one such file.

Ids: ``owt:<archive name without .xz/.tar/...>/<member name>`` for a text in an archive, identical whether the
outer archive was extracted or not (``owt:urlsf_subset00-1_data/0000001-<hash>.txt``); ``owt:<path relative
to the source>`` (without a compression suffix) for a loose file. Each document is one untitled section,
paragraphs kept (:func:`~lit_docemb.data.core.reading.normalise_paragraphs`).

Bad input: a corrupt or truncated archive stops that archive (documents read before are kept) and counts
``"corrupt_archive"``; members that are neither ``.txt`` nor nested archives count ``"non_text_member"``;
undecodable bytes and empty documents are counted as everywhere (:class:`ReadContext`).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import (
    DECOMPRESSION_ERRORS,
    ReadContext,
    normalise_paragraphs,
    open_binary,
    walk_files,
)

EXPECTED = "a (compressed) tar archive of .txt files, a compressed .txt, or a .txt file"
_COMPRESSED_SUFFIXES = (".xz", ".gz", ".bz2", ".tgz", ".tar")
_ARCHIVE_ERRORS = (tarfile.TarError, *DECOMPRESSION_ERRORS)


def strip_archive_suffixes(name: str) -> str:
    """``urlsf_subset00-1_data.xz`` → ``urlsf_subset00-1_data``; ``texts.tar.gz`` → ``texts``."""
    while name.lower().endswith(_COMPRESSED_SUFFIXES):
        name = name[: name.rindex(".")]
    return name


def _text_document(doc_id: str, data: bytes, context: ReadContext) -> Iterator[Document]:
    document = Document(id=doc_id, sections=[Section("", normalise_paragraphs(context.decode(data)))])
    if context.keep(document):
        yield document


def _decompress(data: bytes) -> bytes:
    for magic, module in ((b"\xfd7zXZ\x00", lzma), (b"\x1f\x8b", gzip), (b"BZh", bz2)):
        if data.startswith(magic):
            return module.decompress(data)
    return data


def _iter_members(archive: tarfile.TarFile, subset: str, where: str, context: ReadContext) -> Iterator[Document]:
    """Documents of an opened tar archive; nested archives (``*.xz`` members) are read recursively."""
    for member in archive:
        if not member.isfile():
            continue
        data = archive.extractfile(member).read()
        name = PurePosixPath(member.name)
        if name.suffix.lower() == ".txt":
            yield from _text_document(f"owt:{subset}/{member.name}", data, context)
        elif name.name.lower().endswith(_COMPRESSED_SUFFIXES):
            yield from _iter_blob(data, name.name, f"{where}!{member.name}", context)
        else:
            context.stats["non_text_member"] += 1


def _iter_blob(data: bytes, name: str, where: str, context: ReadContext) -> Iterator[Document]:
    """A nested file: a (compressed) tar archive of texts, or one compressed text."""
    try:
        data = _decompress(data)
        if data[257:262] == b"ustar":
            with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as archive:
                yield from _iter_members(archive, strip_archive_suffixes(name), where, context)
        else:
            yield from _text_document(f"owt:{strip_archive_suffixes(name)}", data, context)
    except _ARCHIVE_ERRORS as err:
        context.malformed(where, f"corrupt or truncated archive ({err})", EXPECTED, key="corrupt_archive")


def _open_tar(stream: BinaryIO) -> tarfile.TarFile | None:
    """The stream as a tar archive (its first header read), or None when it is not one."""
    try:
        return tarfile.open(fileobj=stream, mode="r|")
    except tarfile.ReadError:
        return None


def _iter_path(path: Path, relative: str, context: ReadContext) -> Iterator[Document]:
    if path.suffix.lower() == ".txt":
        yield from _text_document(f"owt:{relative}", path.read_bytes(), context)
        return
    try:
        with open_binary(path) as stream:
            archive = _open_tar(stream)
            if archive is not None:
                with archive:
                    yield from _iter_members(archive, strip_archive_suffixes(path.name), str(path), context)
                return
        with open_binary(path) as stream:
            data = stream.read()
        yield from _text_document(f"owt:{strip_archive_suffixes(relative)}", data, context)
    except _ARCHIVE_ERRORS as err:
        context.malformed(str(path), f"corrupt or truncated archive ({err})", EXPECTED, key="corrupt_archive")


def iter_openwebtext(source: str, *, context: ReadContext) -> Iterator[Document]:
    """Streams the documents of an OpenWebText release file or folder (see the module docstring), files in
    sorted path order, archive members in archive order."""
    root = Path(source)
    for path in walk_files(root):
        relative = path.name if root.is_file() else path.relative_to(root).as_posix()
        if path.name.startswith("."):
            context.stats["hidden_file"] += 1
        elif path.suffix.lower() == ".txt" or path.name.lower().endswith(_COMPRESSED_SUFFIXES):
            yield from _iter_path(path, relative, context)
        else:
            context.malformed(str(path), "unexpected file type", EXPECTED, key="unexpected_file")
