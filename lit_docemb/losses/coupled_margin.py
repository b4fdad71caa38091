"""CTPE's margin loss between coupled and uncoupled (former part, latter part) pairs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.losses.common import fp32, full_precision, global_count, global_mean


class CoupledMarginLoss(nn.Module):
    r"""Hinge on the cosine of a coupled pair minus that of an uncoupled pair (CTPE eq. 1).

    Inputs (all (B, D), one rank's share, row i of each belonging to training example i, any float dtype):
        f_pos, b_pos: former-part and latter-part embeddings of the same document (a coupled pair in S).
        f_neg, b_neg: the example's uncoupled pair in S* (parts of two different documents): either
            ``(f_i, b_j)`` or ``(f_j, b_i)``, chosen by the data pipeline, which also guarantees i != j.
    Output: ``{"coupled_margin_loss": scalar, "negatives_per_anchor": 1.0}`` (fp32, fp64 for fp64 inputs): one
    uncoupled pair per coupled pair, however large the batch or the number of devices.

    With the mean over the global batch of B examples (CTPE trains on mini-batches with Adam; it prints
    the per-example loss):

    .. math:: L = \frac{1}{B} \sum_i \max\{0,\ M - (\cos(f^+_i, b^+_i) - \cos(f^-_i, b^-_i))\}

    Reading chosen: the equation, ``max{0, -(diff - M)}``. The sentence before it ("if the difference ... is
    greater than M, the similarity is recorded as the loss value") has the condition backwards; the sentence
    after it ("if diff is greater than M ... L = 0") agrees with the equation.

    Under DDP there is nothing to gather (the negatives are explicit pairs): each rank's mean is exact, and
    with a different number of examples per rank the local sum is scaled by ``W / (examples on all ranks)``
    (one small exchange of counts, so every rank must call it).

    Siblings: the only margin (non-softmax) loss here; InfoNCE / NT-Xent / SupCon instead score each anchor
    against every other item of the gathered batch.

    Args:
        margin: M, the least difference of cosines that costs nothing; CTPE uses 0.1.
    """

    def __init__(self, margin: float = 0.1) -> None:
        super().__init__()
        self.margin = margin

    def forward(self, f_pos: Tensor, b_pos: Tensor, f_neg: Tensor, b_neg: Tensor) -> dict[str, Tensor]:
        if f_pos.ndim != 2 or not f_pos.shape == b_pos.shape == f_neg.shape == b_neg.shape:
            raise ValueError(f"need f_pos, b_pos, f_neg, b_neg of one shape (B, D), got "
                             f"{[tuple(x.shape) for x in (f_pos, b_pos, f_neg, b_neg)]}")
        with full_precision(f_pos.device):
            f_pos, b_pos, f_neg, b_neg = (fp32(x, normalize=True) for x in (f_pos, b_pos, f_neg, b_neg))
            difference = (f_pos * b_pos).sum(1) - (f_neg * b_neg).sum(1)  # (B,) cos+ - cos-
            terms = F.relu(self.margin - difference)  # (B,)
            loss = global_mean(terms, global_count(terms.new_tensor(float(len(terms)))))
        return {"coupled_margin_loss": loss, "negatives_per_anchor": torch.ones((), device=terms.device)}
