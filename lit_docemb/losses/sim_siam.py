"""SimSiam's symmetrised negative cosine with stop-gradient (DECA eq. 5); no negatives."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lit_docemb.losses.common import fp32, full_precision, global_count, global_mean


class SimSiamLoss(nn.Module):
    r"""Negative cosine between each view's prediction and the other view's stopped embedding, symmetrised.

    Inputs (all (B, D), one rank's share of the batch, row i of each belonging to document i, any float dtype):
        p1, p2: predictions of view 1 (the document) and view 2 (its augmentation): the predictor MLP (with
            BatchNorm, SyncBatchNorm under DDP; it lives in the model) applied to the encoder outputs.
        z1, z2: the encoder outputs of view 1 and view 2; they are detached here (stop-gradient).
    Output: ``{"simsiam_loss": scalar, "negatives_per_anchor": 0.0}`` (fp32, fp64 for fp64 inputs); the
    zero says what it is: SimSiam uses no negatives, so neither gathering nor batch size adds any.

    DECA eq. 5 with :math:`\mathcal{D}(x, y) = -\frac{x \cdot y}{\|x\|_2 \|y\|_2}` and the mean over the
    global batch (DECA sums over the batch: B times this, a factor its weight lambda absorbs):

    .. math:: \ell_i = \tfrac12 \mathcal{D}(p_{1,i}, \mathrm{stopgrad}(z_{2,i})) + \tfrac12 \mathcal{D}(p_{2,i}, \mathrm{stopgrad}(z_{1,i}))

    Reading chosen: DECA prints ``D(h_i, stopgrad(z~_i)) + D(h~_i, stopgrad(z_i))`` with ``z_i = f(h_i)`` the
    *predictor* output; taken literally no gradient would ever reach the predictor, which would stay at its
    random initialisation. The text cites SimSiam (Chen & He 2020) for "a predictor and stop gradient", and
    there the gradient goes through the prediction and stops at the encoder output of the other view. So
    this loss takes SimSiam's names: the method passes ``p = predictor(h)`` and ``z = h``. (The formula is
    the same for both readings; only which tensors the method passes differs.)

    Under DDP there is nothing to gather: each rank's mean is exact, and with a different number of documents
    per rank the local sum is scaled by ``W / (documents on all ranks)`` (one small exchange of counts, so
    every rank must call it) so that DDP's average is the global mean.

    Siblings: :class:`~lit_docemb.losses.nt_xent.NTXentLoss` is DECA's other objective (eq. 4), with
    in-batch negatives; this one needs no large batch, which is why DECA found it better at batch 2.
    """

    def forward(self, p1: Tensor, p2: Tensor, z1: Tensor, z2: Tensor) -> dict[str, Tensor]:
        if p1.ndim != 2 or not p1.shape == p2.shape == z1.shape == z2.shape:
            raise ValueError(f"need p1, p2, z1, z2 of one shape (B, D), got "
                             f"{[tuple(x.shape) for x in (p1, p2, z1, z2)]}")
        with full_precision(p1.device):
            p1, p2 = fp32(p1, normalize=True), fp32(p2, normalize=True)  # (B, D)
            z1, z2 = fp32(z1.detach(), normalize=True), fp32(z2.detach(), normalize=True)  # stop-gradient
            terms = -0.5 * ((p1 * z2).sum(1) + (p2 * z1).sum(1))  # (B,)
            loss = global_mean(terms, global_count(terms.new_tensor(float(len(terms)))))
        return {"simsiam_loss": loss, "negatives_per_anchor": terms.new_zeros((), dtype=torch.float32)}
