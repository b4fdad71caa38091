"""CoupledMarginLoss against a per-sample loop, under bf16 autocast, and on 2 gloo processes."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import Tensor, nn
from two_process import init_gloo, save_result, spawn

from lit_docemb.losses import CoupledMarginLoss

# ---------------------------------------------------------------- per-sample reference


def naive_coupled_margin(f_pos, b_pos, f_neg, b_neg, margin) -> tuple[Tensor, int]:
    """Mean of max(0, M - (cos(f+, b+) - cos(f-, b-))); also how many examples violate the margin."""
    def cos(x, y):
        return (x * y).sum() / (x.norm() * y.norm())

    terms = [torch.clamp(margin - (cos(f_pos[i], b_pos[i]) - cos(f_neg[i], b_neg[i])), min=0)
             for i in range(len(f_pos))]
    return torch.stack(terms).mean(), sum(int(t > 0) for t in terms)


def make_encoder(in_dim: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(in_dim, 16), nn.Tanh(), nn.Linear(16, 8))


def make_parts(num: int, in_dim: int, seed: int) -> Tensor:
    """(4, num, in_dim): former/latter parts of num documents (alike), then uncoupled former/latter parts."""
    gen = torch.Generator().manual_seed(seed)
    f = torch.randn(num, in_dim, generator=gen, dtype=torch.float64)
    b = f + 1.5 * torch.randn(num, in_dim, generator=gen, dtype=torch.float64)
    return torch.stack([f, b, f, b.roll(1, dims=0)])  # negative: (f_i, b_{i-1}), parts of two documents


# ---------------------------------------------------------------- one process


@pytest.mark.parametrize("margin", [0.1, 0.3])
def test_matches_per_sample_reference(margin):
    encoder = make_encoder(12).double()
    parts = make_parts(8, 12, seed=1)

    out = CoupledMarginLoss(margin)(*encoder(parts))
    grads = torch.autograd.grad(out["coupled_margin_loss"], list(encoder.parameters()))
    ref, violations = naive_coupled_margin(*encoder(parts), margin)
    ref_grads = torch.autograd.grad(ref, list(encoder.parameters()))

    torch.testing.assert_close(out["coupled_margin_loss"], ref, rtol=0, atol=1e-12)
    for grad, ref_grad in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-12)
    assert 0 < violations < 8  # both sides of the hinge are exercised
    assert out["negatives_per_anchor"].item() == 1.0


def test_margin_is_the_hinge_point():
    f = torch.tensor([[1.0, 0.0]])
    b_pos, b_neg = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])  # cos 1 and 0: difference 1
    assert CoupledMarginLoss(0.1)(f, b_pos, f, b_neg)["coupled_margin_loss"].item() == 0.0
    assert CoupledMarginLoss(1.5)(f, b_pos, f, b_neg)["coupled_margin_loss"].item() == pytest.approx(0.5)
    assert CoupledMarginLoss(0.1)(f, b_neg, f, b_pos)["coupled_margin_loss"].item() == pytest.approx(1.1)


def test_bf16_autocast_computes_in_fp32():
    encoder = make_encoder(12)
    parts = make_parts(8, 12, seed=1).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embeddings = encoder(parts)
        loss = CoupledMarginLoss(0.5)(*embeddings)["coupled_margin_loss"]
    assert embeddings.dtype == torch.bfloat16 and loss.dtype == torch.float32
    reference = CoupledMarginLoss(0.5)(*embeddings.float())["coupled_margin_loss"]
    torch.testing.assert_close(loss, reference, rtol=0, atol=1e-7)


# ---------------------------------------------------------------- two processes

WORLD, IN_DIM = 2, 12
SPLITS = {"equal": (4, 4), "unequal": (6, 2)}


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    loss_fn = CoupledMarginLoss(0.1)
    init_gloo(rank, port)
    result = {}
    try:
        parts = make_parts(8, IN_DIM, seed=2)
        for split, sizes in SPLITS.items():
            encoder = make_encoder(IN_DIM).double()
            loss = loss_fn(*encoder(parts[:, sum(sizes[:rank]): sum(sizes[: rank + 1])]))["coupled_margin_loss"]
            loss.backward()
            for p in encoder.parameters():  # what DDP does: average gradients over ranks
                dist.all_reduce(p.grad)
                p.grad /= WORLD
            result[split] = (loss.detach(), [p.grad for p in encoder.parameters()])
    finally:
        dist.destroy_process_group()
    save_result(result, out_dir, rank)


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("coupled_margin_two_process")
    return spawn(_worker, out_dir)


@pytest.mark.parametrize("split", list(SPLITS))
def test_two_processes_match_single_process(two_process_results, split):
    encoder = make_encoder(IN_DIM).double()
    ref, violations = naive_coupled_margin(*encoder(make_parts(8, IN_DIM, seed=2)), 0.1)
    ref.backward()
    loss = torch.stack([res[split][0] for res in two_process_results]).mean()
    grad_diff = max((g - p.grad).abs().max().item() for g, p in zip(two_process_results[0][split][1],
                                                                    encoder.parameters()))
    print(f"{split}: max|dloss| {(loss - ref).abs().item():.1e} max|dgrad| {grad_diff:.1e}")
    assert (loss - ref).abs() <= 1e-6 and grad_diff <= 1e-6
    assert 0 < violations < 8 and min(p.grad.abs().max() for p in encoder.parameters()) > 1e-3
