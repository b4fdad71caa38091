"""What every loss returns: named ``*_loss`` terms plus ``negatives_per_anchor`` (a float tensor to log)."""

from __future__ import annotations

import pytest
import torch

from lit_docemb.losses import (
    CoupledMarginLoss,
    InfoNCELoss,
    NTXentLoss,
    SimSiamLoss,
    SupConLoss,
)

B, D = 4, 6
CALLS = {
    "info_nce": (InfoNCELoss(), lambda x: (x[0], torch.cat([x[1], x[2]]))),
    "ntxent": (NTXentLoss(), lambda x: (x[0], x[1])),
    "simsiam": (SimSiamLoss(), lambda x: (x[0], x[1], x[2], x[3])),
    "supcon": (SupConLoss(), lambda x: (torch.cat([x[0], x[1]]), torch.tensor([0, 0, 1, 2] * 2))),
    "coupled_margin": (CoupledMarginLoss(), lambda x: (x[0], x[1], x[2], x[3])),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_named_terms_and_negatives_per_anchor(name):
    loss_fn, make_args = CALLS[name]
    x = torch.randn(4, B, D, requires_grad=True)
    out = loss_fn(*make_args(x))
    terms = [key for key in out if key.endswith("_loss")]
    assert terms == [f"{name}_loss"] and out[terms[0]].shape == () and out[terms[0]].requires_grad
    negatives = out["negatives_per_anchor"]
    assert negatives.dtype == torch.float32 and negatives.shape == () and not negatives.requires_grad


def test_info_nce_negatives_per_anchor_counts_masked_candidates_out():
    anchors, candidates = torch.randn(3, D), torch.randn(6, D)  # 3 positives, then 3 hard negatives
    anchor_ids, candidate_ids = torch.tensor([1, 2, 1]), torch.tensor([1, 2, 1, 5, 2, 6])
    assert InfoNCELoss()(anchors, candidates)["negatives_per_anchor"].item() == 5
    # each anchor loses one same-document candidate: 4 negatives each
    assert InfoNCELoss()(anchors, candidates, anchor_ids, candidate_ids)["negatives_per_anchor"].item() == 4
    # reverse direction: positives against the 3 anchors, document 1 twice -> 1, 2, 1 negatives
    symmetric = InfoNCELoss(symmetric=True)(anchors, candidates, anchor_ids, candidate_ids)
    assert symmetric["negatives_per_anchor"].item() == pytest.approx((4 * 3 + 1 + 2 + 1) / 6)
