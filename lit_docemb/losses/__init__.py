"""Losses: embeddings (or logits) in, a dict of named ``*_loss`` terms out; one loss per file.

The contrastive losses also return ``negatives_per_anchor`` (not a loss term; log it as
``train/negatives_per_anchor``): how many items each anchor was actually contrasted with. Gathering across
devices makes it about W times larger; gradient accumulation does not add a single negative (each
micro-batch's loss sees only that micro-batch); GradCache does, since the whole batch enters one loss.
"""

from lit_docemb.losses.cosine_similarity import CosineSimilarityLoss
from lit_docemb.losses.coupled_margin import CoupledMarginLoss
from lit_docemb.losses.embedding_anchor import EmbeddingAnchorLoss
from lit_docemb.losses.info_nce import InfoNCELoss
from lit_docemb.losses.masked_lm import MaskedLMLoss
from lit_docemb.losses.nt_xent import NTXentLoss
from lit_docemb.losses.sim_siam import SimSiamLoss
from lit_docemb.losses.sup_con import SupConLoss

__all__ = ["CosineSimilarityLoss", "CoupledMarginLoss", "EmbeddingAnchorLoss", "InfoNCELoss", "MaskedLMLoss", "NTXentLoss", "SimSiamLoss", "SupConLoss"]
