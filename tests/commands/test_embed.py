"""``python -m lit_docemb embed``: every method's vectors written in input order, bad lines counted, the sharded
2-process run equal to the 1-process one."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from conftest import _topic_texts
from runs import run_embed, save_run, write_tsv

from lit_docemb.augment import Vocabulary
from lit_docemb.commands.loading import read_documents
from lit_docemb.eval.embedding_writers import LengthBuckets
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.tokens import document_text
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.methods import CTPE, DECA, DocSplit, GraphRoBERTa
from lit_docemb.methods.deca_components import Doc2VecCBackbone
from lit_docemb.models.ctpe import WordEmbeddings


def topic_documents(n: int) -> list[Document]:
    """Topics as one-section documents titled by name; lengths vary, so batches get reordered."""
    return [Document(f"t{i}", title=name, sections=[Section("", " ".join(text.split()[:40 + 13 * i]))])
            for i, (name, text) in enumerate(_topic_texts()[:n])]


def read_parquet(out: Path) -> tuple[list[str], dict[str, np.ndarray]]:
    table = pq.read_table(out / "embeddings.parquet")
    vectors = {n: np.array(table.column(n).to_pylist(), dtype=np.float32) for n in table.column_names if n != "id"}
    return table.column("id").to_pylist(), vectors


def test_tsv_and_jsonl_inputs_count_bad_lines(tmp_path):
    docs = topic_documents(4)
    stats = Counter()
    read = read_documents(write_tsv(tmp_path / "d.tsv", docs), stats)
    assert [(d.id, d.title, d.text) for d in read] == [(d.id, d.title, d.text) for d in docs]
    assert stats == {"malformed_record": 2}
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("".join(d.to_json() + "\n" for d in docs) + "{broken\n" + '{"id": "e", "text": ""}\n')
    stats = Counter()
    assert [d.id for d in read_documents(jsonl, stats)] == [d.id for d in docs]
    assert stats == {"malformed_record": 1, "empty_document": 1}
    (tmp_path / "two.tsv").write_text("a\tplain text\n")
    plain = read_documents(tmp_path / "two.tsv")[0]
    assert (plain.id, plain.title, plain.text) == ("a", "", "plain text")
    with pytest.raises(ValueError, match="jsonl"):
        read_documents(tmp_path / "docs.csv")


def test_length_buckets_deal_every_document_once_to_the_ranks():
    lengths = [5, 1, 9, 3, 7, 2, 8]
    ranks = [list(LengthBuckets(lengths, 2, r, 2)) for r in range(2)]
    assert ranks[0] == [[1, 5], [4, 6]] and ranks[1] == [[3, 0], [2]]  # shortest first, batch b on rank b % 2
    assert sorted(i for r in ranks for b in r for i in b) == list(range(7))


def test_docsplit_parquet_in_input_order(tiny_encoder_dir, tmp_path, caplog):
    torch.manual_seed(0)
    args = {"encoder": {"name": tiny_encoder_dir, "pooling": "mean", "max_length": 64}}
    method = DocSplit(**args)
    config, ckpt = save_run(method, tmp_path / "run", args)
    docs = topic_documents(7)
    with caplog.at_level(logging.WARNING, logger="lit_docemb.commands.embed"):
        run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", docs), tmp_path / "out")
    assert [r.getMessage() for r in caplog.records if r.name == "lit_docemb.commands.embed"] == [
        f"embed --input {tmp_path / 'docs.tsv'}: read 7 documents; skipped 2 (malformed_record 2)"]
    ids, vectors = read_parquet(tmp_path / "out")
    assert ids == [d.id for d in docs] and list(vectors) == ["embeddings"]
    expected = embed_documents(method, docs).numpy()
    np.testing.assert_allclose(vectors["embeddings"], expected, atol=1e-5)
    stats = json.loads((tmp_path / "out" / "embed_stats.json").read_text())
    assert stats["embedded"] == 7 and stats["skipped_on_read"] == {"malformed_record": 2}
    assert not (tmp_path / "out" / "shards").exists()


def test_graph_roberta_npy(tiny_encoder_dir, tmp_path):
    torch.manual_seed(0)
    args = {"encoder": {"name": tiny_encoder_dir}, "node_dim": 16,
            "passages": {"words_per_passage": 8, "max_passage_tokens": 32}, "cache_passages": False}
    method = GraphRoBERTa(**args)
    config, ckpt = save_run(method, tmp_path / "run", args)
    docs = topic_documents(5)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(d.to_json() + "\n" for d in docs))
    run_embed(config, ckpt, jsonl, tmp_path / "out", "--format", "npy")
    assert (tmp_path / "out" / "ids.txt").read_text().split() == [d.id for d in docs]
    vectors = np.load(tmp_path / "out" / "embeddings.npy")
    np.testing.assert_allclose(vectors, embed_documents(method, docs).numpy(), atol=1e-5)
    assert vectors.shape == (5, 16)


def test_deca_doc2vecc_vocabulary_comes_from_the_checkpoint(tmp_path):
    torch.manual_seed(0)
    args = {"backbone": {"class_path": "lit_docemb.methods.deca_components.Doc2VecCBackbone",
                         "init_args": {"min_word_count": 1, "embedding_dim": 8}},
            "augmentation": {"class_path": "lit_docemb.augment.specs.WordNet"}}
    method = DECA(Doc2VecCBackbone(min_word_count=1, embedding_dim=8))
    docs = topic_documents(6)
    method._set_vocabulary(Vocabulary.from_texts(document_text(d, True) for d in docs))
    config, ckpt = save_run(method, tmp_path / "run", args)
    run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", docs, bad_lines=False), tmp_path / "out")
    ids, vectors = read_parquet(tmp_path / "out")
    assert ids == [d.id for d in docs]
    np.testing.assert_allclose(vectors["embeddings"], embed_documents(method, docs).numpy(), atol=1e-6)
    assert np.abs(vectors["embeddings"]).sum() > 0


def test_ctpe_writes_its_pairs_and_counts_unsplittable_documents(tmp_path):
    torch.manual_seed(0)
    args = {"embeddings": {"class_path": "lit_docemb.methods.WordEmbeddings",
                           "init_args": {"init": "random", "dim": 8, "min_count": 1}},
            "n_filters": 4, "max_length": 16, "pos": 0.5}
    method = CTPE(WordEmbeddings(init="random", dim=8, min_count=1), n_filters=4, max_length=16, pos=0.5)
    docs = topic_documents(6)
    method.prepare(docs)
    config, ckpt = save_run(method, tmp_path / "run", args)
    with_short = docs[:2] + [Document("short", sections=[Section("", "word")])] + docs[2:]
    run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", with_short, bad_lines=False), tmp_path / "out")
    ids, vectors = read_parquet(tmp_path / "out")
    assert ids == [d.id for d in docs] and sorted(vectors) == ["former", "latter"]
    method.eval()
    with torch.no_grad():
        pairs = method.embed(method.collator("predict")(docs)).numpy()
    np.testing.assert_allclose(vectors["former"], pairs[:, 0], atol=1e-5)
    np.testing.assert_allclose(vectors["latter"], pairs[:, 1], atol=1e-5)
    assert json.loads((tmp_path / "out" / "embed_stats.json").read_text())["skipped_by_method"] == 1


@pytest.mark.slow
def test_two_processes_merge_to_the_one_process_output(tiny_encoder_dir, tmp_path):
    """DDP on 2 CPU processes (gloo): each rank writes the batches dealt to it; the merged file is the same as
    one process's (ids in input order, vectors equal)."""
    torch.manual_seed(0)
    args = {"encoder": {"name": tiny_encoder_dir, "max_length": 64}}
    config, ckpt = save_run(DocSplit(**args), tmp_path / "run", args)
    data = write_tsv(tmp_path / "docs.tsv", topic_documents(11))
    run_embed(config, ckpt, data, tmp_path / "one")
    cmd = [sys.executable, "-m", "lit_docemb", "embed", "--config", str(config), "--ckpt_path", str(ckpt),
           "--input", str(data), "--output", str(tmp_path / "two"), "--batch_size", "3", "--accelerator", "cpu",
           "--devices", "2", "--strategy", "ddp", "--progress_bar", "false"]
    result = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    one_ids, one = read_parquet(tmp_path / "one")
    two_ids, two = read_parquet(tmp_path / "two")
    assert two_ids == one_ids and len(one_ids) == 11
    np.testing.assert_allclose(two["embeddings"], one["embeddings"], atol=1e-6)
    assert json.loads((tmp_path / "two" / "embed_stats.json").read_text())["devices"] == 2


@pytest.mark.parametrize("keep_empty", [False, True])
def test_deca_doc2vecc_documents_without_a_known_word_are_counted(tmp_path, keep_empty):
    torch.manual_seed(0)
    args = {"backbone": {"class_path": "lit_docemb.methods.deca_components.Doc2VecCBackbone",
                         "init_args": {"min_word_count": 1, "embedding_dim": 8, "keep_empty": keep_empty}},
            "augmentation": {"class_path": "lit_docemb.augment.specs.WordNet"}}
    method = DECA(Doc2VecCBackbone(min_word_count=1, embedding_dim=8, keep_empty=keep_empty))
    docs = topic_documents(4)
    method._set_vocabulary(Vocabulary.from_texts(document_text(d, True) for d in docs))
    config, ckpt = save_run(method, tmp_path / "run", args)
    unknown = Document("unknown", sections=[Section("", "zzqx qqzv xxyzzy")])
    run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", docs[:2] + [unknown] + docs[2:], bad_lines=False),
              tmp_path / "out")
    ids, vectors = read_parquet(tmp_path / "out")
    stats = json.loads((tmp_path / "out" / "embed_stats.json").read_text())
    assert stats["empty_documents"] == 1
    if keep_empty:
        assert ids == ["t0", "t1", "unknown", "t2", "t3"] and stats["skipped_by_method"] == 0
        assert not vectors["embeddings"][2].any() and vectors["embeddings"][[0, 1, 3, 4]].any(1).all()
    else:
        assert ids == [d.id for d in docs] and stats["skipped_by_method"] == 1
        assert vectors["embeddings"].any(1).all()


def test_colde_embeds_a_document_longer_than_its_chunk_table(tiny_encoder_dir, tmp_path):
    from lit_docemb.methods import CoLDE

    torch.manual_seed(0)
    args = {"encoder": {"name": tiny_encoder_dir}, "chunk_tokens": 16, "chunk_embeddings": 4, "num_heads": 2,
            "lstm_output_size": 8, "projection_size": 4, "predict_similarities": False}
    method = CoLDE(**args)
    docs = topic_documents(3)
    long = Document("long", sections=[Section("", " ".join(" ".join(t for _, t in _topic_texts()).split()[:400]))])
    config, ckpt = save_run(method, tmp_path / "run", args)
    run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", [long, *docs], bad_lines=False), tmp_path / "out")
    ids, vectors = read_parquet(tmp_path / "out")
    assert ids == ["long", "t0", "t1", "t2"] and np.isfinite(vectors["embeddings"]).all()
    assert json.loads((tmp_path / "out" / "embed_stats.json").read_text())["skipped_by_method"] == 0


def test_colde_writes_its_document_vectors_not_each_batchs_similarity_matrix(tiny_encoder_dir, tmp_path):
    """CoLDE's predict_step also returns the batch's (B, B) document similarities (predict_similarities, the
    default): embed writes the (N, D) embeddings only, whatever the batch sizes (5 documents in batches of 3)."""
    from lit_docemb.methods import CoLDE

    torch.manual_seed(0)
    args = {"encoder": {"name": tiny_encoder_dir}, "chunk_tokens": 16, "num_heads": 2, "lstm_output_size": 8,
            "projection_size": 4}
    method = CoLDE(**args)
    docs = topic_documents(5)
    config, ckpt = save_run(method, tmp_path / "run", args)
    run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", docs, bad_lines=False), tmp_path / "out")
    ids, vectors = read_parquet(tmp_path / "out")
    assert ids == [d.id for d in docs] and sorted(vectors) == ["embeddings"]
    method.eval()
    expected = embed_documents(method, docs, batch_size=5)
    np.testing.assert_allclose(vectors["embeddings"], expected.numpy(), atol=1e-5)


def test_a_declared_vector_output_that_is_not_one_row_per_document_is_named(tmp_path):
    from lit_docemb.eval.embedding_writers import vector_fields

    prediction = {"ids": ["a", "b"], "embeddings": torch.ones(2, 3), "attention": [torch.ones(4)]}
    assert sorted(vector_fields(prediction, ("embeddings",))) == ["embeddings"]
    with pytest.raises(ValueError, match=r"Letters\.predict_step's 'attention' is not \(2, width\) vectors"):
        vector_fields(prediction, ("embeddings", "attention"), "Letters")


def test_input_the_method_cannot_represent_at_all_is_one_line(tmp_path, capsys):
    """CTPE splitting before a 'Claims' section, given documents without one, leaves every batch empty: one line
    naming --input and the cause, status 2 (it was an IndexError traceback on the empty shards)."""
    torch.manual_seed(0)
    args = {"embeddings": {"class_path": "lit_docemb.methods.WordEmbeddings",
                           "init_args": {"init": "random", "dim": 8, "min_count": 1}},
            "n_filters": 4, "max_length": 16, "pos": "before:Claims"}
    method = CTPE(WordEmbeddings(init="random", dim=8, min_count=1), n_filters=4, max_length=16, pos="before:Claims")
    docs = topic_documents(4)
    method.prepare(docs)
    config, ckpt = save_run(method, tmp_path / "run", args)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", docs, bad_lines=False), tmp_path / "out")
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("error: --input: none of the 4 documents was embedded"), err


def test_an_input_whose_every_record_is_skipped_is_one_line(tmp_path, capsys):
    """JSON lines without an "id" are all skipped: one line naming --input, what was skipped and the fix, status 2
    (it was a ValueError traceback, found walking the R8 DC+SC journey)."""
    method = DECA(Doc2VecCBackbone(min_word_count=1, embedding_dim=8))
    docs = topic_documents(3)
    method._set_vocabulary(Vocabulary.from_texts(document_text(d, True) for d in docs))
    config, ckpt = save_run(method, tmp_path / "run", {"backbone": {
        "class_path": "lit_docemb.methods.deca_components.Doc2VecCBackbone",
        "init_args": {"min_word_count": 1, "embedding_dim": 8}}})
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"text": d.text}) + "\n" for d in docs))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        run_embed(config, ckpt, jsonl, tmp_path / "out")
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: --input: {jsonl} has no document to embed"), err
    assert '"id"' in err[0] and not (tmp_path / "out").exists(), err
