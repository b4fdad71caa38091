"""NT-Xent of a document against its augmentation over the batch gathered from all devices (DECA, SimCLR)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
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


class NTXentLoss(nn.Module):
    r"""DECA's NT-Xent (eq. 4), or SimCLR's symmetric 2N-view form, with the negatives of all ranks.

    Inputs:
        h: (B, D) embeddings of B documents (one rank's share of the batch), any float dtype.
        h_aug: (B, D) embeddings of their augmentations, row i being the augmentation of document i.
        ids: optional (B,) int64 document ids, gathered with the embeddings. Views of a document that occurs
            more than once in the global batch (on one rank or on two) are masked out (-inf), never negatives.
    Output: ``{"ntxent_loss": scalar, "negatives_per_anchor": scalar}`` (fp32, or fp64 for fp64 inputs);
    ``negatives_per_anchor`` is the mean, over this rank's anchors, of the negatives in the denominator.

    With N documents in the global batch (B summed over ranks), ``s(x, y) = cos(x, y) / tau`` and the mean over
    the global batch (DECA sums, ``l_c = sum_i l_c^(i)``: N times this, a factor its weight lambda absorbs):

    ``denominator="paper"`` is DECA eq. 4 as printed, a loss of the N anchors h_i against the N augmentations:

    .. math:: \ell_i = -\log \frac{\exp s(h_i, \tilde h_i)}{\sum_{k=1}^{N} \mathbb{1}_{[k \ne i]} \exp s(h_i, \tilde h_k)}

    Reading chosen: the indicator removes the positive itself from the denominator, which then holds the
    N - 1 negatives ``<D_i, D~_k>`` of the text and nothing else (the "decoupled" contrastive loss of Yeh et
    al. 2022 restricted to cross-view negatives). It is bounded (``l_i >= log(N-1) - 2/tau``) but can be
    negative; an anchor left without negatives (N = 1, or only copies of itself) has no defined term and is
    left out of the mean. The other plausible reading, SimCLR's indicator ``k != i`` copied over from the 2N
    views where it only removed the self-similarity, keeps the positive in the denominator ("identify D~_i
    out of the augmented documents"); that one-direction loss is exactly
    ``InfoNCELoss(temperature, similarity="cos")(h, h_aug)``, so it is not repeated here.

    ``denominator="simclr"`` is NT-Xent of Chen et al. 2020: the 2N views ``[h; h_aug]`` are all anchors, each
    scored against the other 2N - 1 (its positive and 2N - 2 negatives, both views of every other document;
    with ``ids``, views of the same document other than the positive are masked):

    .. math:: \ell_a = -\log \frac{\exp s(v_a, v_{p(a)})}{\sum_{k=1}^{2N} \mathbb{1}_{[k \ne a]} \exp s(v_a, v_k)}, \quad L = \frac{1}{2N} \sum_{a=1}^{2N} \ell_a

    Default: ``"paper"``: DECA's configs reproduce DECA, whose printed equation is the specification, and read
    literally it is a sound loss, not a typo that breaks training. Use ``"simclr"`` for the standard NT-Xent
    (more negatives per anchor from the same batch: 2N - 2 instead of N - 1).

    Exact under DDP the way :class:`~lit_docemb.losses.info_nce.InfoNCELoss` is: local anchors, candidates
    gathered with autograd, positives at ``offset + i`` where ``offset`` counts the rows of lower ranks
    (ranks may hold different B), and the local sum scaled by ``W / (anchors on all ranks)``.

    Siblings: InfoNCE scores anchors against the other view (plus hard negatives) with the positive in the
    denominator; :class:`~lit_docemb.losses.sim_siam.SimSiamLoss` is DECA's other objective (eq. 5, no
    negatives); :class:`~lit_docemb.losses.sup_con.SupConLoss` is the simclr form with label-defined positives.

    Args:
        temperature: tau dividing the cosine; DECA Appendix A.3.2 uses 1.0.
        denominator: ``"paper"`` (DECA eq. 4, N - 1 cross-view negatives, positive excluded) or ``"simclr"``
            (2N - 2 negatives from both views, positive included, both views as anchors).
        gather_across_devices: Score against the documents of all ranks; ``False`` uses local ones only.
    """

    def __init__(
        self,
        temperature: float = 1.0,
        denominator: Literal["paper", "simclr"] = "paper",
        gather_across_devices: bool = True,
    ) -> None:
        super().__init__()
        require(temperature > 0, "temperature", "> 0", temperature)
        require(denominator in ("paper", "simclr"), "denominator", "'paper' or 'simclr'", denominator)
        self.temperature = temperature
        self.denominator = denominator
        self.gather_across_devices = gather_across_devices

    def forward(self, h: Tensor, h_aug: Tensor, ids: Tensor | None = None) -> dict[str, Tensor]:
        if h.ndim != 2 or h.shape != h_aug.shape:
            raise ValueError(f"need h and h_aug of the same shape (B, D), got {tuple(h.shape)}, {tuple(h_aug.shape)}")
        if ids is not None and ids.shape != h.shape[:1]:
            raise ValueError(f"need ids of shape ({h.shape[0]},), got {tuple(ids.shape)}")
        across = self.gather_across_devices
        gather, gather_ids = (gather_with_grad, gather_no_grad) if across else (_same, _same)
        offset, total = row_layout(h.shape[0], h.device) if across else (0, h.shape[0])
        all_ids = None if ids is None else gather_ids(ids)  # (N,)
        with full_precision(h.device):
            h, h_aug = fp32(h, normalize=True), fp32(h_aug, normalize=True)  # (B, D)
            if self.denominator == "paper":  # anchors left without negatives have no term: not counted
                terms, negatives = self._paper(h, gather(h_aug), ids, all_ids, offset)  # (B',), (B,)
                counted = global_count((negatives > 0).sum().to(terms.dtype), across)
            else:
                terms, negatives = self._simclr(h, h_aug, gather(h), gather(h_aug), ids, all_ids, offset, total)
                counted = terms.new_tensor(2.0 * total)
            loss = global_mean(terms, counted, across)
        return {"ntxent_loss": loss, "negatives_per_anchor": mean_or_zero(negatives)}

    def _paper(self, h: Tensor, all_aug: Tensor, ids: Tensor | None, all_ids: Tensor | None, offset: int):
        """DECA eq. 4: h (B, D) against the N augmentations, positive at ``offset + i``, not in the denominator.
        Returns the terms of the B' <= B anchors that have a negative, and the negatives of all B.
        Computed by :class:`_PaperTerms` a block of anchors at a time."""
        positive = offset + torch.arange(h.shape[0], device=h.device)  # (B,)
        terms, negatives = _PaperTerms.apply(h, all_aug, positive, ids, all_ids, self.temperature)
        return terms[negatives > 0], negatives

    def _simclr(self, h, h_aug, all_h, all_aug, ids, all_ids, offset: int, total: int):
        """SimCLR: the 2B local views against all 2N views; view ``a``'s positive is the other view of its document."""
        local_rows = offset + torch.arange(h.shape[0], device=h.device)  # rows of the local documents among N
        self_index = torch.cat([local_rows, total + local_rows])  # (2B,) in [all_h; all_aug]
        positive = torch.cat([total + local_rows, local_rows])  # (2B,)
        logits = torch.cat([h, h_aug]) @ torch.cat([all_h, all_aug]).T / self.temperature  # (2B, 2N)
        rows = torch.arange(logits.shape[0], device=h.device)
        masked = torch.zeros_like(logits, dtype=torch.bool)
        if ids is not None:
            masked = torch.cat([ids, ids])[:, None] == torch.cat([all_ids, all_ids])[None, :]  # same document
            masked[rows, positive] = False
        masked[rows, self_index] = True
        terms = F.cross_entropy(logits.masked_fill(masked, float("-inf")), positive, reduction="none")
        return terms, (~masked).sum(1) - 1


#: Logits held at once by :class:`_PaperTerms` (a block of anchor rows × N): 8 MB in fp32.
BLOCK_LOGITS = 2**21
#: Up to this many logits (B × N; 64 MB in fp32, DECA's batch of 4,096 on one device), :class:`_PaperTerms` keeps
#: forward's softmax blocks for backward instead of recomputing them.
KEPT_SOFTMAX = 2**24


def _anchor_blocks(num_anchors: int, num_candidates: int) -> list[slice]:
    rows = max(1, BLOCK_LOGITS // max(1, num_candidates))
    return [slice(start, start + rows) for start in range(0, num_anchors, rows)]


def _id_order(all_ids: Tensor | None) -> tuple[Tensor, Tensor] | None:
    """The candidates' ids sorted, and the order that sorts them (what :func:`_not_negatives` searches)."""
    if all_ids is None:
        return None
    order = all_ids.argsort(stable=True)
    return order, all_ids[order]


def _not_negatives(positive: Tensor, ids: Tensor | None, all_ids: Tensor | None, id_order: tuple[Tensor, Tensor] | None,
                   num_candidates: int, rows: slice) -> tuple[Tensor, Tensor, Tensor]:
    """The logits of the anchors ``rows`` that are not negatives, as (row, column) index pairs within the block --
    each anchor's positive and, with ids, every augmentation of the same document (a handful, not a (b, N) mask) --
    and the negatives of each anchor (b,). ``id_order`` is :func:`_id_order` of ``all_ids``."""
    pos = positive[rows]
    local = torch.arange(len(pos), device=pos.device)
    if ids is None:
        return local, pos, torch.full_like(pos, num_candidates - 1)
    order, sorted_ids = id_order
    left = torch.searchsorted(sorted_ids, ids[rows])
    same = torch.searchsorted(sorted_ids, ids[rows], right=True) - left  # (b,) augmentations of the same document
    row = torch.repeat_interleave(local, same)
    first = torch.cumsum(same, 0) - same
    column = order[torch.repeat_interleave(left - first, same) + torch.arange(len(row), device=pos.device)]
    positive_elsewhere = (all_ids[pos] != ids[rows]).long()  # a positive that is not among them (not in DECA)
    return torch.cat([local, row]), torch.cat([pos, column]), num_candidates - same - positive_elsewhere


def _block_logits(h: Tensor, all_aug: Tensor, not_negative: tuple[Tensor, Tensor], temperature: float, rows: slice,
                  fill: float) -> Tensor:
    """Logits (b, N) of the anchors ``rows``, ``fill`` where they are not negatives."""
    logits = (h[rows] / temperature) @ all_aug.T
    logits[not_negative] = fill
    return logits


class _PaperTerms(torch.autograd.Function):
    """Per-anchor terms ``logsumexp_{k negative} s_ik - s_i,pos(i)`` of DECA eq. 4 and the negatives of each anchor,
    computed over blocks of anchor rows (:data:`BLOCK_LOGITS` logits at a time). The same values and gradients as
    the (B, N) expression, without its logits, masks and softmax made at once: at DECA's batch of 4,096 these were a
    few hundred MB a step, freshly mapped and page-faulted every step on CPU. Backward reuses forward's softmax
    blocks up to :data:`KEPT_SOFTMAX` logits (one matrix product a block fewer) and recomputes them beyond. The
    logits that are not negatives (each anchor's positive, other views of its document) are set by index, not
    through a (B, N) mask. An anchor without negatives gets a finite term (its logsumexp over the dtype's most
    negative half) and no gradient; the caller leaves it out."""

    @staticmethod
    def forward(ctx, h, all_aug, positive, ids, all_ids, temperature):
        terms = h.new_empty(h.shape[0])
        negatives = torch.empty(h.shape[0], dtype=torch.long, device=h.device)
        lse = h.new_empty(h.shape[0])
        floor = torch.finfo(h.dtype).min / 2
        keep = h.shape[0] * all_aug.shape[0] <= KEPT_SOFTMAX
        ctx.softmax, id_order = [], _id_order(all_ids)
        for rows in _anchor_blocks(h.shape[0], all_aug.shape[0]):
            *not_negative, negatives[rows] = _not_negatives(positive, ids, all_ids, id_order, all_aug.shape[0], rows)
            logits = _block_logits(h, all_aug, tuple(not_negative), temperature, rows, floor)
            top = logits.amax(1, keepdim=True)
            total = logits.sub_(top).exp_().sum(1, keepdim=True)  # 0 where not a negative: exp(floor - top)
            lse[rows] = (total.log() + top).squeeze(1)  # as logsumexp, whose exponentials become the softmax
            terms[rows] = lse[rows] - (h[rows] * all_aug[positive[rows]]).sum(1) / temperature
            if keep:  # (an anchor without negatives has a uniform one and no gradient)
                ctx.softmax.append(logits.div_(total))
        ctx.save_for_backward(h, all_aug, positive, ids, all_ids, lse, negatives)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(negatives)
        return terms, negatives

    @staticmethod
    def backward(ctx, grad_terms, _grad_negatives):
        h, all_aug, positive, ids, all_ids, lse, negatives = ctx.saved_tensors
        tau = ctx.temperature
        grad_h, grad_aug = torch.zeros_like(h), torch.zeros_like(all_aug)
        id_order = None if ctx.softmax else _id_order(all_ids)
        for block, rows in enumerate(_anchor_blocks(h.shape[0], all_aug.shape[0])):
            # d term_i / d s_ik = softmax over the negatives (0 elsewhere), minus 1 at the positive
            if ctx.softmax:
                weights = ctx.softmax[block] * (grad_terms[rows, None] / tau)
            else:
                *not_negative, _ = _not_negatives(positive, ids, all_ids, id_order, all_aug.shape[0], rows)
                weights = _block_logits(h, all_aug, tuple(not_negative), tau, rows, float("-inf"))
                weights.sub_(lse[rows, None]).exp_().mul_(grad_terms[rows, None] / tau)
            weights[torch.arange(weights.shape[0], device=h.device), positive[rows]] -= grad_terms[rows] / tau
            grad_h[rows] = weights @ all_aug
            grad_aug.addmm_(weights.T, h[rows])
        return grad_h, grad_aug, None, None, None, None


def _same(x: Tensor) -> Tensor:
    return x
