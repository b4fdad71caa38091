"""GradCache: loss and every parameter gradient equal the non-cached computation, with dropout on.

The reference forwards the same sub-batches, from the same random state, keeping the whole graph, then takes
one backward through the loss; any mismatch in random-state replay (other dropout masks) or in the cached
gradient shows as a gradient difference. Checked for a flat encoder (MLP, tiny BERT) and a hierarchical one
(token ids -> chunk vectors -> LSTM over chunks -> mean), on one process and on 2 gloo processes under DDP
with InfoNCE gathering across ranks: there the step runs inside one DDP forward and its single backward, as
under Lightning, and DDP must all-reduce once per step.
"""

from __future__ import annotations

import copy
import socket
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor, nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from lit_docemb.data.core.batches import TokenBatch
from lit_docemb.data.core.tokens import split_rows_by_token_budget, split_token_batch
from lit_docemb.losses import InfoNCELoss
from lit_docemb.methods import grad_cache
from lit_docemb.methods.grad_cache import grad_cache_step
from lit_docemb.models import HFEncoder

TOLERANCE = 1e-5
WORLD = 2
DOCS_PER_RANK = 6  # each rank holds 2 views of 6 documents: 12 rows


# ---------------------------------------------------------------- toy encoders and batches


class MLPEncoder(nn.Module):
    """Flat: (N, 16) features -> (N, 8), dropout in two places."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.3), nn.Linear(32, 8), nn.Dropout(0.1))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class ChunkLSTMEncoder(nn.Module):
    """Hierarchical: token ids (N, C, T) -> chunk vectors (N, C, D) -> LSTM over chunks -> masked mean (N, D)."""

    def __init__(self, vocab: int = 50, dim: int = 8) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.chunk = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Dropout(0.2))
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.dropout = nn.Dropout(0.2)

    def forward(self, ids: Tensor, chunk_mask: Tensor) -> Tensor:
        tokens = self.dropout(self.embedding(ids))  # (N, C, T, D)
        chunks = self.chunk(tokens.mean(2))  # (N, C, D)
        states, _ = self.lstm(chunks)  # (N, C, D)
        mask = chunk_mask.unsqueeze(-1).to(states.dtype)  # (N, C, 1)
        return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # (N, D)


def mlp_case(rank: int = 0):
    """Encoder, sub-batches (rows split by count: 5 + 5 + 2), their row indices, and an encode function."""
    torch.manual_seed(0)
    encoder = MLPEncoder().double()
    gen = torch.Generator().manual_seed(1 + rank)
    docs = torch.randn(DOCS_PER_RANK, 16, generator=gen, dtype=torch.float64)
    rows = torch.cat([docs, docs + 0.3 * torch.randn(docs.shape, generator=gen, dtype=torch.float64)])  # (2B, 16)
    index = [torch.arange(0, 5), torch.arange(5, 10), torch.arange(10, 12)]
    return encoder, [rows[i] for i in index], index, lambda module, x: module(x)


def hierarchical_case(rank: int = 0):
    """Documents of 1-4 chunks of 6 tokens; sub-batches by a token budget of 48 (chunks x tokens), sorted."""
    torch.manual_seed(0)
    encoder = ChunkLSTMEncoder().double()
    gen = torch.Generator().manual_seed(11 + rank)
    num_rows, max_chunks = 2 * DOCS_PER_RANK, 4
    ids = torch.randint(1, 50, (num_rows, max_chunks, 6), generator=gen)  # (2B, C, T)
    chunks = torch.randint(1, max_chunks + 1, (num_rows,), generator=gen)  # (2B,)
    chunk_mask = torch.arange(max_chunks)[None, :] < chunks[:, None]  # (2B, C)
    index = split_rows_by_token_budget(chunks * 6, token_budget=48, sort_by_length=True)
    assert len(index) > 2
    subs = [(ids[i][:, : int(chunks[i].max())], chunk_mask[i][:, : int(chunks[i].max())]) for i in index]
    return encoder, subs, index, lambda module, sub: module(*sub)


def info_nce(embeddings: Tensor) -> Tensor:
    """Rows 0..B-1 are first views, B..2B-1 second views; gathers across ranks when a group exists."""
    half = embeddings.shape[0] // 2
    return InfoNCELoss(temperature=0.1)(embeddings[:half], embeddings[half:])["info_nce_loss"]


def info_nce_terms(embeddings: Tensor) -> dict[str, Tensor]:
    return {"info_nce_loss": info_nce(embeddings)}


def reference(encoder, subs, index, encode, loss_fn=info_nce) -> tuple[Tensor, list[Tensor]]:
    """Non-cached: every sub-batch forwarded with its graph kept, one backward through the loss."""
    embeddings = torch.cat([encode(encoder, sub) for sub in subs])[torch.argsort(torch.cat(index))]
    loss = loss_fn(embeddings)
    loss.backward()
    return loss.detach(), grads_of(encoder)


def cached(encoder, subs, index, encode, **kwargs) -> tuple[Tensor, list[Tensor]]:
    out = grad_cache_step(subs, lambda sub: encode(encoder, sub), info_nce_terms, list(encoder.parameters()),
                          rows=index, **kwargs)
    out.backward_loss.backward()
    return out.loss, grads_of(encoder)


class CachedStep(nn.Module):
    """A whole GradCache step as one module forward, as Lightning's DDP wrapper runs ``training_step``."""

    def __init__(self, encoder: nn.Module, encode) -> None:
        super().__init__()
        self.encoder = encoder
        self.encode = encode

    def forward(self, subs, index) -> tuple[Tensor, Tensor]:
        out = grad_cache_step(subs, lambda sub: self.encode(self.encoder, sub), info_nce_terms,
                              list(self.encoder.parameters()), rows=index)
        return out.backward_loss, out.loss


def grads_of(encoder: nn.Module) -> list[Tensor]:
    """Gradients of the parameters that take part in the embeddings (BERT's pooler does not: mean pooling)."""
    return [p.grad.clone() for name, p in encoder.named_parameters() if "pooler" not in name]


def max_diff(grads: list[Tensor], ref_grads: list[Tensor]) -> float:
    return max((g - r).abs().max().item() for g, r in zip(grads, ref_grads))


# ---------------------------------------------------------------- token-budget split


def test_split_respects_the_budget_and_covers_every_row_once():
    lengths = torch.tensor([5, 1, 9, 3, 3, 20, 2, 7])
    for sort in (False, True):
        groups = split_rows_by_token_budget(lengths, token_budget=10, sort_by_length=sort)
        assert sorted(torch.cat(groups).tolist()) == list(range(len(lengths)))
        for g in groups:
            assert len(g) * int(lengths[g].max()) <= 10 or len(g) == 1  # row 5 (20 tokens) alone
        if not sort:
            assert torch.equal(torch.cat(groups), torch.arange(len(lengths)))
    assert [g.tolist() for g in split_rows_by_token_budget(lengths, 10)] == [[0, 1], [2], [3, 4], [5], [6], [7]]
    assert [g.tolist() for g in split_rows_by_token_budget(lengths, 10, sort_by_length=True)] == [
        [5], [2], [7], [0, 3], [4, 6, 1]]  # longest first, greedy: 2 x 5 and 3 x 3 tokens fit in 10
    assert [g.tolist() for g in split_rows_by_token_budget(torch.zeros(0), 10)] == [[]]


def test_split_token_batch_trims_padding_and_keeps_tokens():
    mask = (torch.arange(12)[None, :] < torch.tensor([[12], [2], [3], [7], [1]])).long()  # (5, 12)
    tokens = TokenBatch(torch.randint(5, 100, (5, 12)) * mask, mask)
    parts, rows = split_token_batch(tokens, token_budget=12, sort_by_length=True)
    assert [p.input_ids.shape for p in parts] == [(1, 12), (1, 7), (3, 3)]
    for part, index in zip(parts, rows):
        width = part.input_ids.shape[1]
        assert torch.equal(part.input_ids, tokens.input_ids[index, :width])
        assert tokens.attention_mask[index, width:].sum() == 0  # only padding was cut
        assert part.input_ids.numel() <= 12 or len(index) == 1


# ---------------------------------------------------------------- one process


@pytest.mark.parametrize("keep_up_to", [0, 100], ids=["re-encode-all", "keep-last-graph"])
@pytest.mark.parametrize("in_place", [False, True], ids=["buffer", "in-place"])
@pytest.mark.parametrize("make_case", [mlp_case, hierarchical_case], ids=["flat-mlp", "hierarchical"])
def test_matches_non_cached_with_dropout(make_case, in_place, keep_up_to, monkeypatch):
    """Both ways of treating the last sub-batch: encoded again, or its first graph kept (small batches)."""
    monkeypatch.setattr(grad_cache, "KEEP_LAST_GRAPH_UP_TO", keep_up_to)
    encoder, subs, index, encode = make_case()
    assert len(subs) > 1
    ref_encoder = copy.deepcopy(encoder)
    torch.manual_seed(123)
    ref_loss, ref_grads = reference(ref_encoder, subs, index, encode)
    torch.manual_seed(123)
    loss, grads = cached(encoder, subs, index, encode, accumulate_in_place=in_place)
    assert abs(loss.item() - ref_loss.item()) <= TOLERANCE
    assert max_diff(grads, ref_grads) <= TOLERANCE
    assert all(g.abs().sum() > 0 for g in grads)  # every parameter got a gradient


@pytest.mark.parametrize("in_place", [False, True], ids=["buffer", "in-place"])
def test_gradients_already_accumulated_are_kept_once(in_place):
    """Under gradient accumulation .grad holds earlier micro-batches when the step runs: they must end up
    there once, with this batch's gradient added."""
    encoder, subs, index, encode = mlp_case()
    ref_encoder = copy.deepcopy(encoder)
    earlier = [torch.full_like(p, 0.5) for p in encoder.parameters()]
    for p, g in zip(encoder.parameters(), earlier):
        p.grad = g.clone()
    torch.manual_seed(7)
    _, ref_grads = reference(ref_encoder, subs, index, encode)
    torch.manual_seed(7)
    _, grads = cached(encoder, subs, index, encode, accumulate_in_place=in_place)
    assert max_diff(grads, [r + e for r, e in zip(ref_grads, earlier)]) <= TOLERANCE


@pytest.mark.parametrize("keep_up_to", [0, 100], ids=["re-encode-all", "keep-last-graph"])
@pytest.mark.parametrize("in_place", [False, True], ids=["buffer", "in-place"])
@pytest.mark.parametrize("frozen", [False, True], ids=["trained-encoder", "frozen-encoder"])
def test_a_loss_with_its_own_weights_gets_their_gradient(in_place, keep_up_to, frozen, monkeypatch):
    """A classifier's head is the loss's own: its gradient comes from the loss's one differentiation (dropout
    in it drawn once), added to what reaches the encoder; a frozen encoder is not encoded again."""
    monkeypatch.setattr(grad_cache, "KEEP_LAST_GRAPH_UP_TO", keep_up_to)
    encoder, subs, index, encode = mlp_case()
    encoder.requires_grad_(not frozen)
    head = nn.Sequential(nn.Dropout(0.2), nn.Linear(8, 3)).double()
    targets = torch.arange(12) % 3

    def head_loss(embeddings: Tensor) -> Tensor:
        return nn.functional.cross_entropy(head(embeddings), targets)

    ref_encoder, ref_head = copy.deepcopy(encoder), copy.deepcopy(head)
    torch.manual_seed(3)
    ref_embeddings = torch.cat([encode(ref_encoder, sub) for sub in subs])[torch.argsort(torch.cat(index))]
    nn.functional.cross_entropy(ref_head(ref_embeddings), targets).backward()
    calls = []
    torch.manual_seed(3)
    out = grad_cache_step(subs, lambda sub: calls.append(1) or encode(encoder, sub),
                          lambda embeddings: {"ce_loss": head_loss(embeddings)},
                          [p for p in [*encoder.parameters(), *head.parameters()] if p.requires_grad], rows=index,
                          accumulate_in_place=in_place)
    out.backward_loss.backward()
    modules = [(head, ref_head)] if frozen else [(head, ref_head), (encoder, ref_encoder)]
    for module, ref_module in modules:
        assert max_diff([p.grad for p in module.parameters()], [p.grad for p in ref_module.parameters()]) <= TOLERANCE
    assert frozen == all(p.grad is None for p in encoder.parameters())
    assert len(calls) == len(subs) + (0 if frozen else len(subs) - (keep_up_to > 0)) + (frozen and not keep_up_to)


@pytest.mark.parametrize("make_case", [mlp_case, hierarchical_case], ids=["flat-mlp", "hierarchical"])
def test_without_random_state_replay_the_gradient_is_wrong(make_case):
    """The check above can fail: re-encoding with fresh dropout masks gives another gradient."""
    encoder, subs, index, encode = make_case()
    ref_encoder = copy.deepcopy(encoder)
    torch.manual_seed(123)
    ref_loss, ref_grads = reference(ref_encoder, subs, index, encode)
    torch.manual_seed(123)
    loss, grads = cached(encoder, subs, index, encode, replay_random_state=False)
    assert abs(loss.item() - ref_loss.item()) <= TOLERANCE  # the loss comes from the first, no-grad pass
    assert max_diff(grads, ref_grads) > 1e-3


@pytest.mark.parametrize("make_case", [mlp_case, hierarchical_case], ids=["flat-mlp", "hierarchical"])
def test_one_sub_batch_takes_the_plain_path_with_the_same_result(make_case):
    encoder, subs, index, encode = make_case()
    whole = torch.cat(index)
    if isinstance(subs[0], tuple):  # hierarchical: pad every sub-batch to the longest, then stack
        width = max(s[0].shape[1] for s in subs)
        pad = lambda x: torch.nn.functional.pad(x, (0, 0, 0, width - x.shape[1]) if x.ndim == 3 else  # noqa: E731
                                                (0, width - x.shape[1]))
        one = (torch.cat([pad(s[0]) for s in subs]), torch.cat([pad(s[1]) for s in subs]))
    else:
        one = torch.cat(subs)
    ref_encoder = copy.deepcopy(encoder)
    ref_encoder.eval(), encoder.eval()  # no dropout: the plain path draws its masks in another order
    ref_loss, ref_grads = reference(ref_encoder, [one], [whole], encode)
    loss, grads = cached(encoder, [one], [whole], encode)
    assert abs(loss.item() - ref_loss.item()) <= TOLERANCE and max_diff(grads, ref_grads) <= TOLERANCE


def test_low_precision_embeddings_reach_the_loss_and_surrogate_in_fp32():
    encoder = MLPEncoder().bfloat16()
    seen = []

    def loss_fn(embeddings: Tensor) -> dict[str, Tensor]:
        seen.append(embeddings.dtype)
        return info_nce_terms(embeddings)

    subs = list(torch.randn(8, 16, dtype=torch.bfloat16).split(3))
    out = grad_cache_step(subs, encoder, loss_fn, list(encoder.parameters()))
    out.backward_loss.backward()
    assert seen == [torch.float32] and out.loss.dtype == torch.float32
    assert all(p.grad is not None and p.grad.dtype == torch.bfloat16 for p in encoder.parameters())


def test_tiny_bert_with_token_budget(tiny_encoder_dir):
    torch.manual_seed(0)
    encoder = HFEncoder(tiny_encoder_dir, pooling="mean")
    assert encoder.training  # dropout on
    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([40, 5, 12, 33, 8, 21, 17, 3])  # 4 documents, 2 views each
    mask = (torch.arange(40)[None, :] < lengths[:, None]).long()  # (8, 40)
    tokens = TokenBatch(torch.randint(5, 1000, (8, 40), generator=gen) * mask, mask)
    subs, index = split_token_batch(tokens, token_budget=64, sort_by_length=True)
    assert 2 < len(subs) < 8
    encode = lambda module, sub: module(sub.input_ids, sub.attention_mask)  # noqa: E731
    ref_encoder = copy.deepcopy(encoder)
    torch.manual_seed(5)
    ref_loss, ref_grads = reference(ref_encoder, subs, index, encode)
    torch.manual_seed(5)
    loss, grads = cached(encoder, subs, index, encode)
    assert abs(loss.item() - ref_loss.item()) <= TOLERANCE
    assert max_diff(grads, ref_grads) <= TOLERANCE
    wrong_encoder = copy.deepcopy(ref_encoder)
    wrong_encoder.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    _, wrong = cached(wrong_encoder, subs, index, encode, replay_random_state=False)
    assert max_diff(wrong, ref_grads) > 1e-4  # so the replay is what makes the first check pass


# ---------------------------------------------------------------- two processes (gloo, DDP, gather)


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD, timeout=timedelta(seconds=60)
    )
    result = {}
    try:
        for name, make_case in [("flat-mlp", mlp_case), ("hierarchical", hierarchical_case)]:
            encoder, subs, index, encode = make_case(rank)
            ref_encoder = copy.deepcopy(encoder)
            torch.manual_seed(100 + rank)  # dropout masks differ between ranks, as in real training
            ref_loss, ref_grads = reference(ref_encoder, subs, index, encode)
            for g in ref_grads:  # what DDP does: average over ranks
                dist.all_reduce(g)
                g /= WORLD
            ddp = DistributedDataParallel(CachedStep(encoder, encode))
            syncs = []
            ddp.register_comm_hook(None, lambda state, bucket: syncs.append(1) or allreduce_hook(state, bucket))
            torch.manual_seed(100 + rank)
            backward_loss, loss = ddp(subs, index)
            backward_loss.backward()
            grads = grads_of(encoder)
            result[name] = {"ref_loss": ref_loss, "ref_grads": ref_grads, "loss": loss, "grads": grads,
                            "syncs": len(syncs), "sub_batches": len(subs)}
            # DDP's reducer holds the process group: freeing it while the other rank is gone can hang in gloo's
            # destructor, so it goes now, while both ranks are alive, and the ranks meet before the group ends
            del ddp
        dist.barrier()
    finally:
        dist.destroy_process_group()
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("grad_cache_two_process")
    mp.spawn(_worker, args=(_free_port(), str(out_dir)), nprocs=WORLD, join=True)
    return [torch.load(out_dir / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.parametrize("case", ["flat-mlp", "hierarchical"])
def test_two_processes_match_non_cached(two_process_results, case):
    for res in (r[case] for r in two_process_results):
        assert abs(res["loss"].item() - res["ref_loss"].item()) <= TOLERANCE
        assert max_diff(res["grads"], res["ref_grads"]) <= TOLERANCE
        assert res["sub_batches"] > 2 and res["syncs"] == 1  # DDP all-reduced once per step, not per sub-batch
    rank0, rank1 = (r[case]["grads"] for r in two_process_results)
    assert max_diff(rank0, rank1) == 0.0  # DDP synchronised the gradients
    losses = [r[case]["loss"].item() for r in two_process_results]
    assert losses[0] != losses[1]  # each rank scores its own anchors against the gathered candidates
