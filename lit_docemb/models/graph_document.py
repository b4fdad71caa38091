"""Graph-RoBERTa's document model (seed paper 000, §2.1): a graph attention network over passage nodes.

Each passage is encoded by a Hugging Face encoder; its [CLS] vector through ``tanh(W x + b)`` is the passage
node (eq. 1); the document node starts as the mean of its passage nodes (eq. 2); T graph attention layers
(Veličković et al. 2017, torch-geometric's ``GATConv``) with skip connections update all nodes (eq. 3); the
final document node is the document embedding. Every document is a graph of n + 1 nodes (§2.1), n = 1
included: a one-passage document is its document node (equal to its passage node, eq. 2) and its passage,
connected both ways, through the T layers. Only a query is a single-node graph (§3.3: "its initial node
representation"), marked by the batch's ``is_query``: it is not passed through the layers and its embedding is
its initial document node, the mean of its passage nodes (eq. 2), which for the usual one-passage query is its
passage node (eq. 1). A longer query keeping all its passages in one initial node is our reading; the paper's
queries are short.

Readings where the paper is silent: each layer is ``v <- v + ELU(GAT(v))`` (the skip connection; no ELU
after the last layer) and heads are concatenated (2 heads of 256 give 512). A node attends to its neighbours
only, as the paper's graph library does (DGL, its footnote 2: DGL's ``GATConv`` adds no self-loops; PyG's would
by default): the skip connection carries the node's own vector.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.data.core.batches import PassageGraphBatch, TokenBatch
from lit_docemb.data.core.tokens import split_token_batch
from lit_docemb.models.encoder import HFEncoder

HeadInit = Literal["random", "identity"]


class GraphDocumentEncoder(nn.Module):
    """Passages -> passage nodes -> document graph -> document embedding.

    Args:
        encoder: Passage encoder (its ``cls`` pooling is the paper's; any pooling works).
        node_dim: Size of passage and document nodes (paper: 512).
        num_layers: Graph attention layers T (paper: 2).
        num_heads: Attention heads per layer (paper: 2); must divide ``node_dim``.
        attention_dropout: Dropout on the attention coefficients.
        passage_token_budget: Passages are encoded in sub-batches of at most this many padded tokens.
        bucket_by_length: Form those sub-batches from the passages of all documents sorted by length (each
            sub-batch padded to its own longest passage), instead of in document order: far less padding when
            passage lengths vary (every section's last passage is short). Each passage's vector is the same
            either way (up to float rounding); only the order the encoder sees them in differs.
        head_init: ``"random"``: the paper's eq. 1 (``tanh(W x + b)``, W and the graph layers at their default
            random initialisation). ``"identity"``: the document vector at initialisation is the mean of the
            encoder's passage vectors, so that step 0 scores what the pretrained encoder scores -- the
            projection is the identity (padded with zero rows when ``node_dim`` exceeds the encoder's size, a
            semi-orthogonal map that keeps every dot product), the passage node drops the ``tanh``, and each
            graph layer's weights and bias start at zero, so its update is zero until training moves it (the
            zero-initialised residual branch of ReZero, Bachlechner et al. 2021, and ControlNet's zero
            convolutions, Zhang et al. 2023). Needs ``node_dim >= encoder.hidden_size``.
    """

    def __init__(self, encoder: HFEncoder, node_dim: int = 512, num_layers: int = 2, num_heads: int = 2,
                 attention_dropout: float = 0.1, passage_token_budget: int = 32768,
                 bucket_by_length: bool = True, head_init: HeadInit = "random") -> None:
        super().__init__()
        if node_dim % num_heads:
            raise ValueError(f"node_dim={node_dim} must be divisible by num_heads={num_heads}")
        if head_init not in ("random", "identity"):
            raise ValueError(f"head_init must be 'random' or 'identity', got {head_init!r}")
        if head_init == "identity" and node_dim < encoder.hidden_size:
            raise ValueError(f"head_init 'identity' needs node_dim >= the encoder's hidden size "
                             f"{encoder.hidden_size}, got {node_dim}")
        from torch_geometric.nn import GATConv  # here: the package imports without torch-geometric

        self.encoder = encoder
        self.project = nn.Linear(encoder.hidden_size, node_dim)
        self.layers = nn.ModuleList(GATConv(node_dim, node_dim // num_heads, heads=num_heads,
                                            dropout=attention_dropout, add_self_loops=False)
                                    for _ in range(num_layers))
        self.passage_token_budget = passage_token_budget
        self.bucket_by_length = bucket_by_length
        self.node_dim = node_dim
        self.head_init = head_init
        if head_init == "identity":
            self._identity_initialisation()

    @torch.no_grad()
    def _identity_initialisation(self) -> None:
        """The projection as ``[I; 0]`` and every graph layer's weights and bias at zero (see ``head_init``)."""
        self.project.weight.zero_()
        self.project.weight[:, :self.encoder.hidden_size].fill_diagonal_(1.0)  # (node_dim, hidden): [I; 0]
        self.project.bias.zero_()
        for layer in self.layers:
            for name, parameter in layer.named_parameters():
                if not name.startswith("att_"):  # attention vectors stay random: they act once lin moves
                    parameter.zero_()

    def passage_nodes(self, passages: TokenBatch) -> Tensor:
        """Eq. 1: (P, T) passage tokens -> (P, node_dim) initial passage nodes (without the ``tanh`` under
        ``head_init="identity"``)."""
        parts, rows = split_token_batch(passages, self.passage_token_budget, sort_by_length=self.bucket_by_length)
        cls = torch.cat([self.encoder(p.input_ids, p.attention_mask) for p in parts])  # (P, H), sub-batch order
        if self.bucket_by_length:
            cls = cls[torch.argsort(torch.cat(rows)).to(cls.device)]  # back to passage order
        projected = self.project(cls)
        return projected if self.head_init == "identity" else torch.tanh(projected)

    def forward(self, graphs: PassageGraphBatch, return_attention: bool = False):
        """(G, node_dim) document embeddings; with ``return_attention`` also the last layer's attention as
        ``(edge_index (2, E'), weights (E', heads))`` over the batch's nodes (see :meth:`node_layout`)."""
        passages = self.passage_nodes(graphs.passages)  # (P, Dn)
        counts = graphs.passage_counts.to(passages.device)
        graph_of_passage = torch.repeat_interleave(torch.arange(len(counts), device=passages.device), counts)
        document = torch.zeros(len(counts), passages.shape[1], dtype=passages.dtype, device=passages.device)
        document = document.index_add(0, graph_of_passage, passages) / counts.clamp(min=1)[:, None]  # eq. 2
        doc_nodes, passage_positions = self.node_layout(counts)
        nodes = passages.new_zeros(len(counts) + len(passages), passages.shape[1])
        nodes = nodes.index_copy(0, doc_nodes, document).index_copy(0, passage_positions, passages)
        edge_index = torch.cat([e.to(passages.device) + doc_nodes[g] for g, e in enumerate(graphs.edges)]
                               + [torch.zeros(2, 0, dtype=torch.long, device=passages.device)], dim=1)
        attention = None
        for t, layer in enumerate(self.layers):  # eq. 3 with skip connections
            last = t == len(self.layers) - 1
            if last and return_attention:
                update, attention = layer(nodes, edge_index, return_attention_weights=True)
            else:
                update = layer(nodes, edge_index)
            nodes = nodes + (update if last else F.elu(update))
        if graphs.is_query is None:
            out = nodes[doc_nodes]
        else:  # a query is a single node: its initial representation (§3.3)
            out = torch.where(graphs.is_query.to(passages.device)[:, None], document, nodes[doc_nodes])
        return (out, attention) if return_attention else out

    def attention_maps(self, graphs: PassageGraphBatch) -> tuple[Tensor, list[Tensor]]:
        """Document embeddings (G, node_dim) and, per document, the last graph layer's attention as a
        (heads, n+1, n+1) matrix: row i holds how node i weighs each node j (0 the document node, 1..n the
        passages; zero where there is no edge; each row of a node with neighbours sums to 1)."""
        out, (edge_index, weights) = self(graphs, return_attention=True)
        counts = graphs.passage_counts.to(out.device)
        doc_nodes, _ = self.node_layout(counts)
        total = int(doc_nodes[-1] + counts[-1] + 1) if len(counts) else 0
        dense = weights.new_zeros(weights.shape[1], total, total)  # (heads, N, N)
        dense[:, edge_index[1], edge_index[0]] = weights.T  # GATConv: edge (j -> i) weighs j for target i
        maps = [dense[:, start:start + n + 1, start:start + n + 1] for start, n in zip(doc_nodes.tolist(),
                                                                                   counts.tolist())]
        return out, maps

    @staticmethod
    def node_layout(counts: Tensor) -> tuple[Tensor, Tensor]:
        """Positions in the batch's node list: (G,) of each document node, (P,) of each passage node. Graph g
        occupies ``1 + counts[g]`` consecutive nodes, its document node first."""
        sizes = counts + 1
        doc_nodes = torch.cumsum(sizes, 0) - sizes  # (G,)
        within = torch.arange(int(counts.sum()), device=counts.device) - torch.repeat_interleave(
            torch.cumsum(counts, 0) - counts, counts)  # (P,) 0..n_g-1 inside each graph
        return doc_nodes, torch.repeat_interleave(doc_nodes, counts) + 1 + within
