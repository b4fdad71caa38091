"""Graph-RoBERTa's views (lit_docemb/views/graph_roberta.py): the passage graph a document is collated into,
sub-document splits, and picking or joining graphs of a batch."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch
from corpus_files import sectioned_document

from lit_docemb.data import PassageSpec
from lit_docemb.data.core.batches import PassageGraphBatch, TokenBatch
from lit_docemb.data.core.document import Document, Section, query_document
from lit_docemb.data.core.passage_graph import fully_connected_edges, section_edges
from lit_docemb.data.core.text import chunk_passages
from lit_docemb.views.graph_roberta import (
    GraphDocumentCollator,
    PassageGraphBuilder,
    SubDocumentCollator,
    concat_graphs,
    select_graphs,
    split_passages,
)


def edge_set(edges: torch.Tensor) -> set[tuple[int, int]]:
    return {tuple(e) for e in edges.T.tolist()}


def test_collated_section_graph_follows_the_document(tiny_tokenizer):
    doc = sectioned_document()
    builder = PassageGraphBuilder(tiny_tokenizer, PassageSpec(8, 32, graph="section"))
    batch = GraphDocumentCollator(builder, 100)([doc])
    sections = [p.section_index for p in chunk_passages(doc, 8, with_title=True)]  # the title first
    assert batch.graphs.passage_counts.tolist() == [len(sections)]
    assert len(sections) >= 6 and sorted(set(sections)) == [0, 1, 2]  # 3 sections, several passages each
    assert edge_set(batch.graphs.edges[0]) == edge_set(section_edges(sections))



@pytest.mark.parametrize("n", [2, 3, 7, 50])
def test_halves_are_disjoint_covering_and_balanced(n):
    for seed in range(20):
        a, b = split_passages(n, random.Random(seed), "halves")
        assert sorted(a + b) == list(range(n)) and not set(a) & set(b)
        assert len(a) == n // 2 and len(b) == n - n // 2



def test_one_passage_split_takes_the_first_half_the_time():
    firsts = Counter()
    for seed in range(2000):
        a, b = split_passages(10, random.Random(seed), "one_passage")
        assert len(a) == 1 and sorted(a + b) == list(range(10))
        firsts[a[0] == 0] += 1
    assert 0.50 < firsts[True] / 2000 < 0.60  # 0.5 + 0.5 * 1/10 = 0.55



def test_select_graphs_keeps_each_graphs_passages():
    counts = torch.tensor([2, 1, 3])
    ids = torch.arange(6)[:, None].repeat(1, 4) + 10  # passage i's tokens are all 10 + i
    graphs = PassageGraphBatch(TokenBatch(ids, torch.ones_like(ids)), counts,
                               [fully_connected_edges(int(c)) for c in counts])
    picked = select_graphs(graphs, torch.tensor([2, 0]))
    assert picked.passage_counts.tolist() == [3, 2]
    assert picked.passages.input_ids[:, 0].tolist() == [13, 14, 15, 10, 11]
    assert edge_set(picked.edges[0]) == edge_set(fully_connected_edges(3))


def test_a_query_among_documents_is_a_graph_without_edges(tiny_tokenizer):
    builder = PassageGraphBuilder(tiny_tokenizer, PassageSpec(8, 32))
    doc = sectioned_document(n_sections=1)
    batch = GraphDocumentCollator(builder, 100)([doc, query_document("q1", "tides and pumps")])
    n_passages = len(chunk_passages(doc, 8, with_title=True))
    assert batch.ids == ["doc", "query:q1"] and batch.graphs.passage_counts.tolist() == [n_passages, 1]
    assert batch.graphs.is_query.tolist() == [False, True]
    assert edge_set(batch.graphs.edges[0]) == edge_set(fully_connected_edges(n_passages))
    assert batch.graphs.edges[1].shape == (2, 0)
    capped = GraphDocumentCollator(builder, 2)([doc])
    assert capped.graphs.passage_counts.tolist() == [2]


@pytest.mark.parametrize("objective", ["halves", "one_passage"])
def test_sub_documents_share_out_the_passages_and_follow_the_id_in_validation(tiny_tokenizer, objective):
    builder = PassageGraphBuilder(tiny_tokenizer, PassageSpec(8, 32))
    collate = SubDocumentCollator(builder, max_passages=6, objective=objective, deterministic=True)
    short = Document("short", sections=[Section("", "Too short.")])
    docs = [sectioned_document(), short]
    batch = collate(docs)
    assert batch.skipped == 1 and len(batch.doc_index) == 1
    counts = int(batch.view_a.passage_counts[0]), int(batch.view_b.passage_counts[0])
    assert sum(counts) == 6 and (counts[0] == 1 if objective == "one_passage" else counts == (3, 3))
    assert batch.view_a.is_query.tolist() == [objective == "one_passage"] and not batch.view_b.is_query.any()
    torch.manual_seed(1)  # validation draws from the document's id, not torch's RNG
    again = collate(docs)
    assert torch.equal(again.view_a.passages.input_ids, batch.view_a.passages.input_ids)
    assert torch.equal(again.view_b.passages.input_ids, batch.view_b.passages.input_ids)


def test_concat_graphs_pads_passages_to_one_width_and_keeps_query_marks():
    short_ids, long_ids = torch.full((2, 3), 5), torch.full((1, 6), 7)
    first = PassageGraphBatch(TokenBatch(short_ids, torch.ones_like(short_ids)), torch.tensor([2]),
                              [fully_connected_edges(2)], torch.tensor([False]))
    second = PassageGraphBatch(TokenBatch(long_ids, torch.ones_like(long_ids)), torch.tensor([1]),
                               [torch.zeros(2, 0, dtype=torch.long)])  # a batch that does not mark queries
    joined = concat_graphs(first, second)
    assert joined.passages.input_ids.tolist() == [[5, 5, 5, 0, 0, 0]] * 2 + [[7] * 6]
    assert joined.passages.attention_mask.sum(1).tolist() == [3, 3, 6]
    assert joined.passage_counts.tolist() == [2, 1] and joined.is_query.tolist() == [False, False]
    assert len(joined.edges) == 2 and edge_set(joined.edges[0]) == {(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)}
