"""SupConLoss against a per-sample loop (one process), under bf16 autocast, and gathered on 2 gloo processes
with labels spread unevenly over the ranks."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import Tensor, nn
from two_process import init_gloo, save_result, spawn

from lit_docemb.losses import NTXentLoss, SupConLoss

# ---------------------------------------------------------------- per-sample reference


def naive_supcon(features, labels, ids, temperature, similarity) -> tuple[Tensor, float, int]:
    """Khosla et al. L_out: for each anchor with a positive, -1/|P| sum_p log(exp s_ip / sum_{k != i} exp s_ik);
    mean over those anchors. Pairs with the same id and different labels are not in the denominator.
    Also returns the mean number of negatives and the number of anchors without a positive."""
    def score(i, j):
        s = (features[i] * features[j]).sum()
        if similarity == "cos":
            s = s / (features[i].norm() * features[j].norm())
        return s / temperature

    terms, negatives, without_positive = [], [], 0
    for i in range(len(features)):
        others = [k for k in range(len(features))
                  if k != i and not (ids is not None and ids[k] == ids[i] and labels[k] != labels[i])]
        positives = [p for p in others if labels[p] == labels[i]]
        if not positives:
            without_positive += 1
            continue
        log_denominator = torch.log(sum(torch.exp(score(i, k)) for k in others))
        terms.append(-sum(score(i, p) - log_denominator for p in positives) / len(positives))
        negatives.append(len(others) - len(positives))
    return torch.stack(terms).mean(), sum(negatives) / len(negatives), without_positive


# ---------------------------------------------------------------- one process

LABELS = torch.tensor([0, 0, 1, 2, 2, 1, 3, 3, 4, 2])  # label 4 once: an anchor without a positive
IDS = torch.tensor([20, 20, 21, 22, 23, 24, 25, 25, 21, 22])  # 21: same document, labels 1 and 4 (masked)


@pytest.mark.parametrize("similarity,temperature", [("cos", 0.5), ("cos", 0.07), ("dot", 1.0)])
@pytest.mark.parametrize("with_ids", [False, True])
def test_matches_per_sample_reference(similarity, temperature, with_ids):
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(10, 6, generator=gen, dtype=torch.float64)
    features[8] = features[2] + 0.1 * features[8]  # document 21 twice: alike, so masking it matters
    features.requires_grad_(True)
    ids = IDS if with_ids else None
    loss_fn = SupConLoss(temperature, similarity)

    out = loss_fn(features, LABELS, ids)
    (grad,) = torch.autograd.grad(out["supcon_loss"], [features])
    ref, ref_negatives, ref_without = naive_supcon(features, LABELS, ids, temperature, similarity)
    (ref_grad,) = torch.autograd.grad(ref, [features])

    torch.testing.assert_close(out["supcon_loss"], ref, rtol=0, atol=1e-10)
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-10)
    assert out["negatives_per_anchor"].item() == pytest.approx(ref_negatives)
    assert out["anchors_without_positive"].item() == ref_without == 1
    assert grad[8].abs().max() > 0  # the anchor without positive is still a negative of the others
    if with_ids:
        assert (loss_fn(features, LABELS)["supcon_loss"] - out["supcon_loss"]).abs() > 1e-4


def test_no_positive_anywhere_gives_zero_and_finite_gradients():
    features = torch.randn(4, 3, requires_grad=True)
    out = SupConLoss()(features, torch.arange(4))
    out["supcon_loss"].backward()
    assert out["supcon_loss"].item() == 0.0 and out["anchors_without_positive"].item() == 4
    assert torch.equal(features.grad, torch.zeros_like(features))


def test_bf16_autocast_computes_in_fp32():
    torch.manual_seed(0)
    encoder = nn.Linear(16, 32)
    x = torch.randn(10, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = encoder(x)
        loss = SupConLoss(0.1)(features, LABELS)["supcon_loss"]
    assert features.dtype == torch.bfloat16 and loss.dtype == torch.float32
    torch.testing.assert_close(loss, SupConLoss(0.1)(features.float(), LABELS)["supcon_loss"], rtol=0, atol=1e-7)
    loss.backward()
    assert encoder.weight.grad.abs().max() > 0


# ---------------------------------------------------------------- two processes

# With LABELS/IDS above: label 0 only on rank 0, label 3 only on rank 1 (equal split), labels 1 and 2 across
# ranks, label 4 alone; document 22 on both ranks (same label), document 21 on both with labels 1 and 4.
WORLD, IN_DIM = 2, 12
SPLITS = {"equal": (5, 5), "unequal": (7, 3)}
CASES = {
    f"{similarity}-{split}-{'ids' if with_ids else 'noids'}": (dict(temperature=temperature, similarity=similarity),
                                                               split, with_ids)
    for similarity, temperature in (("cos", 0.5), ("dot", 1.0)) for split in SPLITS for with_ids in (False, True)
}
CASES["local-only-control"] = (dict(temperature=0.5, gather_across_devices=False), "equal", True)


def make_encoder() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN_DIM, 16), nn.Tanh(), nn.Linear(16, 8)).double()


def make_inputs() -> Tensor:
    x = torch.randn(10, IN_DIM, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x[8] = x[2] + 0.1 * x[8]  # document 21 on both ranks, alike
    x[9] = x[3] + 0.1 * x[9]  # document 22 on both ranks, alike
    return x


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    losses = {name: SupConLoss(**kwargs) for name, (kwargs, _, _) in CASES.items()}  # before the process group
    init_gloo(rank, port)
    result = {}
    try:
        x = make_inputs()
        for name, loss_fn in losses.items():
            _, split, with_ids = CASES[name]
            start = sum(SPLITS[split][:rank])
            rows = slice(start, start + SPLITS[split][rank])
            encoder = make_encoder()
            out = loss_fn(encoder(x[rows]), LABELS[rows], IDS[rows] if with_ids else None)
            out["supcon_loss"].backward()
            for p in encoder.parameters():  # what DDP does: average gradients over ranks
                dist.all_reduce(p.grad)
                p.grad /= WORLD
            result[name] = (out["supcon_loss"].detach(), [p.grad for p in encoder.parameters()],
                            out["anchors_without_positive"])
    finally:
        dist.destroy_process_group()
    save_result(result, out_dir, rank)


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("supcon_two_process")
    return spawn(_worker, out_dir)


def diffs_to_single_process(results: list[dict], case: str) -> tuple[float, float]:
    """max |loss - ref| (loss: mean over ranks, what a logger shows) and max |grad - ref| over all parameters."""
    kwargs, _, with_ids = CASES[case]
    encoder = make_encoder()
    ref, _, _ = naive_supcon(encoder(make_inputs()), LABELS, IDS if with_ids else None, kwargs["temperature"],
                             kwargs.get("similarity", "cos"))
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
    assert [res[case][2].item() for res in two_process_results] == [1, 1]  # global count: label 4


def test_two_process_comparison_can_fail(two_process_results):
    """Control: local items only must NOT match (and leaves more anchors without a positive)."""
    loss_diff, grad_diff = diffs_to_single_process(two_process_results, "local-only-control")
    assert loss_diff > 1e-3 and grad_diff > 1e-3
    assert sum(res["local-only-control"][2].item() for res in two_process_results) > 1


def test_one_positive_per_anchor_is_simclr_nt_xent():
    """The sibling relation the docstring states: labels = document ids of two views gives SimCLR's NT-Xent."""
    h, h_aug = torch.randn(2, 6, 5, dtype=torch.float64)
    supcon = SupConLoss(0.3)(torch.cat([h, h_aug]), torch.arange(6).repeat(2))["supcon_loss"]
    torch.testing.assert_close(supcon, NTXentLoss(0.3, "simclr")(h, h_aug)["ntxent_loss"], rtol=0, atol=1e-12)
