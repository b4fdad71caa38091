"""A BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) as a ranking corpus: documents, query splits,
retrieval fine-tuning examples where it has train qrels, and its refusals."""

from __future__ import annotations

from collections import Counter

import pytest
from corpus_files import write_beir

from lit_docemb.data.corpora.beir import BEIRDataModule, read_beir_qrels
from lit_docemb.data.core.reading import MalformedInputError, ReadContext
from lit_docemb.errors import ConfigError


def test_corpus_and_test_queries_as_evaluate_reads_them(tmp_path):
    root = write_beir(tmp_path / "cranfield", train=False)
    data = BEIRDataModule(str(root), train_split=None, cache_dir=str(tmp_path / "cache"))
    documents = data.load_documents()
    assert len(documents) == 16 and data.stats == Counter(empty_document=1)  # the empty one, as Cranfield's 471
    first = documents[0]
    assert (first.id, first.title) == ("1", "boundary layer heat transfer study 1")
    assert first.text == "an experimental study of boundary layer heat transfer . results for case 1 are given ."
    assert data.ranked_split() == "test" and data.query_split("train") is None
    test = data.query_split("test")
    assert sorted(test.queries) == ["1", "2", "3", "4"]  # the judged ones of queries.jsonl
    assert test.queries["2"].text == "what is known about shock wave supersonic flow ?"
    assert test.qrels["1"] == {"1": 2, "5": 1, "9": 1, "13": 1, "2": 0}  # the header line is not a judgement
    assert data.query_split("val") is None


def test_train_qrels_serve_retrieval_examples(tmp_path):
    root = write_beir(tmp_path / "beir")
    data = BEIRDataModule(str(root), mode="retrieval", num_negatives=2, cache_dir=str(tmp_path / "cache"),
                          batch_size=4, num_workers=0)
    data.setup("fit")
    assert len(data.train_set) == 4 * 4 and len(data.test_set) == 4 * 4  # a (query, relevant document) pair each
    example = data.train_set[(0, 0)]
    judged = data.query_split("train").qrels[example.query_id]
    assert judged[example.positive.id] > 0 and all(judged.get(n.id, 0) <= 0 for n in example.negatives)
    assert len(example.negatives) == 2
    assert data.train_set[(0, 0)].negatives == example.negatives  # the same epoch draws the same
    held = BEIRDataModule(str(root), mode="retrieval", val_queries_from_train=1, cache_dir=str(tmp_path / "cache"),
                          num_workers=0)
    assert len(held.query_split("val").queries) == 1 and len(held.query_split("train").queries) == 3


def test_bad_lines_are_counted_and_bad_settings_refused_in_one_line(tmp_path):
    root = write_beir(tmp_path / "beir", train=False)
    qrels = root / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "5\t7\n5\t7\tgood\n1\t5\t1\n", encoding="utf-8")
    context = ReadContext()
    read = read_beir_qrels(qrels, context)
    assert read["1"]["5"] == 1 and context.stats == Counter(malformed_qrels_line=2, duplicate_qrels_entry=1)
    with pytest.raises(MalformedInputError, match=r"test.tsv, line 22: got '5.t7'; expected query-id<TAB>"):
        read_beir_qrels(qrels, ReadContext(strict=True))
    with pytest.raises(ConfigError, match=r"^data\.init_args\.train_split: .*qrels/train.tsv does not exist \(the "
                                          r"folder's qrels: \['test'\]\): name one of them, or set train_split to null"):
        BEIRDataModule(str(root), cache_dir=str(tmp_path / "cache")).query_split("test")
    with pytest.raises(ConfigError, match="train_split is null, but mode: retrieval trains on the training qrels"):
        BEIRDataModule(str(root), mode="retrieval", train_split=None)
    with pytest.raises(ConfigError, match="negatives: run needs data.init_args.negatives_run"):
        BEIRDataModule(str(root), negatives="run")
    with pytest.raises(ConfigError, match="val_queries_from_train=2 holds out training queries, but train_split is null"):
        BEIRDataModule(str(root), train_split=None, val_queries_from_train=2).query_split("test")
    with pytest.raises(ConfigError, match=r"^data\.init_args\.root: '.*nowhere' does not exist"):
        BEIRDataModule(str(tmp_path / "nowhere")).prepare_data()
