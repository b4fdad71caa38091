"""Graph-RoBERTa's document model against a per-node reference of eq. 1-3: every document, one passage included,
is a graph of n + 1 nodes through the graph layers; only a query is a single node (seed paper 000, §2.1, §3.3)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.data.core.batches import PassageGraphBatch, TokenBatch
from lit_docemb.data.core.passage_graph import fully_connected_edges, section_edges
from lit_docemb.models.graph_document import GraphDocumentEncoder

pytest.importorskip("torch_geometric")

HIDDEN, NODE_DIM, HEADS = 8, 6, 2


class BagEncoder(nn.Module):
    """A stand-in passage encoder: the mean of its tokens' embeddings."""

    hidden_size = HIDDEN

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, HIDDEN)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        mask = attention_mask[..., None].float()
        return (self.embedding(input_ids) * mask).sum(1) / mask.sum(1)


@pytest.fixture
def model() -> GraphDocumentEncoder:
    torch.manual_seed(0)
    model = GraphDocumentEncoder(BagEncoder(), node_dim=NODE_DIM, num_layers=2, num_heads=HEADS, attention_dropout=0.0)
    with torch.no_grad():
        for layer in model.layers:
            layer.bias.normal_()  # GATConv starts them at 0: make them count
    return model.eval()


def passages(*lengths: int, start: int = 1) -> list[list[int]]:
    ids, out = start, []
    for n in lengths:
        out.append(list(range(ids, ids + n)))
        ids += n
    return out


def batch(graphs: list[list[list[int]]], is_query: list[bool] | None = None) -> PassageGraphBatch:
    """Graphs given as their passages' token ids; documents fully connected, queries without edges."""
    flat = [p for g in graphs for p in g]
    width = max(map(len, flat))
    ids = torch.tensor([p + [0] * (width - len(p)) for p in flat])
    queries = is_query or [False] * len(graphs)
    edges = [torch.zeros(2, 0, dtype=torch.long) if q else fully_connected_edges(len(g)) for g, q in zip(graphs, queries)]
    return PassageGraphBatch(TokenBatch(ids, (ids > 0).long()), torch.tensor([len(g) for g in graphs]), edges,
                             None if is_query is None else torch.tensor(is_query))


def reference_gat(layer, x: Tensor, edges: Tensor) -> Tensor:
    """One GAT layer node by node: target i weighs each neighbour j by softmax_j LeakyReLU(a_src.Wx_j + a_dst.Wx_i)."""
    heads, width = layer.att_src.shape[1:]
    h = (x @ layer.lin.weight.T).view(len(x), heads, width)  # (N, heads, width)
    out = torch.zeros(len(x), heads, width)
    for i in range(len(x)):
        sources = [int(j) for j, t in edges.T.tolist() if t == i]
        if not sources:
            continue
        scores = torch.stack([(h[j] * layer.att_src[0]).sum(-1) + (h[i] * layer.att_dst[0]).sum(-1) for j in sources])
        alpha = torch.softmax(F.leaky_relu(scores, 0.2), dim=0)  # (neighbours, heads)
        out[i] = sum(alpha[k][:, None] * h[j] for k, j in enumerate(sources))
    return out.reshape(len(x), heads * width) + layer.bias


def reference_embedding(model: GraphDocumentEncoder, passage_ids: list[list[int]], is_query: bool = False) -> Tensor:
    """Eq. 1-3 for one graph alone: passage nodes, the document node as their mean, the layers with skips."""
    nodes = torch.cat([model.passage_nodes(TokenBatch(torch.tensor([p]), torch.ones(1, len(p), dtype=torch.long)))
                       for p in passage_ids])  # (n, node_dim), each passage encoded alone
    x = torch.cat([nodes.mean(0, keepdim=True), nodes])  # node 0: the document (eq. 2)
    if is_query:
        return x[0]
    edges = torch.tensor([(i, j) for i in range(len(x)) for j in range(len(x)) if i != j]).T  # all n + 1 nodes
    for t, layer in enumerate(model.layers):
        update = reference_gat(layer, x, edges)
        x = x + (update if t == len(model.layers) - 1 else F.elu(update))
    return x[0]


def test_one_passage_graphs_have_the_document_passage_edges():
    both_ways = {(0, 1), (1, 0)}
    assert {tuple(e) for e in fully_connected_edges(1).T.tolist()} == both_ways
    assert {tuple(e) for e in section_edges([4]).T.tolist()} == both_ways
    assert fully_connected_edges(0).shape == section_edges([]).shape == (2, 0)


@torch.no_grad()
def test_one_passage_document_is_a_two_node_graph_through_the_layers(model):
    one = passages(5)
    got = model(batch([one]))[0]
    assert torch.allclose(got, reference_embedding(model, one), atol=1e-5)
    # by hand: both nodes start at the passage node p, each has one neighbour (attention 1) and the same vector
    p = model.passage_nodes(TokenBatch(torch.tensor(one), torch.ones(1, 5, dtype=torch.long)))[0]
    first, second = model.layers
    h = p + F.elu(first.lin.weight @ p + first.bias)
    assert torch.allclose(got, h + second.lin.weight @ h + second.bias, atol=1e-5)
    assert not torch.allclose(got, p, atol=1e-3)  # not eq. 1 alone


@torch.no_grad()
@pytest.mark.parametrize("layer", [0, 1])
def test_one_passage_document_depends_on_each_graph_layer(model, layer):
    graphs = batch([passages(5)])
    before = model(graphs)
    model.layers[layer].lin.weight.add_(0.5)
    assert not torch.allclose(model(graphs), before, atol=1e-3)


@torch.no_grad()
def test_a_query_is_its_initial_node_whatever_the_layers(model):
    short, long = passages(4), passages(3, 6, start=20)
    graphs = batch([short, long], is_query=[True, True])
    got = model(graphs)
    nodes = model.passage_nodes(graphs.passages)
    assert torch.allclose(got[0], nodes[0], atol=1e-6)  # eq. 1: one passage
    assert torch.allclose(got[1], nodes[1:].mean(0), atol=1e-6)  # eq. 2: the initial document node
    for layer in model.layers:
        layer.lin.weight.add_(0.5)
        layer.bias.add_(0.5)
    assert torch.equal(model(graphs), got)


@torch.no_grad()
def test_a_mixed_batch_gives_each_graph_its_embedding_alone(model):
    graphs = [passages(5), passages(2, 7, 3, start=10), passages(4, start=30), passages(6, start=40),
              passages(3, 3, start=5)]
    queries = [False, False, True, False, False]
    together = model(batch(graphs, queries))
    for g, (graph, query) in enumerate(zip(graphs, queries)):
        alone = model(batch([graph], [query]))[0]
        assert torch.allclose(together[g], alone, atol=1e-5), g
        assert torch.allclose(alone, reference_embedding(model, graph, query), atol=1e-5), g
