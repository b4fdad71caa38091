"""Pieces the contrastive losses share: fp32 similarities under autocast, and the exact global mean under DDP.

No collectives here: counts are exchanged through :mod:`lit_docemb.distributed`.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_docemb.distributed import gather_no_grad, world_size


def full_precision(device: torch.device) -> contextlib.AbstractContextManager:
    """Turns autocast off: under (CPU or CUDA) bf16 autocast a matmul of fp32 tensors would run in bf16."""
    return torch.autocast(device_type=device.type, enabled=False)


def fp32(x: Tensor, normalize: bool = False) -> Tensor:
    """Casts to at least fp32 (bf16/fp16 -> fp32, fp64 stays fp64) and L2-normalises rows if asked.
    Call it inside :func:`full_precision`."""
    x = x.to(torch.promote_types(x.dtype, torch.float32))
    return F.normalize(x, dim=-1) if normalize else x


def global_count(local: Tensor, across_devices: bool = True) -> Tensor:
    """Sum over ranks of a small tensor of counts (no gradient); ``local`` itself with one process or when
    ``across_devices`` is False."""
    if not across_devices or world_size() == 1:
        return local
    return gather_no_grad(local.reshape(1, -1)).sum(0).reshape(local.shape)  # (W, n) -> local shape


def global_mean(terms: Tensor, total: Tensor, across_devices: bool = True) -> Tensor:
    """``W * sum(terms) / total``: with ``total`` the number of terms on all W ranks, DDP's average of this
    over ranks is the mean over the global batch, whatever the number of terms per rank. Gives an exact 0
    that still depends on ``terms`` (so every rank runs the gathers' backward) when ``total`` is 0."""
    scale = world_size() if across_devices else 1
    return terms.sum() * scale / total.clamp(min=1)


def mean_or_zero(x: Tensor) -> Tensor:
    """Detached fp32 mean for logging, 0 for an empty tensor."""
    x = x.detach().float()
    return x.mean() if x.numel() else x.new_zeros(())
