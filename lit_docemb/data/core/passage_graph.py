"""Graph-RoBERTa's document graphs as edge lists (seed paper 000, §2.1): node 0 is the document node, nodes 1..n its
passages. Plain tensors, no model: :mod:`lit_docemb.views.graph_roberta` builds them in dataloader workers and
:class:`~lit_docemb.models.graph_document.GraphDocumentEncoder` reads them from the batch.
"""

from __future__ import annotations

import torch
from torch import Tensor


def fully_connected_edges(num_passages: int) -> Tensor:
    """(2, E) every ordered pair of distinct nodes among the document node (0) and the passages (1..n); one
    passage gives the two edges between it and the document node."""
    if num_passages < 1:
        return torch.zeros(2, 0, dtype=torch.long)
    nodes = torch.arange(num_passages + 1)
    source, target = torch.meshgrid(nodes, nodes, indexing="ij")
    keep = source != target
    return torch.stack([source[keep], target[keep]])


def section_edges(passage_sections: list[int]) -> Tensor:
    """(2, E) the section graph: passages of a section mutually connected, the document node connected with
    the first passage of each section (both directions). ``passage_sections[i]`` is passage i's section."""
    if not passage_sections:
        return torch.zeros(2, 0, dtype=torch.long)
    pairs = []
    first: dict[int, int] = {}
    for i, section in enumerate(passage_sections, start=1):
        first.setdefault(section, i)
        for j, other in enumerate(passage_sections[: i - 1], start=1):
            if other == section:
                pairs += [(i, j), (j, i)]
    for node in first.values():
        pairs += [(0, node), (node, 0)]
    return torch.tensor(pairs, dtype=torch.long).T
