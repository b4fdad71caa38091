"""InfoNCE over the batch gathered from all devices (DocSplit, Graph-RoBERTa)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.distributed import (
    gather_no_grad,
    gather_with_grad,
    row_layout,
    world_size,
)
from lit_docemb.errors import require
from lit_docemb.losses.common import full_precision, mean_or_zero


class InfoNCELoss(nn.Module):
    r"""InfoNCE of anchors against the positives and hard negatives of the whole (all-device) batch.

    Inputs:
        anchors: (B, D) embeddings of the first view of B documents (one rank's share of the batch).
        candidates: (M, D), M = B*(1+k): rows ``0..B-1`` are the positives of the anchors, in order; the
            other rows are hard negatives (any number, any order).
        anchor_ids, candidate_ids: optional (B,) / (M,) int64 document ids. Any candidate with the anchor's id
            other than its own positive is masked out (-inf), so a document met twice in the global batch is
            never its own negative. Give ``candidate_ids`` when there are hard negatives; missing
            ``anchor_ids`` are read from ``candidate_ids[:B]``, missing ``candidate_ids`` from ``anchor_ids``.
    Output: ``{"info_nce_loss": scalar, "negatives_per_anchor": scalar}`` (fp32); the second is the mean, over
    this rank's anchors (both directions when symmetric), of the unmasked candidates other than the positive.

    With ``C`` the candidates of all W ranks gathered (W*M rows, rank 0's first) and ``r`` this rank, the
    positive of local anchor ``i`` is ``C[r*M + i]`` and

    .. math:: \ell_i = -\log \frac{\exp(s(a_i, C_{rM+i})/\tau)}{\sum_{j \notin \mathrm{mask}(i)} \exp(s(a_i, C_j)/\tau)}

    with ``s`` the cosine (``similarity="cos"``: DocSplit §4.1 uses tau = 0.05 "following Gao et al. 2021",
    i.e. SimCSE's cosine; DocSplit prints no formula) or the dot product (Graph-RoBERTa eq. 5, which has no
    temperature: ``temperature=1.0``).

    ``symmetric=True`` is Graph-RoBERTa eq. 5-6. Reading chosen: ``ell(D~_i)`` scores view ``D~_i`` (anchor)
    against the second views ``D~'_j`` of all N documents, ``ell(D~'_i)`` scores ``D~'_i`` (positive) against
    the first views ``D~_j`` of all N, and eq. 6 is ``1/(2N) sum_i ell(D~_i) + ell(D~'_i)``, i.e. the mean
    of the two directional means, N being the global batch W*B. Here the reverse direction scores the
    local positives ``candidates[:B]`` against the gathered anchors (W*B rows, label ``r*B + i``, same
    masking); hard negatives (not in eq. 5; §3.3 adds BM25 negatives) enter the forward direction only.

    Why a local loss is exact under DDP: the loss is the mean over the *local* anchors, each scored against
    all W*M candidates gathered with autograd. The gather's backward sums over ranks the gradient every rank
    computed for each slice, so rank r's backward yields the gradient of ``sum_s L_s`` (all ranks' local
    losses) through the embeddings computed on rank r; DDP's gradient average then gives
    ``1/W * d(sum_s L_s)/d theta``, the gradient of the global mean loss over W*B anchors. Computing that
    global loss on every rank instead would count each term W times (each rank's copy sends gradient through
    the gather), a gradient W times too large; a gather without gradient would drop the terms through other
    ranks' candidates. Labels are offset by ``r*M`` so they never collide across ranks. Ranks may hold
    different numbers of documents (a collator that dropped unusable ones): labels are then offset by the
    rows of the lower ranks and the local mean is weighted by ``W*B_r / sum_s B_s``, which keeps the
    DDP-averaged gradient equal to that of the global mean.

    Siblings: sentence-transformers' MultipleNegativesRankingLoss is the non-symmetric cosine case
    (scale = 1/tau); DocSplit adds :class:`~lit_docemb.losses.masked_lm.MaskedLMLoss` with weight 0.1.
    DECA's NT-Xent (also negatives within the same view) and CoLDE's supervised contrastive loss differ in
    their negative sets and live in their own files.

    Args:
        temperature: Divides the similarities (tau). 0.05 for DocSplit; 1.0 reproduces Graph-RoBERTa eq. 5.
        similarity: ``"cos"`` normalises the embeddings first, ``"dot"`` uses them as they are.
        symmetric: Average with the reverse direction (positives against anchors), Graph-RoBERTa eq. 6.
        gather_across_devices: Score against the candidates of all ranks; ``False`` uses local ones only.
    """

    def __init__(
        self,
        temperature: float = 0.05,
        similarity: Literal["cos", "dot"] = "cos",
        symmetric: bool = False,
        gather_across_devices: bool = True,
    ) -> None:
        super().__init__()
        require(temperature > 0, "temperature", "> 0", temperature)
        require(similarity in ("cos", "dot"), "similarity", "'cos' or 'dot'", similarity)
        self.temperature = temperature
        self.similarity = similarity
        self.symmetric = symmetric
        self.gather_across_devices = gather_across_devices

    def forward(
        self,
        anchors: Tensor,
        candidates: Tensor,
        anchor_ids: Tensor | None = None,
        candidate_ids: Tensor | None = None,
    ) -> dict[str, Tensor]:
        with full_precision(anchors.device):  # under bf16 autocast the matmul would otherwise run in bf16
            return self._forward(anchors, candidates, anchor_ids, candidate_ids)

    def _forward(self, anchors: Tensor, candidates: Tensor, anchor_ids: Tensor | None,
                 candidate_ids: Tensor | None) -> dict[str, Tensor]:
        num_anchors, num_candidates = anchors.shape[0], candidates.shape[0]
        if anchors.ndim != 2 or candidates.ndim != 2 or anchors.shape[1] != candidates.shape[1]:
            raise ValueError(f"need anchors (B, D) and candidates (M, D), got {anchors.shape}, {candidates.shape}")
        if num_candidates < num_anchors:
            raise ValueError(f"need the B={num_anchors} positives first in candidates, got {num_candidates} rows")
        anchor_ids, candidate_ids = self._resolve_ids(num_anchors, num_candidates, anchor_ids, candidate_ids)
        gather, gather_ids = (gather_with_grad, gather_no_grad) if self.gather_across_devices else (_same, _same)
        layout = row_layout if self.gather_across_devices else (lambda n, device: (0, n))
        anchors, candidates = self._prepare(anchors), self._prepare(candidates)  # (B, D), (M, D) fp32
        candidate_offset, _ = layout(num_candidates, anchors.device)
        anchor_offset, total_anchors = layout(num_anchors, anchors.device)
        loss, negatives = self._direction(
            anchors,
            gather(candidates),  # (W*M, D)
            anchor_ids,
            None if candidate_ids is None else gather_ids(candidate_ids),  # (W*M,)
            candidate_offset,
        )
        if self.symmetric:
            reverse, reverse_negatives = self._direction(
                candidates[:num_anchors],
                gather(anchors),  # (W*B, D)
                None if candidate_ids is None else candidate_ids[:num_anchors],
                None if anchor_ids is None else gather_ids(anchor_ids),  # (W*B,)
                anchor_offset,
            )
            loss, negatives = (loss + reverse) / 2, torch.cat([negatives, reverse_negatives])
        if self.gather_across_devices and total_anchors != num_anchors * world_size():
            # Unequal local batches: weight the local mean by W*B_r/sum(B) so that DDP's average over
            # ranks is still the mean over all anchors of the global batch.
            loss = loss * (num_anchors * world_size() / total_anchors)
        return {"info_nce_loss": loss, "negatives_per_anchor": mean_or_zero(negatives)}

    def _prepare(self, x: Tensor) -> Tensor:
        """Casts to at least fp32 (bf16/fp16 embeddings give fp32 logits), normalises for cosine."""
        x = x.to(torch.promote_types(x.dtype, torch.float32))
        return F.normalize(x, dim=-1) if self.similarity == "cos" else x

    def _direction(
        self, queries: Tensor, keys: Tensor, query_ids: Tensor | None, key_ids: Tensor | None, offset: int
    ) -> tuple[Tensor, Tensor]:
        """Mean cross-entropy of queries (B, D) over keys (K, D); query i's positive is key ``offset + i``.
        Also returns the (B,) number of negatives of each query."""
        if queries.shape[0] == 0:  # this rank lost all its documents: it still took part in the gathers
            return keys.sum() * 0.0, keys.new_zeros(0)
        labels = offset + torch.arange(queries.shape[0], device=queries.device)  # (B,)
        logits = queries @ keys.T / self.temperature  # (B, K)
        negatives = torch.full_like(labels, keys.shape[0] - 1)  # (B,)
        if query_ids is not None and key_ids is not None:
            same_document = query_ids[:, None] == key_ids[None, :]  # (B, K)
            same_document[torch.arange(len(labels), device=labels.device), labels] = False
            logits = logits.masked_fill(same_document, float("-inf"))
            negatives = negatives - same_document.sum(1)
        return F.cross_entropy(logits, labels), negatives

    @staticmethod
    def _resolve_ids(
        num_anchors: int, num_candidates: int, anchor_ids: Tensor | None, candidate_ids: Tensor | None
    ) -> tuple[Tensor | None, Tensor | None]:
        if candidate_ids is None and anchor_ids is not None:
            if num_candidates != num_anchors:
                raise ValueError("candidate_ids are needed to mask documents when there are hard negatives")
            candidate_ids = anchor_ids
        if anchor_ids is None and candidate_ids is not None:
            anchor_ids = candidate_ids[:num_anchors]
        if anchor_ids is not None and (anchor_ids.shape != (num_anchors,) or candidate_ids.shape != (num_candidates,)):
            raise ValueError(f"need ids of shape ({num_anchors},), ({num_candidates},), got "
                             f"{tuple(anchor_ids.shape)}, {tuple(candidate_ids.shape)}")
        return anchor_ids, candidate_ids


def _same(x: Tensor) -> Tensor:
    return x
