"""lit_docemb JSONL: records with sections or flat text, compressed files, and the bad-input policy (malformed
lines counted or raised under strict, undecodable bytes replaced and counted, missing path, empty documents).

Every sentence here is invented.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from lit_docemb.data.core.document import Section
from lit_docemb.data.corpora.jsonl import JSONLDataModule, read_jsonl
from lit_docemb.data.core.reading import MalformedInputError, ReadContext

RECORDS = [
    {"id": "a", "title": "Clocks", "sections": [{"heading": "", "text": "The tower clock ran backwards."},
                                                {"heading": "Repairs", "text": "Nobody fixed it."}], "label": 3},
    {"id": 7, "text": "A plain record with flat text.", "metadata": {"source": "notes"}},
    {"id": "empty", "text": "   "},
]


def write(path, lines: list[bytes]) -> str:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(b"".join(line + b"\n" for line in lines))
    return str(path)


def good_lines() -> list[bytes]:
    return [json.dumps(record).encode() for record in RECORDS]


def test_records_with_sections_flat_text_and_gzip(tmp_path):
    for name in ("docs.jsonl", "docs.jsonl.gz"):
        documents = read_jsonl(write(tmp_path / name, [*good_lines(), b""]))
        assert [d.id for d in documents] == ["a", "7", "empty"]
        assert documents[0].sections == [Section("", "The tower clock ran backwards."),
                                         Section("Repairs", "Nobody fixed it.")]
        assert documents[0].title == "Clocks" and documents[0].label == "3"
        assert documents[1].sections == [Section("", "A plain record with flat text.")]
        assert documents[1].metadata == {"source": "notes"}


def test_malformed_lines_are_counted_or_raise_with_file_line_and_format(tmp_path):
    lines = [good_lines()[0], b'{"title": "no id"}', b"{not json", b"[1, 2]", b'{"id": "s", "sections": "oops"}',
             good_lines()[1]]
    path = write(tmp_path / "docs.jsonl", lines)
    context = ReadContext()
    assert [d.id for d in read_jsonl(path, context)] == ["a", "7"]
    assert context.stats == Counter(malformed_record=4)
    with pytest.raises(MalformedInputError, match=r'docs\.jsonl:2: KeyError.*expected one JSON object per line: '
                                                  r'\{"id"'):
        read_jsonl(path, ReadContext(strict=True))


def test_undecodable_bytes_are_replaced_and_counted(tmp_path):
    path = write(tmp_path / "docs.jsonl", [b'{"id": "c", "text": "Caf\xe9 chairs were \xff green."}', good_lines()[1]])
    context = ReadContext()
    documents = read_jsonl(path, context)
    assert documents[0].text == "Caf\ufffd chairs were \ufffd green." and documents[1].id == "7"
    assert context.stats == Counter(undecodable_record=1)


def test_datamodule_counts_skips_and_empty_documents_and_describes_a_missing_path(tmp_path):
    path = write(tmp_path / "docs.jsonl", [*good_lines(), b"{broken"])
    datamodule = JSONLDataModule(paths=[path], val_fraction=0.0)
    datamodule.setup("fit")
    assert [d.id for d in datamodule.train_set] == ["a", "7"]
    assert datamodule.stats == Counter(malformed_record=1, empty_document=1)
    with pytest.raises(MalformedInputError, match=r"docs\.jsonl:4"):
        JSONLDataModule(paths=[path], strict=True).setup("fit")
    with pytest.raises(FileNotFoundError, match=r"JSONL corpus not found: .*missing\.jsonl does not exist; "
                                                r"expected one JSON object per line"):
        JSONLDataModule(paths=[str(tmp_path / "missing.jsonl")]).setup("fit")
