"""Graph-RoBERTa's views (seed paper 000): passage graphs of documents and of their sub-documents, built in
dataloader workers."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from lit_docemb.data.core.batches import (
    GraphDocumentBatch,
    PassageGraphBatch,
    SubDocumentPairBatch,
    TokenBatch,
)
from lit_docemb.data.core.document import Document, Query, doc_index
from lit_docemb.data.caches.passage_cache import tokenize_passages
from lit_docemb.data.core.passage_graph import fully_connected_edges, section_edges
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.core.tokens import frame_token_ids, pad_ids, take_rows

Objective = Literal["halves", "one_passage"]


def split_passages(num_passages: int, rng: random.Random, objective: Objective) -> tuple[list[int], list[int]]:
    """Passage indices of the two sub-documents: disjoint, together all of ``range(num_passages)`` (>= 2)."""
    if objective == "halves":
        order = list(range(num_passages))
        rng.shuffle(order)
        half = num_passages // 2
        return sorted(order[:half]), sorted(order[half:])
    chosen = 0 if rng.random() < 0.5 else rng.randrange(num_passages)
    return [chosen], [i for i in range(num_passages) if i != chosen]


@dataclass
class TokenPassage:
    """A passage as its token ids (special tokens included) and the index of its section."""

    ids: list[int]
    section: int


class PassageGraphBuilder:
    """Documents -> passages as token ids -> :class:`PassageGraphBatch` with the edges of the passage spec's graph.

    Items are :class:`~lit_docemb.data.core.document.Document` (split and tokenized here) or
    :class:`~lit_docemb.data.caches.passage_cache.TokenizedPassages` (the DataModule's passage cache: split and
    tokenized once, with the same :class:`~lit_docemb.data.core.passage_spec.PassageSpec`); both go through
    :func:`~lit_docemb.data.caches.passage_cache.tokenize_passages`, so both give the same ids. A passage left without a
    token besides the special ones (its words were control characters that the tokenizer drops) is left out; a
    document without any other passage keeps one (possibly empty: a document's title, a cached row's nothing),
    so it still has a node to embed, and training skips it with the documents of fewer than two passages.
    """

    def __init__(self, tokenizer, passages: PassageSpec) -> None:
        self.tokenizer = tokenizer
        self.spec = PassageSpec.of(passages)

    def passages(self, items: list, max_passages: int) -> list[list[TokenPassage]]:
        fresh = iter(tokenize_passages([item for item in items if isinstance(item, Document)], self.tokenizer,
                                       self.spec, max_passages))
        rows = [next(fresh) if isinstance(item, Document) else item for item in items]
        # a document without passages keeps one node: its title (a cached row has none, so nothing)
        titles = [getattr(item, "title", "") for item, row in zip(items, rows, strict=True)
                    if not min(len(row), max_passages)]
        fallback = iter(self.tokenizer(titles, truncation=True, max_length=self.spec.max_passage_tokens)["input_ids"]
                        if titles else [])
        frame = frame_token_ids(self.tokenizer)
        out = []
        for row in rows:
            graph = [TokenPassage(row.passage(i).tolist(), int(row.section_index[i]))
                     for i in range(min(len(row), max_passages))] or [TokenPassage(next(fallback), 0)]
            # words of control characters leave no token: such a passage is no node (a document keeps one)
            out.append([p for p in graph if not frame.issuperset(p.ids)] or graph[:1])
        return out

    def edges(self, passages: list[TokenPassage]) -> Tensor:
        if self.spec.graph == "full":
            return fully_connected_edges(len(passages))
        return section_edges([p.section for p in passages])

    def __call__(self, graphs: list[list[TokenPassage]], is_query: list[bool] | None = None) -> PassageGraphBatch:
        """The graphs as a batch; ``is_query[g]`` makes graph g a query: a single node, without edges (§3.3)."""
        passages = pad_ids([p.ids for g in graphs for p in g], self.tokenizer.pad_token_id or 0)  # (P, T)
        counts = torch.tensor([len(g) for g in graphs], dtype=torch.long)
        queries = [False] * len(graphs) if is_query is None else is_query
        edges = [torch.zeros(2, 0, dtype=torch.long) if query else self.edges(g) for g, query in zip(graphs, queries,
                                                                                                      strict=True)]
        return PassageGraphBatch(passages, counts, edges, torch.tensor(queries, dtype=torch.bool))


class SubDocumentCollator:
    """Documents (or their cached passages) -> :class:`SubDocumentPairBatch` (runs in dataloader workers). In
    training a fresh split is drawn from torch's RNG (seeded per batch by the training loader, see
    ``lit_docemb/data/core/sampling.py``); in validation it follows the id."""

    def __init__(self, builder: PassageGraphBuilder, max_passages: int, objective: Objective,
                 deterministic: bool) -> None:
        self.builder = builder
        self.max_passages = max_passages
        self.objective = objective
        self.deterministic = deterministic

    def __call__(self, items: list) -> SubDocumentPairBatch:
        seed = None if self.deterministic else int(torch.randint(2**62, (1,)))
        views_a, views_b, kept = [], [], []
        for item, passages in zip(items, self.builder.passages(items, self.max_passages)):
            if len(passages) < 2:
                continue
            rng = random.Random(item.id if seed is None else f"{seed}:{item.id}")
            a, b = split_passages(len(passages), rng, self.objective)
            views_a.append([passages[i] for i in a])
            views_b.append([passages[i] for i in b])
            kept.append(item.id)
        ids = torch.tensor([doc_index(i) for i in kept], dtype=torch.long)
        # §3.3: the one passage is the pseudo-query (ICT), a single node; the halves are documents, one passage or more
        first = self.builder(views_a, [self.objective == "one_passage"] * len(views_a))
        return SubDocumentPairBatch(first, self.builder(views_b), ids, len(items) - len(kept))


class GraphDocumentCollator:
    """Documents (or their cached passages) -> :class:`GraphDocumentBatch` (up to ``max_passages`` each); a
    :class:`~lit_docemb.data.core.document.Query` among them is a query graph (a single node, §3.3)."""

    def __init__(self, builder: PassageGraphBuilder, max_passages: int) -> None:
        self.builder = builder
        self.max_passages = max_passages

    def __call__(self, items: list) -> GraphDocumentBatch:
        return GraphDocumentBatch(self.builder(self.builder.passages(items, self.max_passages),
                                               [isinstance(item, Query) for item in items]),
                                  [item.id for item in items])


def concat_graphs(first: PassageGraphBatch, second: PassageGraphBatch) -> PassageGraphBatch:
    """The graphs of ``first`` then those of ``second``, passages padded to a common length."""
    width = max(first.passages.input_ids.shape[1], second.passages.input_ids.shape[1])
    pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[1]))  # noqa: E731
    tokens = TokenBatch(torch.cat([pad(first.passages.input_ids), pad(second.passages.input_ids)]),
                        torch.cat([pad(first.passages.attention_mask), pad(second.passages.attention_mask)]))
    return PassageGraphBatch(tokens, torch.cat([first.passage_counts, second.passage_counts]),
                             first.edges + second.edges, torch.cat([query_mask(first), query_mask(second)]))


def query_mask(graphs: PassageGraphBatch) -> Tensor:
    """(G,) bool: which graphs are queries (none when the batch does not say)."""
    if graphs.is_query is None:
        return torch.zeros(len(graphs), dtype=torch.bool, device=graphs.passage_counts.device)
    return graphs.is_query


def select_graphs(graphs: PassageGraphBatch, index: Tensor) -> PassageGraphBatch:
    """Graphs ``index`` of a batch, in that order, their passages trimmed to the longest among them."""
    counts = graphs.passage_counts.cpu()
    starts = torch.cumsum(counts, 0) - counts
    rows = [torch.arange(int(starts[g]), int(starts[g] + counts[g])) for g in index.tolist()]
    passage_rows = torch.cat(rows) if rows else torch.zeros(0, dtype=torch.long)
    return PassageGraphBatch(take_rows(graphs.passages, passage_rows),
                             graphs.passage_counts[index.to(graphs.passage_counts.device)],
                             [graphs.edges[g] for g in index.tolist()],
                             None if graphs.is_query is None else graphs.is_query[index.to(graphs.is_query.device)])
