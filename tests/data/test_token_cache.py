"""The token cache protocol (issue 30): each of the four caches is a :class:`TokenCache` built on :class:`RowCache`,
its opened rows equal its fresh tokenization, and a second open reads the written table without tokenizing."""

from __future__ import annotations

import datasets
import pytest
from corpus_files import with_edge_documents
from transformers import AutoTokenizer

from lit_docemb.data.caches.field_cache import FieldTokenCache
from lit_docemb.data.caches.passage_cache import PassageCache
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.caches.row_cache import CachedRows, RowCache
from lit_docemb.data.caches.section_cache import SectionCache
from lit_docemb.data.caches.sentence_cache import SentenceCache
from lit_docemb.data.caches.token_cache import TokenCache
from lit_docemb.data.core.document import Document, Section

datasets.disable_progress_bars()

DOCUMENTS = with_edge_documents([
    Document("a", title="Lists", sections=[Section("", "Lists hold items. They grow as needed."),
                                           Section("Methods", "Append adds one item. Pop removes the last one.")]),
    Document("b", sections=[Section("Dictionaries", "Keys map to values. Lookups are fast.")], label="x"),
])


class LetterCodes:
    """A toy field encoding: (heading, code points of its text's letters) per section (picklable, keyed)."""

    def __call__(self, document: Document) -> list[tuple[str, list[int]]]:
        return [(s.heading, [ord(c) for c in s.text if c.isalpha()]) for s in document.sections]

    def key(self) -> str:
        return "letters"


CACHES = {
    "passages": lambda tokenizer, folder: PassageCache(tokenizer, PassageSpec(6, max_passage_tokens=16),
                                                       cache_dir=folder),
    "sentences": lambda tokenizer, folder: SentenceCache(tokenizer, 16, cache_dir=folder),
    "sections": lambda tokenizer, folder: SectionCache(tokenizer, cache_dir=folder),
    "fields": lambda tokenizer, folder: FieldTokenCache(LetterCodes(), folder),
}


@pytest.fixture(scope="module")
def tokenizer(tiny_encoder_dir):
    return AutoTokenizer.from_pretrained(tiny_encoder_dir)


@pytest.mark.parametrize("kind", CACHES)
def test_each_cache_is_a_token_cache_on_the_row_cache(kind, tokenizer, tmp_path):
    cache = CACHES[kind](tokenizer, str(tmp_path))
    assert isinstance(cache, TokenCache) and isinstance(cache, RowCache)


@pytest.mark.parametrize("kind", ["passages", "sentences", "sections"])
def test_text_longer_than_the_encoder_tokenizes_without_transformers_length_warning(kind, tiny_encoder_dir, tmp_path,
                                                                                    capfd, caplog):
    """Sections (and a sentence of text without punctuation) are tokenized whole and cut later: transformers'
    "longer than the specified maximum sequence length ... will result in indexing errors" would be a false alarm."""
    fresh = AutoTokenizer.from_pretrained(tiny_encoder_dir, model_max_length=64)  # it warns once per tokenizer
    text = " ".join(["word"] * 100)
    CACHES[kind](fresh, str(tmp_path)).tokenize([Document("long", sections=[Section("", text)])])
    assert "sequence length" not in capfd.readouterr().err + caplog.text


def test_the_protocol_refuses_what_lacks_a_member():
    class FingerprintOnly:
        def fingerprint(self, documents):
            return ""

        def tokenize(self, documents):
            return []

    assert not isinstance(FingerprintOnly(), TokenCache)


@pytest.mark.parametrize("kind", CACHES)
def test_a_second_open_reads_the_written_rows_without_tokenizing(kind, tokenizer, tmp_path, monkeypatch):
    cache = CACHES[kind](tokenizer, str(tmp_path))
    fresh = [cache.table_row(row) for row in cache.tokenize(DOCUMENTS)]
    calls = []
    tokenize = type(cache).tokenize

    def counted(self, documents):
        calls.append(len(documents))
        return tokenize(self, documents)

    monkeypatch.setattr(type(cache), "tokenize", counted)
    first = cache.open(DOCUMENTS)
    assert isinstance(first, CachedRows) and sum(calls) == len(DOCUMENTS)  # written now, every document tokenized
    assert first.ids == [d.id for d in DOCUMENTS] and [cache.table_row(row) for row in first] == fresh

    calls.clear()
    second = CACHES[kind](tokenizer, str(tmp_path)).open(DOCUMENTS)
    assert calls == []  # read from disk
    assert second.fingerprint == first.fingerprint == cache.fingerprint(DOCUMENTS)
    assert second.table.cache_files == first.table.cache_files
    assert [cache.table_row(row) for row in second] == fresh


@pytest.mark.parametrize("kind", CACHES)
def test_rows_read_the_same_across_arrow_chunks(kind, tokenizer, tmp_path):
    """A table of several Arrow chunks (a long corpus's) gives each row its own ids: the rows are read through
    per-chunk views of the list columns, each chunk's offsets into its own values."""
    cache = CACHES[kind](tokenizer, str(tmp_path))
    opened = cache.open(DOCUMENTS)
    fresh = [cache.table_row(row) for row in opened]
    halves = [opened.table.select(range(0, 2)), opened.table.select(range(2, len(DOCUMENTS)))]
    chunked = type(opened)(datasets.concatenate_datasets([halves[1], halves[0]]), opened.fingerprint)
    assert len(chunked._column("id").chunks) >= 2
    order = list(range(2, len(DOCUMENTS))) + [0, 1]
    assert [cache.table_row(chunked[i]) for i in range(len(DOCUMENTS))] == [fresh[i] for i in order]
