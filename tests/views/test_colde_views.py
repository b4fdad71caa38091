"""CoLDE's chunks from cached section ids equal the chunks of the text path they replace (issue 23, item 1), and
the section cache follows the corpus (labels included) and the tokenizer; how sections are grouped and split, and
pairs made groups by their citation links.

The reference below is the collator CoLDE shipped before its section cache: tokenize every section of the batch's
documents, group the section token lists, cut windows with :func:`~lit_docemb.data.core.text.token_windows` and pad.
"""

from __future__ import annotations

import copy
import json
from itertools import pairwise

import datasets
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from lit_docemb.data.caches import section_cache
from lit_docemb.data.corpora.aan import DocumentPair
from lit_docemb.data.core.batches import SectionChunkBatch
from lit_docemb.data.core.document import Document, Section, doc_index
from lit_docemb.data.caches.row_cache import corpus_fingerprint
from lit_docemb.data.caches.section_cache import SectionCache
from lit_docemb.data.core.text import token_windows
from lit_docemb.data.core.tokens import pad_ids, special_tokens
from lit_docemb.views.colde import PredictCollator, SectionChunkCollator, group_sections, pair_groups, split_sections

datasets.disable_progress_bars()


# --- the text path, as it was --------------------------------------------------------------------------------
def list_sections(section_tokens: list[list[int]], num_sections: int) -> list[list[int]] | None:
    real = [ids for ids in section_tokens if ids]
    if num_sections == 1:
        flat = [t for ids in real for t in ids]
        return [flat] if flat else None
    starts = group_sections([len(ids) for ids in real], num_sections)
    if starts is not None:
        return [[t for ids in real[a:b] for t in ids] for a, b in pairwise([*starts, len(real)])]
    flat = [t for ids in real for t in ids]
    if len(flat) < num_sections:
        return None
    cuts = [len(flat) * k // num_sections for k in range(num_sections + 1)]
    return [flat[a:b] for a, b in pairwise(cuts)]


def text_batch(tokenizer, documents: list[Document], labels: list[int], num_sections: int, chunk_tokens: int,
               chunk_limit: int | None) -> tuple:
    prefix, suffix = special_tokens(tokenizer)
    body = chunk_tokens - len(prefix) - len(suffix)
    texts = [s.text for d in documents for s in d.sections]
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    chunks, section_ids, chunk_ids, per_section, kept, truncated, start = [], [], [], [], [], 0, 0
    for i, doc in enumerate(documents):
        sections = list_sections(encoded[start:start + len(doc.sections)], num_sections)
        start += len(doc.sections)
        if sections is None:
            continue
        kept.append(i)
        for p, section in enumerate(sections):
            windows = token_windows(section, body)
            if chunk_limit is not None and len(windows) > chunk_limit:
                truncated += len(windows) - chunk_limit
                windows = windows[:chunk_limit]
            chunks += [prefix + w + suffix for w in windows]
            section_ids += [p] * len(windows)
            chunk_ids += list(range(len(windows)))
            per_section.append(len(windows))
    tokens = pad_ids(chunks, tokenizer.pad_token_id or 0)
    return (tokens.input_ids, tokens.attention_mask, section_ids, chunk_ids, per_section, [labels[i] for i in kept],
            [documents[i].id for i in kept], len(documents) - len(kept), truncated)


def batch_values(batch: SectionChunkBatch) -> tuple:
    sections = batch.sections
    return (sections.chunks.input_ids, sections.chunks.attention_mask, sections.section_ids.tolist(),
            sections.chunk_ids.tolist(), sections.chunks_per_section.tolist(), batch.labels.tolist(), batch.ids,
            batch.skipped, batch.truncated_chunks)


def assert_same(new: tuple, old: tuple) -> None:
    assert torch.equal(new[0], old[0]) and torch.equal(new[1], old[1])
    assert new[2:] == old[2:]


# --- fixtures --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer(tiny_encoder_dir):
    return AutoTokenizer.from_pretrained(tiny_encoder_dir)


@pytest.fixture(scope="module")
def documents(corpus_jsonl) -> list[Document]:
    """The JSONL fixture corpus with labels (every third document shares one), plus a document with an empty
    section, one with a single short section and one without tokens."""
    with open(corpus_jsonl, encoding="utf-8") as f:
        docs = [Document.from_dict(json.loads(line)) for line in f]
    for index, doc in enumerate(docs):
        doc.label = f"group {index % 3}" if index % 2 else None
    return docs + [Document("gap", sections=[Section("A", "First part here."), Section("B", ""),
                                             Section("C", "Third part, a little longer than the first.")]),
                   Document("short", sections=[Section("", "Two words")]),
                   Document("blank", sections=[Section("", "\u200b")])]


# --- the tests -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("num_sections", "chunk_tokens", "limit"), [(1, 16, None), (2, 16, 3), (3, 32, None),
                                                                      (5, 8, 2)])
def test_chunks_from_cached_ids_equal_the_text_path(tmp_path, tokenizer, documents, num_sections, chunk_tokens,
                                                    limit):
    cache = SectionCache(tokenizer, cache_dir=str(tmp_path))
    rows = cache.open(documents)
    collate = SectionChunkCollator(tokenizer, num_sections, chunk_tokens, limit, None, cache)
    for start in range(0, len(documents), 6):
        part = list(range(start, min(start + 6, len(documents))))
        docs = [documents[i] for i in part]
        labels = [doc_index(f"label:{d.label}") if d.label is not None else doc_index(d.id) for d in docs]
        expected = text_batch(tokenizer, docs, labels, num_sections, chunk_tokens, limit)
        assert_same(batch_values(collate([rows[i] for i in part])), expected)
        assert_same(batch_values(collate(docs)), expected)  # documents: tokenized now, the same ids


def test_pairs_and_predict_batches_from_cached_ids(tmp_path, tokenizer, documents):
    cache = SectionCache(tokenizer, cache_dir=str(tmp_path))
    rows = cache.open(documents)
    collate = SectionChunkCollator(tokenizer, 2, 16, None, 8, cache)
    pairs = [DocumentPair(documents[0], documents[1], 1), DocumentPair(documents[1], documents[2], 0)]
    cached_pairs = [DocumentPair(rows[0], rows[1], 1), DocumentPair(rows[1], rows[2], 0)]
    assert_same(batch_values(collate(cached_pairs)), batch_values(collate(pairs)))
    predict = PredictCollator(SectionChunkCollator(tokenizer, 1, 16, None, 8, cache), collate)
    from_rows, from_documents = predict(list(rows)[:5]), predict(documents[:5])
    assert_same(batch_values(from_rows.whole), batch_values(from_documents.whole))
    assert_same(batch_values(from_rows.split), batch_values(from_documents.split))


def test_section_cache_reopens_without_tokenizing_and_follows_corpus_labels_and_tokenizer(
        tmp_path, tiny_encoder_dir, tokenizer, documents, monkeypatch):
    first = SectionCache(tokenizer, cache_dir=str(tmp_path)).open(documents)
    assert [(r.id, r.label, r.input_ids.tolist(), r.section_offsets.tolist()) for r in first] == \
           [(r.id, r.label, r.input_ids.tolist(), r.section_offsets.tolist()) for r in
            SectionCache(tokenizer).tokenize(documents)]

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("the second open tokenized again")

    monkeypatch.setattr(section_cache, "tokenize_sections", no_tokenizing)
    reloaded = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    assert SectionCache(reloaded, cache_dir=str(tmp_path)).open(documents).fingerprint == first.fingerprint
    relabelled = copy.deepcopy(documents)
    relabelled[0].label = "another group"
    edited = copy.deepcopy(documents)
    edited[1].sections[0].text += " One more sentence."
    other_vocab = copy.deepcopy(tokenizer)
    other_vocab.add_tokens(["zyzzyva"])
    for changed in (SectionCache(tokenizer, cache_dir=str(tmp_path)).fingerprint(relabelled),
                    SectionCache(tokenizer, cache_dir=str(tmp_path)).fingerprint(edited),
                    SectionCache(other_vocab, cache_dir=str(tmp_path)).fingerprint(documents)):
        assert changed != first.fingerprint
    with pytest.raises(AssertionError, match="tokenized again"):  # a new key tokenizes
        SectionCache(tokenizer, cache_dir=str(tmp_path)).open(relabelled)


def test_grouped_documents_key_the_cache_by_their_corpus_rows_and_labels(documents):
    from lit_docemb.data.corpora.similarity_groups import GroupedDocuments

    class Fingerprinted(list):
        fingerprint = "corpus-table"

    corpus = Fingerprinted(documents)
    grouped = GroupedDocuments(corpus, [0, 1, 2], ["a", "a", "b"])
    assert grouped.fingerprint == GroupedDocuments(Fingerprinted(documents), [0, 1, 2], ["a", "a", "b"]).fingerprint
    others = [GroupedDocuments(corpus, [0, 1, 2], ["a", "b", "b"]), GroupedDocuments(corpus, [0, 1, 3], ["a", "a", "b"]),
              grouped[:2]]
    assert len({grouped.fingerprint, *(other.fingerprint for other in others)}) == 4
    assert GroupedDocuments(list(documents), [0], ["a"]).fingerprint is None  # the cache then hashes the documents
    assert corpus_fingerprint(grouped) == grouped.fingerprint


def test_group_sections_keeps_real_boundaries_and_balances_tokens():
    assert group_sections([10, 10, 10, 10], 2) == [0, 2]
    assert group_sections([30, 5, 5, 5], 2) == [0, 1]  # the big first section alone
    assert group_sections([1, 1, 100], 3) == [0, 1, 2]  # one section per group whatever the sizes
    assert group_sections([5], 2) is None



def _split(sections: list[list[int]], num_sections: int) -> list[list[int]] | None:
    flat = np.asarray([t for ids in sections for t in ids], dtype=np.int32)
    split = split_sections(flat, [len(ids) for ids in sections], num_sections)
    return None if split is None else [part.tolist() for part in split]



def test_split_sections_real_boundaries_equal_split_and_too_short():
    assert _split([[1, 2], [], [3, 4, 5], [6]], 2) == [[1, 2], [3, 4, 5, 6]]  # empty section ignored
    assert _split([[1, 2, 3, 4, 5]], 2) == [[1, 2], [3, 4, 5]]  # one real section: equal token split
    assert _split([[1, 2, 3, 4, 5, 6]], 3) == [[1, 2], [3, 4], [5, 6]]
    assert _split([[1]], 2) is None and _split([[]], 1) is None
    assert _split([[1], [2, 3]], 1) == [[1, 2, 3]]



def test_pairs_become_groups_by_their_citation_links():
    a, b, c, d = (Document(x, "", [Section("", "text")]) for x in "abcd")
    docs, labels = pair_groups([DocumentPair(a, b, 1), DocumentPair(b, c, 1), DocumentPair(a, d, 0)])
    assert [doc.id for doc in docs] == ["a", "b", "c", "d"]
    assert labels[0] == labels[1] == labels[2] != labels[3]
