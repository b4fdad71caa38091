"""Doc2VecC's CBOW objective with negative sampling (DECA eq. 2-3, Chen 2017, Mikolov et al. 2013)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.losses.common import fp32, full_precision


class NegativeSamplingLoss(nn.Module):
    r"""Negative-sampling estimate of eq. 3, ``-sum_t log P(w^t | c^t, x)``, per document, averaged over documents.

    Inputs:
        hidden: (B, S, D) ``U c^t + h`` of S sampled target positions per document (eq. 2's score input).
        targets: (B, S, D) output vectors ``v_{w^t}`` of the target words.
        noise: (B, S, K, D) output vectors of K noise words per target.
        mask: (B, S) bool, real target positions (a short document has fewer than S).
    Output: ``{"doc2vecc_loss": scalar}`` (fp32),

    .. math:: \ell_d^{(i)} = \sum_t \Big[ -\log\sigma(v_{w^t}^\top h^t) - \sum_{k=1}^K \log\sigma(-v_{n_k}^\top h^t) \Big]

    summed over a document's sampled targets and averaged over the documents that have one (DECA sums over the
    batch; the mean keeps the scale independent of the batch size, a factor λ absorbs). Eq. 3 sums over all T_i
    positions; sampling S of them per step is Doc2VecC's stochastic estimate of it.

    Siblings: this is the backbone's own loss; :class:`~lit_docemb.losses.nt_xent.NTXentLoss` and
    :class:`~lit_docemb.losses.sim_siam.SimSiamLoss` are DECA's contrastive terms added with weight λ (eq. 6).
    """

    def forward(self, hidden: Tensor, targets: Tensor, noise: Tensor, mask: Tensor) -> dict[str, Tensor]:
        if hidden.shape != targets.shape or noise.shape[:2] != hidden.shape[:2] or mask.shape != hidden.shape[:2]:
            raise ValueError(f"need hidden, targets (B, S, D), noise (B, S, K, D), mask (B, S); got "
                             f"{[tuple(x.shape) for x in (hidden, targets, noise, mask)]}")
        with full_precision(hidden.device):
            hidden, targets, noise = fp32(hidden), fp32(targets), fp32(noise)
            positive = F.logsigmoid((hidden * targets).sum(-1))  # (B, S)
            negative = F.logsigmoid(-(noise @ hidden.unsqueeze(-1)).squeeze(-1)).sum(-1)  # (B, S)
            per_document = (-(positive + negative) * mask).sum(1)  # (B,)
            documents = mask.any(1)
            loss = per_document[documents].sum() / documents.sum().clamp(min=1)
        return {"doc2vecc_loss": loss}
