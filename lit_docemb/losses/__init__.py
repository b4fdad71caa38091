"""Losses: embeddings (or logits) in, a dict of named ``*_loss`` terms out; one loss per file."""

from lit_docemb.losses.info_nce import InfoNCELoss
from lit_docemb.losses.masked_lm import MaskedLMLoss

__all__ = ["InfoNCELoss", "MaskedLMLoss"]
