"""Cosine-similarity regression over all document pairs of the gathered batch (CoLDE's −CL ablation)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lit_docemb.losses.common import fp32, full_precision, global_count, global_mean
from lit_docemb.distributed import gather_no_grad, gather_with_grad, row_layout


class CosineSimilarityLoss(nn.Module):
    r"""Squared error between the cosine similarity of two documents and whether they are similar.

    Inputs:
        features: (N_r, D) one embedding per document on this rank (any float dtype).
        labels: (N_r,) int64 similarity group of each document, gathered with the features.
    Output: ``{"cosine_loss": scalar}`` (fp32).

    CoLDE §4.5.3 replaces the supervised contrastive loss with "cosine similarity" (the siamese baselines'
    objective, e.g. S-BERT): over every ordered pair (i, k), k != i, of a local anchor i and an item k of the
    A gathered ones, :math:`L = \operatorname{mean}_{i,k} (\cos(z_i, z_k) - \mathbb{1}[y_i = y_k])^2`
    (sentence-transformers' ``CosineSimilarityLoss`` over in-batch pairs). Candidates are gathered with
    autograd and the local sum is scaled as in :class:`~lit_docemb.losses.sup_con.SupConLoss`, so the loss and
    gradients are those of one process on the concatenated batch. Sibling: SupConLoss contrasts the same
    pairs through a softmax instead of regressing each one.

    Args:
        gather_across_devices: Pair local documents with those of all ranks; ``False``: local pairs only.
    """

    def __init__(self, gather_across_devices: bool = True) -> None:
        super().__init__()
        self.gather_across_devices = gather_across_devices

    def forward(self, features: Tensor, labels: Tensor) -> dict[str, Tensor]:
        if features.ndim != 2 or labels.shape != features.shape[:1]:
            raise ValueError(f"need features (N, D) and labels (N,), got {tuple(features.shape)}, {tuple(labels.shape)}")
        across = self.gather_across_devices
        offset, _ = row_layout(len(labels), features.device) if across else (0, len(labels))
        all_labels = gather_no_grad(labels) if across else labels  # (A,)
        rows = torch.arange(len(labels), device=labels.device)
        other = torch.ones(len(labels), len(all_labels), dtype=torch.bool, device=labels.device)
        other[rows, offset + rows] = False  # (N_r, A)
        target = (labels[:, None] == all_labels[None, :]).float()
        count = global_count(other.sum().reshape(1), across)[0]
        with full_precision(features.device):
            features = fp32(features, normalize=True)
            candidates = gather_with_grad(features) if across else features
            cosine = features @ candidates.T  # (N_r, A)
            terms = (cosine - target.to(cosine.dtype))[other].square()
            loss = global_mean(terms, count.to(terms.dtype), across)
        return {"cosine_loss": loss}
