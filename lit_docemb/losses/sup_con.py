"""Supervised contrastive loss over the batch gathered from all devices (CoLDE, Khosla et al. 2020)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from lit_docemb.distributed import gather_no_grad, gather_with_grad, row_layout
from lit_docemb.errors import require
from lit_docemb.losses.common import (
    fp32,
    full_precision,
    global_count,
    global_mean,
    mean_or_zero,
)


class SupConLoss(nn.Module):
    r"""Every other item with the anchor's label in the gathered batch is a positive; all others are negatives.

    Inputs:
        features: (N_r, D) embeddings on this rank, any float dtype: for CoLDE the 2 section embeddings of each
            of its documents (rows in any order); N_r may differ between ranks.
        labels: (N_r,) int64 class labels, gathered with the features (both sections of a document carry its
            label, so they are positives of each other).
        ids: optional (N_r,) int64 document ids, gathered too. A pair with the same id but different labels
            (inconsistent data) is masked out of the denominator: the same document is never a negative. With
            consistent labels the same document on two ranks is simply a positive, and ``ids`` change nothing.
    Output: ``{"supcon_loss": scalar, "negatives_per_anchor": scalar, "anchors_without_positive": scalar}``
    (loss fp32, fp64 for fp64 inputs); ``negatives_per_anchor`` is the mean over this rank's counted anchors
    of the items with another label, ``anchors_without_positive`` the number, over all ranks, of anchors
    whose label occurs nowhere else in the gathered batch: they have no term and are left out of the mean.

    CoLDE §3.3 (Khosla et al. 2020, eq. 2, ``L_out``) over the A = sum_r N_r gathered items:

    .. math:: \ell_i = \frac{-1}{|P(i)|} \sum_{p \in P(i)} \log \frac{\exp(z_i \cdot z_p / \tau)}{\sum_{k \ne i} \exp(z_i \cdot z_k / \tau)}, \qquad L = \frac{1}{|\{i : P(i) \ne \emptyset\}|} \sum_{i : P(i) \ne \emptyset} \ell_i

    with ``P(i) = {p != i : y_p = y_i}``. Readings chosen where the PDF text is ambiguous: (1) the printed
    factor ``-1/(2N y_i - 1)`` lost a subscript; it is Khosla's ``-1/(2 N_{y_i} - 1)``, N_{y_i} the documents
    labelled y_i, i.e. ``-1/|P(i)|``. (2) The denominator is the equation's ``sum_{k != i}``, positives
    included; the prose ("a summation over the negative samples") would be Khosla's excluded variant. (3)
    ``z`` is L2-normalised (``similarity="cos"``, as in Khosla's paper that CoLDE takes the loss from; CoLDE
    only says "inner (dot) product" of projection outputs, ``similarity="dot"``). (4) The mean over anchors,
    not CoLDE's sum (a constant factor 2N under Adam), so the scale does not change with the batch size.

    Exact under DDP like :class:`~lit_docemb.losses.info_nce.InfoNCELoss`: local anchors against the features
    of all ranks gathered with autograd, self at ``offset + i``, labels gathered without gradient, and the
    local sum scaled by ``W / (anchors with a positive on all ranks)`` -- so any distribution of labels over
    ranks gives the loss and gradients of one process on the concatenated batch.

    Siblings: with one positive per anchor (labels = document ids of two views) it is
    :class:`~lit_docemb.losses.nt_xent.NTXentLoss` with ``denominator="simclr"``; InfoNCE has one positive
    and candidates in a separate list.

    Args:
        temperature: tau; CoLDE §4.1.2 fixes 0.5.
        similarity: ``"cos"`` normalises the features first, ``"dot"`` uses them as they are.
        gather_across_devices: Use the items of all ranks as positives and negatives; ``False``: local only.
    """

    def __init__(
        self,
        temperature: float = 0.5,
        similarity: Literal["cos", "dot"] = "cos",
        gather_across_devices: bool = True,
    ) -> None:
        super().__init__()
        require(temperature > 0, "temperature", "> 0", temperature)
        require(similarity in ("cos", "dot"), "similarity", "'cos' or 'dot'", similarity)
        self.temperature = temperature
        self.similarity = similarity
        self.gather_across_devices = gather_across_devices

    def forward(self, features: Tensor, labels: Tensor, ids: Tensor | None = None) -> dict[str, Tensor]:
        if features.ndim != 2 or labels.shape != features.shape[:1] or (ids is not None and ids.shape != labels.shape):
            raise ValueError(f"need features (N, D), labels (N,) and ids (N,) or None, got {tuple(features.shape)}, "
                             f"{tuple(labels.shape)}, {None if ids is None else tuple(ids.shape)}")
        across = self.gather_across_devices
        gather, gather_ids = (gather_with_grad, gather_no_grad) if across else (_same, _same)
        offset, _ = row_layout(len(labels), features.device) if across else (0, len(labels))
        all_labels = gather_ids(labels)  # (A,)
        excluded, positive = self._pairs(labels, all_labels, ids, None if ids is None else gather_ids(ids), offset)
        num_positives = positive.sum(1)  # (N_r,)
        keep = num_positives > 0  # the others have no term (and no log_softmax: a row may be all -inf)
        counts = global_count(torch.stack([keep.sum(), (~keep).sum()]), across)  # anchors with / without
        with full_precision(features.device):
            features = fp32(features, normalize=self.similarity == "cos")  # (N_r, D)
            logits = features[keep] @ gather(features).T / self.temperature  # (N_r', A)
            log_prob = logits.masked_fill(excluded[keep], float("-inf")).log_softmax(dim=1)
            terms = -torch.where(positive[keep], log_prob, 0.0).sum(1) / num_positives[keep]  # (N_r',)
            loss = global_mean(terms, counts[0].to(terms.dtype), across)
        return {
            "supcon_loss": loss,
            "negatives_per_anchor": mean_or_zero((~excluded & ~positive)[keep].sum(1)),
            "anchors_without_positive": counts[1].float(),
        }

    @staticmethod
    def _pairs(labels: Tensor, all_labels: Tensor, ids: Tensor | None, all_ids: Tensor | None, offset: int):
        """(N_r, A) masks: pairs left out of the denominator (the anchor itself at ``offset + i``, and the same
        document under another label), and positives (same label, not left out)."""
        rows = torch.arange(len(labels), device=labels.device)
        excluded = torch.zeros(len(labels), len(all_labels), dtype=torch.bool, device=labels.device)
        excluded[rows, offset + rows] = True
        same_label = labels[:, None] == all_labels[None, :]
        if ids is not None:
            excluded |= (ids[:, None] == all_ids[None, :]) & ~same_label
        return excluded, same_label & ~excluded


def _same(x: Tensor) -> Tensor:
    return x
