"""SentenceCache: cached rows equal fresh tokenization, a second open reads the disk without tokenizing, the key
follows the corpus, the tokenizer and every parameter that changes the ids, and DocSplit's DataModule path reads
the cache in its workers."""

from __future__ import annotations

import copy
import pickle

import datasets
import pytest
import torch
from conftest import write_corpus_jsonl
from corpus_files import byte_level_bpe, record_cache_builds, with_edge_documents
from transformers import AutoTokenizer

from lit_docemb.data.caches import sentence_cache
from lit_docemb.data.core.document import Document
from lit_docemb.data.corpora.jsonl import JSONLDataModule, read_jsonl
from lit_docemb.data.caches.sentence_cache import SentenceCache, TokenizedSentences
from lit_docemb.errors import ConfigError
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.models import EncoderSpec

datasets.disable_progress_bars()


@pytest.fixture(scope="module")
def tokenizer(tiny_encoder_dir):
    return AutoTokenizer.from_pretrained(tiny_encoder_dir)


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> list[Document]:
    """Python documentation topics in sections, plus the edge cases of :func:`corpus_files.with_edge_documents`."""
    return with_edge_documents(read_jsonl(write_corpus_jsonl(tmp_path_factory.mktemp("corpus") / "docs.jsonl",
                                                             n_documents=12)))


def row_values(row: TokenizedSentences) -> tuple:
    return (row.id, row.halves, row.input_ids.tolist(), row.sentence_offsets.tolist(), row.lead_ids.tolist(),
            row.lead_offsets.tolist(), row.lead_replaces.tolist(), row.document_ids.tolist())


def test_cached_rows_equal_fresh_rows_and_pickle_as_paths(tmp_path, tokenizer, documents):
    cache = SentenceCache(tokenizer, 32, cache_dir=str(tmp_path))
    cached = cache.open(documents)
    assert [row_values(row) for row in cached] == [row_values(row) for row in cache.tokenize(documents)]
    by_id = {row.id: row for row in cached}
    assert by_id["one"].halves and len(by_id["one"]) == 2 and not by_id["gap"].halves and len(by_id["gap"]) == 3
    cached[0]  # opens the column views, which must not travel
    assert len(pickle.dumps(cached)) < 4096
    assert row_values(pickle.loads(pickle.dumps(cached))[3]) == row_values(cached[3])
    parallel = SentenceCache(tokenizer, 32, cache_dir=str(tmp_path / "parallel"), num_proc=2).open(documents)
    assert [row_values(row) for row in parallel] == [row_values(row) for row in cached]
    with pytest.raises(IndexError):
        cached[len(cached)]


def test_second_open_reads_the_cache_without_tokenizing(tmp_path, tiny_encoder_dir, tokenizer, documents,
                                                        monkeypatch):
    first = SentenceCache(tokenizer, 32, cache_dir=str(tmp_path)).open(documents)
    reloaded = AutoTokenizer.from_pretrained(tiny_encoder_dir)

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("the second open tokenized again")

    monkeypatch.setattr(sentence_cache, "tokenize_sentences", no_tokenizing)
    second = SentenceCache(reloaded, 32, cache_dir=str(tmp_path)).open(documents)
    assert second.fingerprint == first.fingerprint and second.table.cache_files == first.table.cache_files
    with pytest.raises(AssertionError, match="tokenized again"):  # another key tokenizes
        SentenceCache(reloaded, 33, cache_dir=str(tmp_path)).open(documents)


def test_key_changes_with_tokenizer_parameters_and_corpus(tiny_encoder_dir, tokenizer, documents):
    key = SentenceCache(tokenizer).fingerprint(documents)
    assert SentenceCache(AutoTokenizer.from_pretrained(tiny_encoder_dir)).fingerprint(documents) == key
    assert SentenceCache(tokenizer, cache_dir="elsewhere", batch_documents=3, num_proc=2).fingerprint(documents) == key
    other_vocab = copy.deepcopy(tokenizer)
    other_vocab.add_tokens(["zyzzyva"])
    uncased = copy.deepcopy(tokenizer)
    uncased.backend_tokenizer.normalizer = None
    changed = [SentenceCache(tokenizer, 128), SentenceCache(tokenizer, with_title=False),
               SentenceCache(tokenizer, max_section_chars=100), SentenceCache(other_vocab), SentenceCache(uncased)]
    keys = {cache.fingerprint(documents) for cache in changed}
    assert len(keys | {key}) == len(changed) + 1
    edited = copy.deepcopy(documents)
    edited[3].sections[-1].text += " One more sentence."
    assert SentenceCache(tokenizer).fingerprint(edited) != key
    assert SentenceCache(tokenizer).fingerprint(documents[:-1]) != key


def test_docsplit_reads_the_sentence_cache_through_its_datamodule(tmp_path, tiny_encoder_dir):
    corpus = str(write_corpus_jsonl(tmp_path / "docs.jsonl", n_documents=20))
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), sentence_cache_dir=str(tmp_path / "hf"))
    datamodule = JSONLDataModule(paths=[corpus], batch_size=4, num_workers=2, val_fraction=0.2, seed=1)
    datamodule.setup("fit")
    datamodule.connect(method.collator, method.token_cache)
    assert isinstance(datamodule.train_set[0], TokenizedSentences)
    by_id = {d.id: d for d in read_jsonl(corpus)}
    torch.manual_seed(0)
    batches = list(datamodule.train_dataloader())  # collated from cached ids in 2 worker processes
    assert sum(len(batch) for batch in batches) == len(datamodule.train_set)
    validation = next(iter(datamodule.val_dataloader()))
    ids = [datamodule.val_set[i].id for i in range(len(validation))]
    fresh = method.collator("validate")([by_id[i] for i in ids])  # the same documents, tokenized now
    assert torch.equal(validation.view_a.input_ids, fresh.view_a.input_ids)
    assert torch.equal(validation.mlm.input_ids, fresh.mlm.input_ids)


def test_docsplit_builds_its_sentence_cache_with_the_processes_it_is_given(tmp_path, tiny_encoder_dir, monkeypatch):
    documents = read_jsonl(write_corpus_jsonl(tmp_path / "docs.jsonl", n_documents=12))
    built_with = record_cache_builds(monkeypatch)
    parallel = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), sentence_cache_dir=str(tmp_path / "parallel"),
                        sentence_cache_num_proc=2).token_cache.open(documents)
    serial = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32),
                      sentence_cache_dir=str(tmp_path / "serial")).token_cache.open(documents)
    assert built_with == [2, None]
    assert [row_values(row) for row in parallel] == [row_values(row) for row in serial]
    with pytest.raises(ConfigError, match="sentence_cache_num_proc"):
        DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), sentence_cache_num_proc=0)


def test_wordpiece_ignores_a_leading_space_and_byte_level_bpe_does_not(tokenizer, documents):
    from lit_docemb.data.caches.sentence_cache import document_sentences, ignores_leading_space

    sentences = [s for d in documents for s in document_sentences(d, 10_000)[0]]
    assert ignores_leading_space(tokenizer)
    assert tokenizer(sentences, add_special_tokens=False)["input_ids"] == \
           tokenizer([" " + s for s in sentences], add_special_tokens=False)["input_ids"]
    assert not ignores_leading_space(byte_level_bpe(sentences))
