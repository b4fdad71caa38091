"""Exact dense search: chunked top-k equals a full sort, a ranked run round-trips through a TREC file into
checkpoint-mined negatives, and the command line ranks a split with a checkpoint."""

from __future__ import annotations

import pytest
import torch
from corpus_files import _write_wikir

from lit_docemb.commands.dense_search import main
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.retrieval.trec import read_run, write_run
from lit_docemb.data.corpora.wikir import WIKIRDataModule
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.eval.search import rank, top_k
from lit_docemb.methods import DenseRetrieval, DocSplit
from lit_docemb.models import EncoderSpec


@pytest.fixture(scope="module")
def method(tiny_encoder_dir) -> DenseRetrieval:
    torch.manual_seed(0)
    return DenseRetrieval(DocSplit(EncoderSpec(tiny_encoder_dir, pooling="mean", max_length=48),
                                   mlm_weight=0.0)).eval()


def test_chunked_top_k_equals_a_full_sort(method):
    gen = torch.Generator().manual_seed(0)
    queries, documents = torch.randn(5, 8, generator=gen), torch.randn(103, 8, generator=gen)
    scores, rows = top_k(method, queries, documents, depth=10, chunk=17)
    full = queries @ documents.T  # the method's similarity: dot
    expected_scores, expected_rows = full.topk(10, dim=1)
    assert torch.allclose(scores, expected_scores) and torch.equal(rows, expected_rows)
    assert top_k(method, queries, documents[:4], depth=10)[1].shape == (5, 4)  # depth capped by the corpus


def test_ranked_run_becomes_mined_negatives(method, tmp_path):
    root = _write_wikir(tmp_path / "wikir")
    data = WIKIRDataModule(str(root), mode="retrieval", negatives="uniform", cache_dir=str(tmp_path / "c"),
                           batch_size=4, num_workers=0)
    data.setup("fit")
    queries = {q: query.text for q, query in data.query_split("train").queries.items()}
    run = rank(method, data.corpus, queries, depth=5)
    assert set(run) == set(queries) and all(len(docs) == 5 for docs in run.values())
    corpus = embed_documents(method, data.corpus)
    first = next(iter(run))
    best = max(run[first], key=run[first].get)
    query_vec = embed_documents(method, [Document(f"query:{first}", sections=[Section("", queries[first])])])
    ids = [d.id for d in data.corpus]
    scores = (query_vec @ corpus.T)[0]
    assert run[first][best] == pytest.approx(float(scores.max()), rel=1e-5)
    # the top document, or one tied with it (fixture documents may embed alike on the tiny encoder)
    assert float(scores[ids.index(best)]) == pytest.approx(float(scores.max()), rel=1e-5)
    write_run(run, tmp_path / "mined.run")
    assert read_run(tmp_path / "mined.run")[first][best] == run[first][best]
    mined = WIKIRDataModule(str(root), mode="retrieval", negatives="run", negatives_run=str(tmp_path / "mined.run"),
                            num_negatives=2, cache_dir=str(tmp_path / "c"), batch_size=4, num_workers=0)
    mined.setup("fit")
    example = mined.train_set[0]
    assert all(n.id in run[example.query_id] for n in example.negatives)  # drawn from the checkpoint's run


@pytest.mark.slow
def test_command_line_ranks_a_split_with_a_checkpoint(method, tiny_encoder_dir, tmp_path):
    root = _write_wikir(tmp_path / "wikir")
    torch.save({"state_dict": method.state_dict()}, tmp_path / "m.ckpt")
    config = tmp_path / "c.yaml"
    config.write_text(f"""model:
  class_path: lit_docemb.methods.DenseRetrieval
  init_args:
    backbone:
      class_path: lit_docemb.methods.DocSplit
      init_args: {{encoder: {{name: {tiny_encoder_dir}, pooling: mean, max_length: 48}}, mlm_weight: 0.0}}
data:
  class_path: lit_docemb.data.WIKIRDataModule
  init_args: {{root: {root}, cache_dir: {tmp_path / 'c'}}}
trainer: {{logger: false}}
""")
    main(["--config", str(config), "--ckpt_path", str(tmp_path / "m.ckpt"), "--split", "test", "--depth", "3",
          "--output", str(tmp_path / "test.run"), "--accelerator", "cpu"])
    run = read_run(tmp_path / "test.run")
    assert set(run) == {"8", "9"} and all(len(docs) == 3 for docs in run.values())
