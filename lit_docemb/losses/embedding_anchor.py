"""Distance between a trained encoder's embeddings and a frozen starting encoder's embeddings of the same input."""

from __future__ import annotations

from torch import Tensor, nn

from lit_docemb.losses.common import fp32, full_precision, global_count, global_mean


class EmbeddingAnchorLoss(nn.Module):
    r"""Keeps embeddings close to fixed targets: the starting encoder's vectors of the same inputs.

    Inputs (both (N, D), one rank's rows, any float dtype):
        embeddings: the trained encoder's pooled outputs (with gradient).
        targets: a frozen copy of the starting encoder's pooled outputs of the same inputs; detached here.
    Output: ``{"anchor_loss": scalar}`` (fp32, fp64 for fp64 inputs), the mean over the rows of all ranks of

    .. math:: \ell_i = 1 - \cos(e_i, t_i) \quad (\texttt{cosine}) \qquad \ell_i = \tfrac1D \|e_i - t_i\|_2^2 \quad (\texttt{mse})

    The idea is distillation from the model training starts from, on the representation rather than the
    weights: Learning without Forgetting (Li & Hoiem 2016) keeps a network's old outputs on new data, L2-SP
    (Xuhong et al. 2018) keeps its weights near the starting point; this term keeps the embeddings the
    downstream tasks read. ``cosine`` leaves norms free (retrieval and clustering read directions); ``mse``
    keeps the vectors themselves. Under DDP each rank's rows are its own (no gather: the term is per row); with
    unequal rows per rank the local sum is scaled so that DDP's average is the global mean (one small exchange
    of counts, as :class:`~lit_docemb.losses.sim_siam.SimSiamLoss` does).

    Siblings: :class:`~lit_docemb.losses.sim_siam.SimSiamLoss` also compares two vectors of one input with a
    stop-gradient on one side, but both come from the trained model; here the target comes from a frozen one.

    Args:
        distance: ``"cosine"`` or ``"mse"``.
    """

    def __init__(self, distance: str = "cosine") -> None:
        super().__init__()
        if distance not in ("cosine", "mse"):
            raise ValueError(f"distance must be 'cosine' or 'mse', got {distance!r}")
        self.distance = distance

    def forward(self, embeddings: Tensor, targets: Tensor) -> dict[str, Tensor]:
        if embeddings.ndim != 2 or embeddings.shape != targets.shape:
            raise ValueError(f"need embeddings and targets of one shape (N, D), got {tuple(embeddings.shape)} and "
                             f"{tuple(targets.shape)}")
        cosine = self.distance == "cosine"
        with full_precision(embeddings.device):
            trained, fixed = fp32(embeddings, normalize=cosine), fp32(targets.detach(), normalize=cosine)  # (N, D)
            terms = 1.0 - (trained * fixed).sum(1) if cosine else (trained - fixed).pow(2).mean(1)  # (N,)
            loss = global_mean(terms, global_count(terms.new_tensor(float(len(terms)))))
        return {"anchor_loss": loss}
