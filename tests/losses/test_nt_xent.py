"""NTXentLoss against a per-sample loop (one process), under bf16 autocast, and gathered on 2 gloo processes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
from torch import Tensor, nn
from two_process import init_gloo, save_result, spawn

from lit_docemb.losses import NTXentLoss, nt_xent

# ---------------------------------------------------------------- per-sample reference


def cos(x: Tensor, y: Tensor) -> Tensor:
    return (x * y).sum() / (x.norm() * y.norm())


def naive_ntxent(h, h_aug, ids, temperature, denominator) -> tuple[Tensor, float]:
    """DECA eq. 4 ("paper": h_i against h~_k, k != i) or SimCLR (2N views, all others), mean over the anchors
    that have a term; also the mean number of negatives. ``ids``: same-document views are skipped."""
    num = len(h)
    views = list(h) + list(h_aug)
    same = (lambda a, b: False) if ids is None else (lambda a, b: bool(ids[a % num] == ids[b % num]))
    terms, negatives = [], []
    for a in range(num if denominator == "paper" else 2 * num):
        positive = (a + num) % (2 * num)
        if denominator == "paper":  # candidates: the augmentations except the positive
            others = [num + k for k in range(num) if k != a and not same(a, k)]
        else:  # candidates: every other view; same-document views other than the positive skipped
            others = [k for k in range(2 * num) if k != a and (k == positive or not same(a, k))]
        negatives.append(len(others) - (denominator != "paper"))
        if not others:
            continue
        log_denominator = torch.log(sum(torch.exp(cos(views[a], views[k]) / temperature) for k in others))
        terms.append(log_denominator - cos(views[a], views[positive]) / temperature)
    return torch.stack(terms).mean(), sum(negatives) / len(negatives)


# ---------------------------------------------------------------- one process


@pytest.mark.parametrize("denominator", ["paper", "simclr"])
@pytest.mark.parametrize("temperature", [1.0, 0.1])
@pytest.mark.parametrize("with_ids", [False, True])
@pytest.mark.parametrize("block_logits", [None, 7])
@pytest.mark.parametrize("kept_softmax", [None, 0])
def test_matches_per_sample_reference(denominator, temperature, with_ids, block_logits, kept_softmax, monkeypatch):
    """``block_logits`` 7: the paper form's anchors one at a time (6 candidates each), in forward and backward;
    ``kept_softmax`` 0: backward recomputes the softmax blocks instead of reusing forward's."""
    if block_logits is not None:
        monkeypatch.setattr(nt_xent, "BLOCK_LOGITS", block_logits)
    if kept_softmax is not None:
        monkeypatch.setattr(nt_xent, "KEPT_SOFTMAX", kept_softmax)
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(6, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    h_aug = torch.randn(6, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([7, 8, 7, 9, 10, 11]) if with_ids else None  # document 7 twice
    loss_fn = NTXentLoss(temperature, denominator)

    out = loss_fn(h, h_aug, ids)
    grads = torch.autograd.grad(out["ntxent_loss"], [h, h_aug])
    ref, ref_negatives = naive_ntxent(h, h_aug, ids, temperature, denominator)
    ref_grads = torch.autograd.grad(ref, [h, h_aug])

    torch.testing.assert_close(out["ntxent_loss"], ref, rtol=0, atol=1e-10)
    for grad, ref_grad in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-10)
    assert out["negatives_per_anchor"].item() == pytest.approx(ref_negatives)
    if with_ids:  # the masking must change the loss, or this test proves nothing about it
        assert (loss_fn(h, h_aug)["ntxent_loss"] - out["ntxent_loss"]).abs() > 1e-3


def test_paper_denominator_excludes_the_positive():
    """Two documents, tau 1: eq. 4 as printed is cos(h_1, h~_2) - cos(h_1, h~_1) for anchor 1."""
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    h_aug = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    loss = NTXentLoss(1.0, "paper")(h, h_aug)["ntxent_loss"]
    expected = ((1 / math.sqrt(2) - 1) + (0.0 - 1 / math.sqrt(2))) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-7)
    simclr = NTXentLoss(1.0, "simclr")(h, h_aug)
    assert simclr["negatives_per_anchor"].item() == 2  # 2N - 2


def test_anchor_without_negative_is_left_out():
    h = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    h_aug = torch.randn(3, 4, dtype=torch.float64)
    out = NTXentLoss(1.0, "paper")(h, h_aug, torch.tensor([1, 1, 2]))  # anchor 2 keeps negatives
    out["ntxent_loss"].backward()
    ref, _ = naive_ntxent(h, h_aug, torch.tensor([1, 1, 2]), 1.0, "paper")
    torch.testing.assert_close(out["ntxent_loss"], ref, rtol=0, atol=1e-12)
    assert torch.isfinite(h.grad).all()
    alone = NTXentLoss(1.0, "paper")(h[:1], h_aug[:1])  # one document: nothing to contrast with
    assert alone["ntxent_loss"].item() == 0.0 and alone["negatives_per_anchor"].item() == 0.0


@pytest.mark.parametrize("denominator", ["paper", "simclr"])
def test_bf16_autocast_computes_in_fp32(denominator):
    torch.manual_seed(0)
    encoder = nn.Linear(16, 32)
    x, x_aug = torch.randn(8, 16), torch.randn(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h, h_aug = encoder(x), encoder(x_aug)
        loss = NTXentLoss(0.1, denominator)(h, h_aug)["ntxent_loss"]
    assert h.dtype == torch.bfloat16 and loss.dtype == torch.float32
    reference = NTXentLoss(0.1, denominator)(h.float(), h_aug.float())["ntxent_loss"]  # fp32 outside autocast
    torch.testing.assert_close(loss, reference, rtol=0, atol=1e-7)  # bf16 logits would be ~1e-2 off
    loss.backward()
    assert encoder.weight.grad.abs().max() > 0


# ---------------------------------------------------------------- two processes

WORLD, IN_DIM = 2, 12
IDS = torch.tensor([10, 11, 12, 13, 14, 10])  # document 10 on rank 0 (row 0) and on rank 1 (row 5)
SPLITS = {"equal": (3, 3), "unequal": (4, 2)}
CASES = {
    f"{denominator}-{split}-{'ids' if with_ids else 'noids'}": (dict(temperature=0.5, denominator=denominator),
                                                               split, with_ids)
    for denominator in ("paper", "simclr") for split in SPLITS for with_ids in (False, True)
}
CASES["local-only-control"] = (dict(temperature=0.5, denominator="simclr", gather_across_devices=False),
                               "equal", True)


def make_encoder() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN_DIM, 16), nn.Tanh(), nn.Linear(16, 8)).double()


def make_inputs() -> tuple[Tensor, Tensor]:
    """Global batch: documents and their augmentations (6, IN), the duplicate of document 10 alike."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, IN_DIM, generator=gen, dtype=torch.float64)
    x[5] = x[0] + 0.1 * x[5]
    return x, x + 0.5 * torch.randn(6, IN_DIM, generator=gen, dtype=torch.float64)


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    losses = {name: NTXentLoss(**kwargs) for name, (kwargs, _, _) in CASES.items()}  # before the process group
    init_gloo(rank, port)
    result = {}
    try:
        x, x_aug = make_inputs()
        for name, loss_fn in losses.items():
            _, split, with_ids = CASES[name]
            start = sum(SPLITS[split][:rank])
            rows = slice(start, start + SPLITS[split][rank])
            encoder = make_encoder()
            out = loss_fn(encoder(x[rows]), encoder(x_aug[rows]), IDS[rows] if with_ids else None)
            out["ntxent_loss"].backward()
            for p in encoder.parameters():  # what DDP does: average gradients over ranks
                dist.all_reduce(p.grad)
                p.grad /= WORLD
            result[name] = (out["ntxent_loss"].detach(), [p.grad for p in encoder.parameters()])
    finally:
        dist.destroy_process_group()
    save_result(result, out_dir, rank)


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("ntxent_two_process")
    return spawn(_worker, out_dir)


def diffs_to_single_process(results: list[dict], case: str) -> tuple[float, float]:
    """max |loss - ref| (loss: mean over ranks, what a logger shows) and max |grad - ref| over all parameters."""
    kwargs, _, with_ids = CASES[case]
    x, x_aug = make_inputs()
    encoder = make_encoder()
    ref, _ = naive_ntxent(encoder(x), encoder(x_aug), IDS if with_ids else None, kwargs["temperature"],
                          kwargs["denominator"])
    ref.backward()
    loss = torch.stack([res[case][0] for res in results]).mean()
    grad_diff = max((g - p.grad).abs().max().item() for g, p in zip(results[0][case][1], encoder.parameters()))
    assert min(p.grad.abs().max() for p in encoder.parameters()) > 1e-3  # every parameter gets a real gradient
    return (loss - ref).abs().item(), grad_diff


@pytest.mark.parametrize("case", [c for c in CASES if c != "local-only-control"])
def test_two_processes_match_single_process(two_process_results, case):
    loss_diff, grad_diff = diffs_to_single_process(two_process_results, case)
    print(f"{case}: max|dloss| {loss_diff:.1e} max|dgrad| {grad_diff:.1e}")
    assert loss_diff <= 1e-6 and grad_diff <= 1e-6
    for g0, g1 in zip(two_process_results[0][case][1], two_process_results[1][case][1]):
        assert torch.equal(g0, g1)


def test_two_process_comparison_can_fail(two_process_results):
    """Control: local negatives only must NOT match the global loss."""
    loss_diff, grad_diff = diffs_to_single_process(two_process_results, "local-only-control")
    assert loss_diff > 1e-3 and grad_diff > 1e-3
