"""Search backends (exact torch top-k and FAISS flat / HNSW / IVF) against a full sort, embedding with ids when a
collator drops documents, the corpus embedded in shards, one per rank, and queries ranked as queries."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from runs import Letters, collate_letters

from lit_docemb.data.core.document import Document, Section, query_document
from lit_docemb.eval.embedding import embed_documents, embed_sharded, embed_with_ids
from lit_docemb.eval.search import ExactSearch, FaissSearch, inner_product_space, rank
from lit_docemb.methods import GraphRoBERTa
from lit_docemb.data import PassageSpec
from lit_docemb.models import EncoderSpec


class Paired(Letters):
    def similarity(self, queries, candidates):
        return queries @ candidates.T


def doc(i: int, text: str) -> Document:
    return Document(str(i), sections=[Section("", text)])


def random_vectors(n: int, dim: int = 16, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))


def test_exact_and_faiss_flat_equal_a_full_sort_by_cosine():
    method, queries, documents = Letters(), random_vectors(7, seed=1), random_vectors(300)
    expected_scores, expected_rows = (F.normalize(queries, dim=-1) @ F.normalize(documents, dim=-1).T).topk(10)
    for search in (ExactSearch(chunk=64), FaissSearch("flat")):
        scores, rows = search(method, queries, documents, depth=10)
        assert torch.equal(rows, expected_rows), type(search).__name__
        assert torch.allclose(scores, expected_scores, atol=1e-5)
    assert FaissSearch("flat")(method, queries, documents[:4], depth=10)[1].shape == (7, 4)  # capped by the corpus


def test_approximate_indexes_find_most_exact_neighbours():
    method, queries, documents = Letters(), random_vectors(20, seed=2), random_vectors(2000)
    _, exact = ExactSearch()(method, queries, documents, depth=10)
    def recall(search: FaissSearch) -> float:
        _, rows = search(method, queries, documents, depth=10)
        return sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(rows, exact, strict=True)) / exact.numel()

    assert recall(FaissSearch("hnsw")) > 0.9
    # IVF with 40 cells: visiting every cell is exact, visiting a few finds fewer neighbours
    few, every = recall(FaissSearch("ivf", nlist=40, nprobe=4)), recall(FaissSearch("ivf", nlist=40, nprobe=40))
    assert every == 1.0 and 0.2 < few < 1.0
    with pytest.raises(ValueError, match="unknown FAISS index"):
        FaissSearch("lsh")


def test_faiss_needs_an_inner_product_space():
    assert inner_product_space(Letters()) == "cos"
    with pytest.raises(ValueError, match="its own similarity"):
        FaissSearch()(Paired(), random_vectors(2), random_vectors(5), depth=2)


def test_embedding_keeps_document_order_and_counts_skipped_documents():
    documents = [doc(0, "aaaa e"), doc(1, "skip me"), doc(2, "i"), doc(3, "o o o o o o o o u"), doc(4, "skip")]
    ids, vectors, skipped = embed_with_ids(Letters(), documents, batch_size=2)
    assert ids == ["0", "2", "3"] and skipped == 2
    assert torch.allclose(vectors, collate_letters([documents[i] for i in (0, 2, 3)]).vectors)
    with pytest.raises(ValueError, match="could not represent 2 of 5"):
        embed_documents(Letters(), documents)
    assert torch.equal(embed_sharded(Letters(), documents[2:4]), embed_documents(Letters(), documents[2:4]))


def test_each_rank_embeds_its_shard_and_the_gather_restores_document_order(monkeypatch):
    """Three ranks simulated in one process: rank r embeds rows [r*N//W, (r+1)*N//W) and the gather (rank 0's rows
    first, as lit_docemb.distributed.gather_no_grad returns them) gives the corpus in order."""
    from lit_docemb.eval import embedding as dense_search

    documents = [doc(i, "a" * i + "e" * (i % 3) + "u" * (7 - i % 7)) for i in range(11)]
    shards = {}
    monkeypatch.setattr(dense_search.dist, "world_size", lambda: 3)
    for rank in range(3):
        monkeypatch.setattr(dense_search.dist, "rank", lambda rank=rank: rank)
        monkeypatch.setattr(dense_search.dist, "gather_no_grad", lambda local, rank=rank: shards.setdefault(rank, local))
        dense_search.embed_sharded(Letters(), documents, batch_size=2)
    assert [len(shards[r]) for r in range(3)] == [3, 4, 4]
    expected = embed_documents(Letters(), documents)
    assert torch.equal(torch.cat([shards[r] for r in range(3)]), expected)
    assert torch.equal(dense_search.embed_sharded(Letters(), documents[:2]), expected[:2])  # fewer than ranks: all


def test_rank_embeds_graph_roberta_queries_as_single_nodes_and_documents_as_graphs(tiny_encoder_dir):
    torch.manual_seed(0)
    method = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                          passages=PassageSpec(words_per_passage=8, max_passage_tokens=32)).eval()
    corpus = [doc(0, "Cats sleep most of the day."), doc(1, "Stocks fell sharply today. Markets were closed early.")]
    run = rank(method, corpus, {"q": "sleeping cats"}, depth=2)
    collate = method.collator("predict")
    with torch.no_grad():
        query = collate([query_document("q", "sleeping cats")]).graphs
        node = method.model.passage_nodes(query.passages)  # (1, node_dim): eq. 1, the layers never run (§3.3)
        as_document = embed_documents(method, [doc(2, "sleeping cats")])  # the same text as a 2-node graph
    expected = method.similarity(node, embed_documents(method, corpus))[0]
    assert [run["q"][d] for d in ("0", "1")] == pytest.approx(expected.tolist(), abs=1e-5)
    assert not torch.allclose(as_document, node, atol=1e-4)
