"""The fast paths of issue 12 against their plain references: the guards' finiteness check, length-bucketed
passage encoding, SDPA attention by default, and ``torch.compile`` of the encoder."""

from __future__ import annotations

import pytest
import torch

from lit_docemb.guards import all_finite


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_all_finite_agrees_with_an_elementwise_check(dtype):
    big = torch.finfo(dtype).max
    cases = [
        [torch.randn(5, 3), torch.randn(7)],
        [torch.randn(5, 3), torch.tensor([1.0, float("nan")])],
        [torch.tensor([float("inf"), -float("inf")])],  # the sum is NaN
        [torch.tensor([-float("inf")]), torch.randn(4)],
        [torch.full((4,), big, dtype=dtype)],  # finite elements whose sum overflows: still finite
        [torch.zeros(0), torch.ones(2)],
        [],
    ]
    for tensors in cases:
        tensors = [t.to(dtype) for t in tensors]
        expected = all(bool(torch.isfinite(t).all()) for t in tensors)
        assert all_finite(tensors) is expected, tensors
