"""PassageCache: cached passages equal fresh tokenization exactly, a second open reads the disk without
tokenizing, and the key follows the corpus, the tokenizer and every parameter that changes the ids."""

from __future__ import annotations

import copy
import os
import pickle
from collections import Counter

import datasets
import numpy as np
import pytest
from conftest import write_corpus_jsonl
from corpus_files import record_cache_builds, with_edge_documents
from transformers import AutoTokenizer

from lit_docemb.data.caches import passage_cache
from lit_docemb.data.core.document import Document
from lit_docemb.data.corpora.jsonl import JSONLDataModule, read_jsonl
from lit_docemb.data.corpora.openwebtext_formats import iter_openwebtext
from lit_docemb.data.caches.passage_cache import PassageCache, TokenizedPassages
from lit_docemb.data.caches.row_cache import corpus_fingerprint, tokenizer_fingerprint
from lit_docemb.data.core.reading import ReadContext, cached_documents
from lit_docemb.data.core.text import chunk_passages
from lit_docemb.data import PassageSpec
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


def reference(document: Document, tokenizer, words: int, max_passages, max_length) -> list[list[int]]:
    """The uncached path: split one document (its title the first passage, the default), tokenize its passages in
    one call."""
    passages = [p.text for p in chunk_passages(document, words, max_passages, with_title=True)]
    if not passages:
        return []
    return tokenizer(passages, truncation=True, max_length=max_length)["input_ids"]


@pytest.mark.parametrize(("words", "max_passages", "max_passages_inference", "max_length"),
                         [(100, 50, 100, 512), (20, 2, 3, 12), (50, 4, 2, 64)])
def test_cached_passages_equal_uncached_tokenization(tmp_path, tokenizer, documents, words, max_passages,
                                                    max_passages_inference, max_length):
    spec = PassageSpec(words, max_length, max_passages, max_passages_inference)
    cache = PassageCache(tokenizer, spec, cache_dir=str(tmp_path), batch_documents=5)
    cached = cache.open(documents)
    most = max(max_passages, max_passages_inference)  # every stage reads its first passages from the same rows
    assert len(cached) == len(documents) and cached.ids == [d.id for d in documents]
    for document, row in zip(documents, cached, strict=True):
        expected = reference(document, tokenizer, words, most, max_length)
        assert isinstance(row, TokenizedPassages) and row.id == document.id
        assert row.passage_ids() == expected
        assert row.input_ids.dtype == np.int32 and row.input_ids.tolist() == [i for ids in expected for i in ids]
        assert row.section_index.tolist() == [p.section_index for p in chunk_passages(document, words, most,
                                                                                  with_title=True)]
        assert row.headings == [s.heading for s in document.sections]
    by_id = {row.id: row for row in cached}
    assert len(by_id["empty"]) == 0 and by_id["empty"].passage_offsets.tolist() == [0]
    assert by_id["gap"].section_index.tolist() == [0, 2]  # the empty section B has no passage
    longest = max(len(ids) for row in cached for ids in row.passage_ids())
    assert longest == max_length if max_length == 12 else longest > 12  # truncated only where asked
    assert all(ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
               for row in cached for ids in row.passage_ids())


def test_second_open_reads_the_cache_without_tokenizing(tmp_path, tiny_encoder_dir, tokenizer, documents,
                                                        monkeypatch):
    first = PassageCache(tokenizer, PassageSpec(30), cache_dir=str(tmp_path)).open(documents)
    reloaded = AutoTokenizer.from_pretrained(tiny_encoder_dir)  # another instance of the same tokenizer
    reloaded("some text", truncation=True, max_length=3, padding="max_length")  # leaves state behind

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("the second open tokenized again")

    monkeypatch.setattr(passage_cache, "tokenize_passages", no_tokenizing)
    second = PassageCache(reloaded, {"words_per_passage": 30}, cache_dir=str(tmp_path)).open(documents)
    assert second.fingerprint == first.fingerprint
    assert second.table.cache_files == first.table.cache_files
    assert [row.passage_ids() for row in second] == [row.passage_ids() for row in first]
    with pytest.raises(AssertionError, match="tokenized again"):  # a new key does tokenize
        PassageCache(reloaded, PassageSpec(31), cache_dir=str(tmp_path)).open(documents)


def test_key_changes_with_tokenizer_parameters_and_corpus(tiny_encoder_dir, tokenizer, documents):
    spec = PassageSpec()
    base = PassageCache(tokenizer, spec)
    key = base.fingerprint(documents)
    assert PassageCache(AutoTokenizer.from_pretrained(tiny_encoder_dir), spec).fingerprint(documents) == key
    assert PassageCache(tokenizer, spec, cache_dir="elsewhere", batch_documents=3,
                        num_proc=2).fingerprint(documents) == key
    # the graph and the training cut (under the inference one) leave the rows as they are
    for same in (PassageSpec(graph="section"), PassageSpec(max_passages=60), spec.hyperparameters()):
        assert PassageCache(tokenizer, same).fingerprint(documents) == key
    changed = [PassageCache(tokenizer, PassageSpec(**changes)) for changes in (
        {"words_per_passage": 99}, {"max_passages_inference": 10}, {"max_passages": 150},
        {"max_passage_tokens": 128}, {"title_passage": False})]
    other_vocab = copy.deepcopy(tokenizer)
    other_vocab.add_tokens(["zyzzyva"])
    uncased = copy.deepcopy(tokenizer)
    uncased.backend_tokenizer.normalizer = None  # same vocabulary, no lowercasing
    changed += [PassageCache(other_vocab, spec), PassageCache(uncased, spec)]
    keys = [cache.fingerprint(documents) for cache in changed]
    assert len({key, *keys}) == len(changed) + 1
    edited = copy.deepcopy(documents)
    edited[3].sections[-1].text += " One more sentence."
    assert base.fingerprint(edited) != key and base.fingerprint(documents[:-1]) != key
    assert tokenizer_fingerprint(other_vocab) != tokenizer_fingerprint(tokenizer)
    assert corpus_fingerprint(documents) == corpus_fingerprint(copy.deepcopy(documents))


def test_key_has_the_names_and_values_of_the_arguments_before_the_spec(tokenizer, documents):
    """A cache built before the passage spec is still found: the key names and values are those the flat arguments
    gave (``max_passages``: the larger of the training and inference cuts; ``max_length``: the passage tokens)."""
    spec = PassageSpec(30, max_passage_tokens=64, max_passages=7, max_passages_inference=5, title_passage=False)
    key = PassageCache(tokenizer, spec).key(documents)
    assert key == {"tokenizer": tokenizer_fingerprint(tokenizer), "words_per_passage": 30, "max_passages": 7,
                   "max_length": 64, "add_special_tokens": True, "splitter": key["splitter"], "version": "1"}
    titled = PassageCache(tokenizer, PassageSpec(30, 64, 7, 5, title_passage=True)).key(documents)
    assert titled == {**key, "with_title": True}


def test_slow_tokenizer_is_refused(documents):
    class Slow:
        is_fast = False

    with pytest.raises(TypeError, match="fast"):
        PassageCache(Slow(), PassageSpec()).fingerprint(documents)


def test_arrow_corpus_is_keyed_by_its_table_and_rebuilt_after_an_edit(tmp_path, tokenizer):
    source = tmp_path / "owt"
    source.mkdir()
    for index in range(4):
        (source / f"{index}.txt").write_text(f"Page {index} starts here. It has two sentences.\n\nA paragraph.")

    def corpus():
        return cached_documents(iter_openwebtext, {"source": str(source)}, inputs=[str(source)],
                                context=ReadContext(), cache_dir=str(tmp_path / "hf"))

    cache = PassageCache(tokenizer, PassageSpec(), cache_dir=str(tmp_path / "hf"))
    first = cache.open(corpus())
    assert corpus_fingerprint(corpus()) == corpus().fingerprint == corpus_fingerprint(corpus())
    assert cache.open(corpus()).fingerprint == first.fingerprint
    assert cache.open(corpus()[:2]).fingerprint not in (first.fingerprint, cache.open(corpus()[1:3]).fingerprint)
    (source / "2.txt").write_text("An edited page.")
    os.utime(source / "2.txt", ns=(1, 1))
    edited = cache.open(corpus())
    assert edited.fingerprint != first.fingerprint
    by_id = {row.id: row.passage_ids() for row in edited}
    assert by_id["owt:2.txt"] == tokenizer(["An edited page."], truncation=True, max_length=192)["input_ids"]


def test_parallel_build_equals_serial_and_rows_pickle_as_paths(tmp_path, tokenizer, documents):
    serial = PassageCache(tokenizer, PassageSpec(40), cache_dir=str(tmp_path / "serial")).open(documents)
    parallel = PassageCache(tokenizer, PassageSpec(40), cache_dir=str(tmp_path / "parallel"),
                            num_proc=2).open(documents)
    assert len(parallel.table.cache_files) == 2
    assert [(r.id, r.passage_ids(), r.section_index.tolist()) for r in parallel] == \
           [(r.id, r.passage_ids(), r.section_index.tolist()) for r in serial]
    serial[0]  # opens the column views, which must not travel
    restored = pickle.loads(pickle.dumps(serial))
    assert len(pickle.dumps(serial)) < 4096
    assert [row.passage_ids() for row in restored] == [row.passage_ids() for row in serial]
    assert restored[-1].passage_ids() == serial[len(serial) - 1].passage_ids()
    with pytest.raises(IndexError):
        serial[len(serial)]


def connected(datamodule, cache: PassageCache):
    """The DataModule wired as a passage-reading method wires it, its collator handing over the rows as they are."""
    datamodule.connect(lambda stage: list, cache)
    return datamodule


def test_datamodule_hands_the_methods_collator_cached_passages(tmp_path, tokenizer, monkeypatch):
    corpus = str(write_corpus_jsonl(tmp_path / "docs.jsonl", n_documents=30))
    kwargs = {"paths": [corpus], "batch_size": 4, "num_workers": 2, "val_fraction": 0.2, "seed": 1}
    plain = JSONLDataModule(**kwargs)
    plain.setup("fit")
    train_ids = [d.id for d in plain.train_set]
    by_id = {d.id: d for d in read_jsonl(corpus)}

    spec = PassageSpec(60, max_passage_tokens=64)
    cache = PassageCache(tokenizer, spec, cache_dir=str(tmp_path / "hf"))
    datamodule = JSONLDataModule(**kwargs)
    datamodule.setup("fit")  # as under Lightning: setup, then the method connects
    assert datamodule.train_set[0].id == train_ids[0] and isinstance(datamodule.train_set[0], Document)
    connected(datamodule, cache)
    assert [row.id for row in datamodule.train_set] == train_ids
    assert [row.id for row in datamodule.val_set] == [d.id for d in plain.val_set]
    seen = [row for batch in datamodule.train_dataloader() for row in batch]  # read in 2 worker processes
    assert isinstance(seen[0], TokenizedPassages) and Counter(row.id for row in seen) == Counter(train_ids)
    for row in seen:
        assert row.passage_ids() == reference(by_id[row.id], tokenizer, 60, spec.most_passages, 64)

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("the second run tokenized again")

    monkeypatch.setattr(passage_cache, "tokenize_passages", no_tokenizing)
    second = connected(JSONLDataModule(**kwargs), PassageCache(tokenizer, spec, cache_dir=str(tmp_path / "hf")))
    second.setup("fit")  # connected before setup: setup opens the cache
    assert second.train_set.documents.table.cache_files == datamodule.train_set.documents.table.cache_files
    assert [row.passage_ids() for row in second.train_set] == [row.passage_ids() for row in datamodule.train_set]


def test_graph_roberta_builds_its_passage_cache_with_the_processes_it_is_given(tmp_path, tiny_encoder_dir,
                                                                              monkeypatch):
    from lit_docemb.errors import ConfigError
    from lit_docemb.methods.graph_roberta import GraphRoBERTa

    documents = read_jsonl(write_corpus_jsonl(tmp_path / "docs.jsonl", n_documents=12))
    built_with = record_cache_builds(monkeypatch)
    parallel = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), passages=PassageSpec(max_passage_tokens=32),
                            passage_cache_dir=str(tmp_path / "parallel"),
                            passage_cache_num_proc=2).token_cache.open(documents)
    serial = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), passages=PassageSpec(max_passage_tokens=32),
                          passage_cache_dir=str(tmp_path / "serial")).token_cache.open(documents)
    assert built_with == [2, None]
    assert [(r.id, r.passage_ids(), r.section_index.tolist()) for r in parallel] == \
           [(r.id, r.passage_ids(), r.section_index.tolist()) for r in serial]
    with pytest.raises(ConfigError, match="passage_cache_num_proc"):
        GraphRoBERTa(EncoderSpec(tiny_encoder_dir), passages=PassageSpec(max_passage_tokens=32),
                     passage_cache_num_proc=0)
