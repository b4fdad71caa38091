"""InfoNCELoss against a plain reference (one process) and the gathered loss on 2 gloo processes."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import Tensor, nn
from two_process import init_gloo, save_result, spawn

from lit_docemb import distributed as dist_utils
from lit_docemb.losses import InfoNCELoss

# ---------------------------------------------------------------- plain reference


def naive_direction(queries, keys, query_ids, key_ids, temperature, similarity) -> Tensor:
    """Mean over queries of -log softmax(score of its positive); query i's positive is key i."""
    losses = []
    for i in range(len(queries)):
        scores = []
        for j in range(len(keys)):
            if query_ids is not None and j != i and query_ids[i] == key_ids[j]:
                continue  # same document: not a negative
            score = (queries[i] * keys[j]).sum()
            if similarity == "cos":
                score = score / (queries[i].norm() * keys[j].norm())
            scores.append(score / temperature)
            if j == i:
                positive = len(scores) - 1
        scores = torch.stack(scores)
        top = scores.max()
        log_softmax = scores - top - torch.log(torch.exp(scores - top).sum())
        losses.append(-log_softmax[positive])
    return torch.stack(losses).mean()


def naive_info_nce(anchors, candidates, anchor_ids, candidate_ids, temperature, similarity, symmetric):
    """Global reference: candidates are the B positives first, then hard negatives."""
    loss = naive_direction(anchors, candidates, anchor_ids, candidate_ids, temperature, similarity)
    if symmetric:
        num = len(anchors)
        pos_ids = None if candidate_ids is None else candidate_ids[:num]
        reverse = naive_direction(candidates[:num], anchors, pos_ids, anchor_ids, temperature, similarity)
        loss = (loss + reverse) / 2
    return loss


# ---------------------------------------------------------------- one process


@pytest.mark.parametrize("similarity,temperature", [("cos", 0.05), ("dot", 1.0)])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("hard_negatives", [0, 2])
@pytest.mark.parametrize("with_ids", [False, True])
def test_matches_naive_reference(similarity, temperature, symmetric, hard_negatives, with_ids):
    gen = torch.Generator().manual_seed(0)
    num, dim = 5, 7
    anchors = torch.randn(num, dim, generator=gen, dtype=torch.float64, requires_grad=True)
    candidates = torch.randn(num * (1 + hard_negatives), dim, generator=gen, dtype=torch.float64, requires_grad=True)
    anchor_ids = candidate_ids = None
    if with_ids:  # document 3 twice among anchors (alike views), a hard negative from document 1
        with torch.no_grad():
            anchors[2] = anchors[0] + 0.1 * anchors[2]
            candidates[2] = candidates[0] + 0.1 * candidates[2]
            candidates[0] = anchors[0] + 0.3 * candidates[0]
        anchor_ids = torch.tensor([3, 1, 3, 4, 5])
        candidate_ids = torch.cat([anchor_ids, 100 + torch.arange(num * hard_negatives)])
        if hard_negatives:
            candidate_ids[num + 2] = 1
    loss_fn = InfoNCELoss(temperature, similarity, symmetric)

    loss = loss_fn(anchors, candidates, anchor_ids, candidate_ids)["info_nce_loss"]
    grads = torch.autograd.grad(loss, [anchors, candidates])
    ref = naive_info_nce(anchors, candidates, anchor_ids, candidate_ids, temperature, similarity, symmetric)
    ref_grads = torch.autograd.grad(ref, [anchors, candidates])

    torch.testing.assert_close(loss, ref, rtol=0, atol=1e-10)
    for grad, ref_grad in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-10)
    if with_ids:  # the masking must matter, or this test proves nothing about it
        unmasked = loss_fn(anchors, candidates)["info_nce_loss"]
        assert (unmasked - loss).abs() > 1e-3


def test_low_precision_inputs_give_fp32_loss():
    anchors = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
    candidates = torch.randn(8, 8, dtype=torch.bfloat16)
    loss = InfoNCELoss(symmetric=True)(anchors, candidates)["info_nce_loss"]
    loss.backward()
    ref = InfoNCELoss(symmetric=True)(anchors.float(), candidates.float())["info_nce_loss"]
    assert loss.dtype == torch.float32 and anchors.grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss, ref, rtol=0, atol=0)


def test_ids_required_with_hard_negatives():
    with pytest.raises(ValueError, match="candidate_ids"):
        InfoNCELoss()(torch.randn(2, 4), torch.randn(4, 4), anchor_ids=torch.tensor([0, 1]))


def test_helpers_are_identity_without_process_group():
    x = torch.randn(3, 2, requires_grad=True)
    assert dist_utils.world_size() == 1 and dist_utils.rank() == 0
    assert dist_utils.gather_with_grad(x) is x
    assert dist_utils.gather_no_grad(x) is x


# ---------------------------------------------------------------- two processes

WORLD, LOCAL_BATCH, HARD_NEGATIVES, IN_DIM = 2, 3, 1, 16
# Document 10 is an anchor on both ranks; rank 1's hard negative 4 is document 11 (rank 0's anchor 1).
ANCHOR_IDS = torch.tensor([10, 11, 12, 13, 10, 14])
NEGATIVE_IDS = torch.tensor([20, 21, 22, 23, 11, 24])
CONFIGS = {
    "cos": dict(temperature=0.05, similarity="cos", symmetric=False),
    "cos-symmetric": dict(temperature=0.05, similarity="cos", symmetric=True),
    "dot": dict(temperature=0.5, similarity="dot", symmetric=False),
    "dot-symmetric": dict(temperature=1.0, similarity="dot", symmetric=True),
}
# name -> (dtype, InfoNCELoss arguments); the control gathers nothing and must NOT match.
CASES = {f"{name}-{str(dtype)[6:]}": (dtype, kwargs) for name, kwargs in CONFIGS.items()
         for dtype in (torch.float64, torch.float32)}
CASES["local-only-control"] = (torch.float64, dict(CONFIGS["cos-symmetric"], gather_across_devices=False))
UNEQUAL_CASES = {f"unequal-{name}": kwargs for name, kwargs in CONFIGS.items()}


def make_encoder() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN_DIM, 32), nn.Tanh(), nn.Linear(32, 8))


def make_inputs() -> tuple[Tensor, Tensor, Tensor]:
    """Raw features of the global batch: anchors, positives (W*B, IN), hard negatives (W*B*k, IN)."""
    gen = torch.Generator().manual_seed(1)
    num = WORLD * LOCAL_BATCH
    x_anchor, noise, x_negative = (torch.randn(n, IN_DIM, generator=gen) for n in (num, num, num * HARD_NEGATIVES))
    return x_anchor, x_anchor + 0.5 * noise, x_negative  # two views of a document are alike


def local_share(rank: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """This rank's anchors (B, IN), candidates (B*(1+k), IN) and their ids."""
    x_anchor, x_positive, x_negative = make_inputs()
    rows = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
    neg_rows = slice(rank * LOCAL_BATCH * HARD_NEGATIVES, (rank + 1) * LOCAL_BATCH * HARD_NEGATIVES)
    candidates = torch.cat([x_positive[rows], x_negative[neg_rows]])
    candidate_ids = torch.cat([ANCHOR_IDS[rows], NEGATIVE_IDS[neg_rows]])
    return x_anchor[rows], candidates, ANCHOR_IDS[rows], candidate_ids


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    losses = {name: InfoNCELoss(**kwargs) for name, (_, kwargs) in CASES.items()}  # before the process group
    result = {"before_init": (dist_utils.world_size(), dist_utils.rank())}
    init_gloo(rank, port)
    try:
        result["after_init"] = (dist_utils.world_size(), dist_utils.rank())
        x_anchor, x_candidates, anchor_ids, candidate_ids = local_share(rank)
        for name, loss_fn in losses.items():
            dtype = CASES[name][0]
            encoder = make_encoder().to(dtype)
            anchors, candidates = encoder(x_anchor.to(dtype)), encoder(x_candidates.to(dtype))
            loss = loss_fn(anchors, candidates, anchor_ids, candidate_ids)["info_nce_loss"]
            loss.backward()
            for p in encoder.parameters():  # what DDP does: average gradients over ranks
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                p.grad /= WORLD
            result[name] = (loss.detach(), [p.grad for p in encoder.parameters()])
        # unequal local batches: rank 1 lost its last document (and that document's hard negative)
        keep = slice(None) if rank == 0 else slice(0, LOCAL_BATCH - 1)
        keep_candidates = torch.cat([torch.arange(LOCAL_BATCH)[keep], LOCAL_BATCH + torch.arange(LOCAL_BATCH)[keep]])
        for name, kwargs in UNEQUAL_CASES.items():
            encoder = make_encoder().double()
            anchors = encoder(x_anchor[keep].double())
            candidates = encoder(x_candidates[keep_candidates].double())
            loss = InfoNCELoss(**kwargs)(anchors, candidates, anchor_ids[keep], candidate_ids[keep_candidates])
            loss["info_nce_loss"].backward()
            for p in encoder.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                p.grad /= WORLD
            result[name] = (loss["info_nce_loss"].detach(), [p.grad for p in encoder.parameters()])
        try:
            dist_utils.gather_with_grad(torch.zeros(3, 8 + rank))
        except ValueError as err:
            result["shape_error"] = str(err)
    finally:
        dist.destroy_process_group()
    save_result(result, out_dir, rank)


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("two_process")
    return spawn(_worker, out_dir)


def single_process_reference(kwargs: dict) -> tuple[Tensor, list[Tensor]]:
    """Plain-reference loss and gradients, in float64, on the concatenated batch (positives first) in one process."""
    x_anchor, x_positive, x_negative = make_inputs()
    encoder = make_encoder().double()
    anchors, candidates = encoder(x_anchor.double()), encoder(torch.cat([x_positive, x_negative]).double())
    ids = (ANCHOR_IDS, torch.cat([ANCHOR_IDS, NEGATIVE_IDS]))
    loss = naive_info_nce(anchors, candidates, *ids, kwargs["temperature"], kwargs["similarity"], kwargs["symmetric"])
    loss.backward()
    return loss.detach(), [p.grad for p in encoder.parameters()]


def max_abs_diffs(results: list[dict], case: str, ref_loss: Tensor, ref_grads: list[Tensor]) -> tuple[float, float]:
    loss = torch.stack([res[case][0].double() for res in results]).mean()  # the mean over ranks a logger shows
    grad_diff = max((g.double() - r).abs().max().item() for g, r in zip(results[0][case][1], ref_grads))
    return (loss - ref_loss).abs().item(), grad_diff


@pytest.mark.parametrize("case", [c for c in CASES if c != "local-only-control"])
def test_two_processes_match_single_process(two_process_results, case):
    dtype, kwargs = CASES[case]
    ref_loss, ref_grads = single_process_reference(kwargs)
    loss_diff, grad_diff = max_abs_diffs(two_process_results, case, ref_loss, ref_grads)
    print(f"{case}: loss {ref_loss.item():.6f} max|dloss| {loss_diff:.1e} max|dgrad| {grad_diff:.1e}")
    # float64 is the exactness check (any scheme error is >= 1e-3 here). float32 is plain rounding: gradients
    # up to 1.6 pass 1/tau = 20 and cancel, giving up to ~8e-7 measured (one-process float32: ~4e-7).
    tolerance = 1e-6 if dtype == torch.float64 else 3e-6
    assert loss_diff <= tolerance and grad_diff <= tolerance
    for g0, g1 in zip(two_process_results[0][case][1], two_process_results[1][case][1]):
        assert torch.equal(g0, g1)  # averaged gradients are the same on both ranks
    assert min(g.abs().max() for g in ref_grads) > 1e-2  # every parameter gets a real gradient


def test_two_process_comparison_can_fail(two_process_results):
    """Control: local negatives only must NOT match the global loss, so the comparison above has teeth."""
    ref_loss, ref_grads = single_process_reference(CONFIGS["cos-symmetric"])
    loss_diff, grad_diff = max_abs_diffs(two_process_results, "local-only-control", ref_loss, ref_grads)
    assert loss_diff > 1e-3 and grad_diff > 1e-3


def test_rank_and_world_size_read_at_call_time(two_process_results):
    """The losses were built before init_process_group; rank and world size are read when they run."""
    for rank, res in enumerate(two_process_results):
        assert res["before_init"] == (1, 0)
        assert res["after_init"] == (WORLD, rank)


@pytest.mark.parametrize("case", list(UNEQUAL_CASES))
def test_unequal_local_batches_match_single_process(two_process_results, case):
    """Rank 0 keeps 3 documents, rank 1 only 2: still the single-process loss and gradients on the 5."""
    x_anchor, x_positive, x_negative = make_inputs()
    rows = torch.tensor([0, 1, 2, 3, 4])
    encoder = make_encoder().double()
    anchors = encoder(x_anchor[rows].double())
    candidates = encoder(torch.cat([x_positive[rows], x_negative[rows]]).double())
    kwargs = UNEQUAL_CASES[case]
    ref = naive_info_nce(anchors, candidates, ANCHOR_IDS[rows], torch.cat([ANCHOR_IDS[rows], NEGATIVE_IDS[rows]]),
                         kwargs["temperature"], kwargs["similarity"], kwargs["symmetric"])
    ref.backward()
    loss_diff, grad_diff = max_abs_diffs(two_process_results, case, ref.detach(),
                                         [p.grad for p in encoder.parameters()])
    assert loss_diff <= 1e-6 and grad_diff <= 1e-6


def test_gather_rejects_different_trailing_shapes(two_process_results):
    for res in two_process_results:
        assert "(3, 8)" in res["shape_error"] and "(3, 9)" in res["shape_error"]


def test_bf16_autocast_computes_in_fp32():
    gen = torch.Generator().manual_seed(0)
    anchors, candidates = torch.randn(6, 16, generator=gen), torch.randn(12, 16, generator=gen)
    loss_fn = InfoNCELoss(temperature=0.05, symmetric=True)
    reference = loss_fn(anchors, candidates)["info_nce_loss"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast = loss_fn(anchors, candidates)["info_nce_loss"]
    assert under_autocast.dtype == torch.float32
    assert (under_autocast - reference).abs().item() < 1e-6
