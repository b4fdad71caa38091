"""EmbeddingAnchorLoss: cosine and MSE distances by hand, no gradient into the targets, shape and name errors."""

from __future__ import annotations

import pytest
import torch

from lit_docemb.losses import EmbeddingAnchorLoss


def test_cosine_distance_by_hand_and_targets_get_no_gradient():
    embeddings = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]], requires_grad=True)
    targets = torch.tensor([[1.0, 0.0], [2.0, 0.0], [-1.0, -1.0]], requires_grad=True)
    loss = EmbeddingAnchorLoss("cosine")(embeddings, targets)["anchor_loss"]
    assert loss.item() == pytest.approx((0.0 + 1.0 + 2.0) / 3)
    loss.backward()
    assert targets.grad is None and embeddings.grad.abs().sum() > 0


def test_mse_distance_by_hand_and_zero_at_the_targets():
    embeddings = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    targets = torch.tensor([[1.0, 0.0], [3.0, 1.0]])
    assert EmbeddingAnchorLoss("mse")(embeddings, targets)["anchor_loss"].item() == pytest.approx((2.0 + 5.0) / 2)
    assert EmbeddingAnchorLoss("mse")(targets, targets)["anchor_loss"].item() == 0.0


def test_bf16_inputs_give_an_fp32_loss():
    embeddings = torch.randn(4, 8)
    loss = EmbeddingAnchorLoss()(embeddings.bfloat16(), embeddings.bfloat16())["anchor_loss"]
    assert loss.dtype == torch.float32 and abs(loss.item()) < 1e-6


def test_bad_distance_and_shapes_are_refused():
    with pytest.raises(ValueError, match="distance must be 'cosine' or 'mse'"):
        EmbeddingAnchorLoss("l1")
    with pytest.raises(ValueError, match="one shape"):
        EmbeddingAnchorLoss()(torch.zeros(2, 3), torch.zeros(3, 3))
