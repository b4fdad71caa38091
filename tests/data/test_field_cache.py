"""The field cache (issue 23, item 1): each document's fields as token ids, written once per corpus × encoding key,
reopened while both are unchanged, rebuilt when either changes; its rows are what the encoding computes."""

from __future__ import annotations

import pickle

import numpy as np

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.caches.field_cache import FieldTokenCache, TokenizedFields, tokenize_fields


class LetterCodes:
    """A toy encoding: (heading, code points of its text's letters, shifted) per section."""

    def __init__(self, shift: int) -> None:
        self.shift = shift

    def __call__(self, document: Document) -> list[tuple[str, list[int]]]:
        return [(s.heading, [ord(c) + self.shift for c in s.text if c.isalpha()]) for s in document.sections]

    def key(self) -> str:
        return f"letters+{self.shift}"


DOCUMENTS = [Document("a", sections=[Section("one", "ab c"), Section("two", "")]),
             Document("b", sections=[Section("", "xyz")]), Document("c", sections=[])]


def arrow_files(folder) -> list:
    return sorted(folder.rglob("*.arrow"))


def test_rows_are_the_encoding_and_survive_pickling(tmp_path):
    rows = FieldTokenCache(LetterCodes(0), str(tmp_path)).open(DOCUMENTS)
    assert len(rows) == 3 and rows.ids == ["a", "b", "c"]
    for document, row in zip(DOCUMENTS, pickle.loads(pickle.dumps(rows)), strict=True):  # as a worker gets them
        expected = tokenize_fields(document, LetterCodes(0))
        assert isinstance(row, TokenizedFields) and row.id == document.id and row.labels == expected.labels
        assert [(label, ids.tolist()) for label, ids in row.fields()] == LetterCodes(0)(document)
        assert np.array_equal(row.field_offsets, expected.field_offsets)
    assert rows[-1].fields() == []


def test_the_cache_is_reopened_and_rebuilt_when_the_corpus_or_the_key_changes(tmp_path):
    first = FieldTokenCache(LetterCodes(0), str(tmp_path)).open(DOCUMENTS)
    files = arrow_files(tmp_path)
    again = FieldTokenCache(LetterCodes(0), str(tmp_path)).open(DOCUMENTS)
    assert again.fingerprint == first.fingerprint and arrow_files(tmp_path) == files  # reopened
    shifted = FieldTokenCache(LetterCodes(1), str(tmp_path)).open(DOCUMENTS)
    assert shifted.fingerprint != first.fingerprint and shifted[0].input_ids[0] == ord("a") + 1
    fewer = FieldTokenCache(LetterCodes(0), str(tmp_path)).open(DOCUMENTS[:2])
    assert fewer.fingerprint not in (first.fingerprint, shifted.fingerprint) and len(fewer) == 2
