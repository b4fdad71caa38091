"""Masked-language-modelling cross-entropy (DocSplit's auxiliary loss)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class MaskedLMLoss(nn.Module):
    """Mean token cross-entropy over the masked positions, computed in fp32.

    DocSplit §4.1 optimises it together with the contrastive loss (weight 0.1, set by the method, not here),
    following SimCSE; the masking itself is done by the collator (``MaskedTokenBatch``).

    Inputs:
        logits: (B, T, V) scores of the MLM head, any float dtype (cast to fp32 before the softmax).
        labels: (B, T) original token ids at masked positions, ``ignore_index`` elsewhere.
    Output: ``{"mlm_loss": scalar}``. A batch without any masked position gives an exact 0 that is still
    connected to ``logits`` (zero gradients), so every DDP rank runs the same backward and none hangs.

    Args:
        ignore_index: Label value of the positions that do not count (-100, the Hugging Face convention).
    """

    def __init__(self, ignore_index: int = -100) -> None:
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: Tensor, labels: Tensor) -> dict[str, Tensor]:
        if logits.shape[:-1] != labels.shape:
            raise ValueError(f"need logits (B, T, V) and labels (B, T), got {logits.shape}, {labels.shape}")
        logits = logits.flatten(0, -2).float()  # (B*T, V)
        labels = labels.flatten()  # (B*T,)
        # sum / count instead of the default mean: no host sync, and 0 (not NaN) with nothing masked.
        total = F.cross_entropy(logits, labels, ignore_index=self.ignore_index, reduction="sum")
        count = (labels != self.ignore_index).sum().clamp(min=1)
        return {"mlm_loss": total / count}
