"""The shared reading primitives: bad-input policy, missing paths and the Arrow cache builder."""

from __future__ import annotations

import gzip
import io
import lzma
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import (
    MalformedInputError,
    ReadContext,
    Utf8Repair,
    cached_documents,
    read_lines,
    require_path,
)


def _marker_reader(sources: list[str], marker: str, *, context: ReadContext):
    with open(marker, "a") as f:
        f.write("read\n")
    for path in sources:
        for i, line in enumerate(Path(path).read_text().splitlines()):
            if line == "bad":
                context.stats["malformed_line"] += 1
                continue
            yield Document(f"{Path(path).stem}-{i}", sections=[Section("", line)])


def _cached(sources: list[Path], marker: Path, cache: Path, context: ReadContext, num_proc: int | None = None):
    return cached_documents(_marker_reader, {"sources": [str(s) for s in sources], "marker": str(marker)},
                            inputs=sources, context=context, cache_dir=str(cache), num_proc=num_proc,
                            shard_over="sources")


def test_arrow_cache_is_reused_keeps_skip_counts_and_notices_edits(tmp_path):
    source, marker, cache = tmp_path / "corpus.txt", tmp_path / "marker", tmp_path / "cache"
    source.write_text("first text\n\nbad\nsecond text\n")
    context = ReadContext()
    docs = _cached([source], marker, cache, context)
    assert [d.text for d in docs] == ["first text", "second text"] and docs.ids == ["corpus-0", "corpus-3"]
    assert context.stats == Counter(malformed_line=1, empty_document=1)
    context = ReadContext()
    again = _cached([source], marker, cache, context)
    assert len(again) == 2 and context.stats == Counter(malformed_line=1, empty_document=1)
    assert marker.read_text() == "read\n"  # the second call read the cache only
    source.write_text("first text\nthird text\nfourth text\n")
    os.utime(source, ns=(1, 1))
    edited = _cached([source], marker, cache, ReadContext())
    assert len(edited) == 3 and marker.read_text() == "read\nread\n"


@pytest.mark.parametrize("num_proc", [None, 2])
def test_arrow_cache_keeps_the_skip_counts_of_every_input_file(tmp_path, num_proc):
    # `datasets` calls the generator once per element of each list in gen_kwargs: the counts of one file must
    # not replace those of the other, whether one process reads both files or each process reads one.
    first, second, marker = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "marker"
    first.write_text("a text\nbad\n")
    second.write_text("bad\nb text\n\nbad\n")
    for _ in ("built", "cached"):
        context = ReadContext()
        docs = _cached([first, second], marker, tmp_path / "cache", context, num_proc)
        assert docs.ids == ["a-0", "b-1"]
        assert context.stats == Counter(malformed_line=3, empty_document=1)
    assert marker.read_text().count("read") == (num_proc or 1)  # one read per process, none from the cache


def test_arrow_cache_without_documents_says_what_was_skipped(tmp_path):
    source = tmp_path / "corpus.txt"
    source.write_text("bad\nbad\n")
    for _ in range(2):  # the conversion, then its cache
        with pytest.raises(ValueError, match=r"no documents in .*corpus\.txt; skipped \{'malformed_line': 2\}"):
            _cached([source], tmp_path / "marker", tmp_path / "cache", ReadContext())


def test_bad_input_policy_lines_and_missing_paths(tmp_path):
    path = tmp_path / "lines.txt.xz"
    path.write_bytes(lzma.compress(b"\xef\xbb\xbfone\r\ncaf\xe9\n"))  # a BOM, CRLF, a latin-1 byte
    context = ReadContext()
    assert list(read_lines(path, context, unit="line")) == [(1, "one"), (2, "caf\ufffd")]
    assert context.stats == Counter(undecodable_line=1)
    context = ReadContext(fallback_encoding="latin-1")
    assert list(read_lines(path, context)) == [(1, "one"), (2, "café")]
    assert context.stats == Counter(record_decoded_with_fallback_encoding=1)

    truncated = tmp_path / "truncated.gz"
    truncated.write_bytes(gzip.compress(b"x\n" * 1000)[:-12])
    context = ReadContext()
    list(read_lines(truncated, context))
    assert context.stats == Counter(corrupt_file=1)
    with pytest.raises(MalformedInputError, match=r"truncated\.gz:\d+: compressed data is corrupt"):
        list(read_lines(truncated, ReadContext(strict=True)))

    with pytest.raises(FileNotFoundError, match=r"(?s)qrels file not found: .*nothing does not exist; expected TREC"):
        require_path(tmp_path / "nothing", "qrels file", "TREC qrels lines")


_UTF8_PIECES = ["a", " ", "\u00e9", "\u20ac", "\U0001f600", "\ufffd"]  # 1- to 4-byte characters, a real U+FFFD


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_UTF8_PIECES).map(str.encode), st.binary(max_size=3)), max_size=30),
       st.integers(1, 7))
def test_utf8_repair_replaces_and_counts_like_a_whole_decode(pieces: list[bytes], read_size: int) -> None:
    """Read in small pieces (characters split between reads), the stream equals decoding the whole input with
    errors="replace"; the count is the replacements made, not the U+FFFD already in the input."""
    data = b"".join(pieces)
    stats = Counter()
    stream = Utf8Repair(io.BytesIO(data), stats)
    out = b"".join(iter(lambda: stream.read(read_size), b""))
    decoded = data.decode("utf-8", errors="replace")
    assert out == decoded.encode("utf-8")
    assert stats["undecodable_sequence"] == decoded.count("\ufffd") - data.count("\ufffd".encode())
