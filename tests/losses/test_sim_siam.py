"""SimSiamLoss against a per-sample loop (stop-gradient included), under bf16 autocast, and on 2 gloo processes."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import Tensor, nn
from two_process import init_gloo, save_result, spawn

from lit_docemb.losses import SimSiamLoss

# ---------------------------------------------------------------- per-sample reference


def naive_simsiam(p1, p2, z1, z2) -> Tensor:
    """Mean over documents of 1/2 D(p1_i, sg(z2_i)) + 1/2 D(p2_i, sg(z1_i)), D the negative cosine."""
    def neg_cos(x, y):
        return -(x * y).sum() / (x.norm() * y.norm())

    terms = [0.5 * neg_cos(p1[i], z2[i].detach()) + 0.5 * neg_cos(p2[i], z1[i].detach()) for i in range(len(p1))]
    return torch.stack(terms).mean()


class Siamese(nn.Module):
    """Encoder (z) and predictor (p = predictor(z)); no BatchNorm so that a batch split over ranks is exact."""

    def __init__(self, in_dim: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Sequential(nn.Linear(in_dim, 16), nn.Tanh(), nn.Linear(16, 8))
        self.predictor = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))

    def forward(self, x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        z1, z2 = self.encoder(x1), self.encoder(x2)
        return self.predictor(z1), self.predictor(z2), z1, z2


# ---------------------------------------------------------------- one process


def test_matches_per_sample_reference_and_stops_gradient():
    model = Siamese(12).double()
    gen = torch.Generator().manual_seed(1)
    x1 = torch.randn(5, 12, generator=gen, dtype=torch.float64)
    x2 = x1 + 0.5 * torch.randn(5, 12, generator=gen, dtype=torch.float64)

    out = SimSiamLoss()(*model(x1, x2))
    grads = torch.autograd.grad(out["simsiam_loss"], list(model.parameters()))
    ref = naive_simsiam(*model(x1, x2))
    ref_grads = torch.autograd.grad(ref, list(model.parameters()))

    torch.testing.assert_close(out["simsiam_loss"], ref, rtol=0, atol=1e-12)
    for grad, ref_grad in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-12)
    assert out["negatives_per_anchor"].item() == 0.0
    # the stop-gradient matters: without it the encoder would also get gradient through z
    p1, p2, z1, z2 = model(x1, x2)
    no_stop = -0.5 * (torch.cosine_similarity(p1, z2).mean() + torch.cosine_similarity(p2, z1).mean())
    no_stop_grads = torch.autograd.grad(no_stop, list(model.parameters()))
    assert max((g - n).abs().max() for g, n in zip(grads, no_stop_grads)) > 1e-3


def test_no_gradient_reaches_z():
    p1, p2, z1, z2 = (torch.randn(3, 4, requires_grad=True) for _ in range(4))
    SimSiamLoss()(p1, p2, z1, z2)["simsiam_loss"].backward()
    assert z1.grad is None and z2.grad is None and p1.grad.abs().max() > 0


def test_bf16_autocast_computes_in_fp32():
    model = Siamese(16)
    x1, x2 = torch.randn(8, 16), torch.randn(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        views = model(x1, x2)
        loss = SimSiamLoss()(*views)["simsiam_loss"]
    assert views[0].dtype == torch.bfloat16 and loss.dtype == torch.float32
    torch.testing.assert_close(loss, SimSiamLoss()(*(v.float() for v in views))["simsiam_loss"], rtol=0, atol=1e-7)


# ---------------------------------------------------------------- two processes

WORLD, IN_DIM = 2, 12
SPLITS = {"equal": (3, 3), "unequal": (5, 1)}


def make_inputs() -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(2)
    x1 = torch.randn(6, IN_DIM, generator=gen, dtype=torch.float64)
    return x1, x1 + 0.5 * torch.randn(6, IN_DIM, generator=gen, dtype=torch.float64)


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    loss_fn = SimSiamLoss()
    init_gloo(rank, port)
    result = {}
    try:
        x1, x2 = make_inputs()
        for split, sizes in SPLITS.items():
            rows = slice(sum(sizes[:rank]), sum(sizes[: rank + 1]))
            model = Siamese(IN_DIM).double()
            loss = loss_fn(*model(x1[rows], x2[rows]))["simsiam_loss"]
            loss.backward()
            for p in model.parameters():  # what DDP does: average gradients over ranks
                dist.all_reduce(p.grad)
                p.grad /= WORLD
            result[split] = (loss.detach(), [p.grad for p in model.parameters()])
    finally:
        dist.destroy_process_group()
    save_result(result, out_dir, rank)


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("simsiam_two_process")
    return spawn(_worker, out_dir)


@pytest.mark.parametrize("split", list(SPLITS))
def test_two_processes_match_single_process(two_process_results, split):
    model = Siamese(IN_DIM).double()
    ref = naive_simsiam(*model(*make_inputs()))
    ref.backward()
    loss = torch.stack([res[split][0] for res in two_process_results]).mean()
    grad_diff = max((g - p.grad).abs().max().item() for g, p in zip(two_process_results[0][split][1],
                                                                    model.parameters()))
    print(f"{split}: max|dloss| {(loss - ref).abs().item():.1e} max|dgrad| {grad_diff:.1e}")
    assert (loss - ref).abs() <= 1e-6 and grad_diff <= 1e-6
    assert min(p.grad.abs().max() for p in model.parameters()) > 1e-3  # encoder and predictor both trained
