"""Loading a method's weights from a Lightning checkpoint, and the class an import path names."""

from __future__ import annotations

import importlib
import logging

import lightning as L
import torch

log = logging.getLogger(__name__)


def class_at(path: str | None):
    """The class an import path such as ``lit_docemb.methods.DocSplit`` names (None if it names none)."""
    if not path or "." not in path:
        return None
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


def load_method_checkpoint(backbone: L.LightningModule, checkpoint: str) -> None:
    """Loads a method's weights from a Lightning checkpoint of that method, or from a fine-tuning wrapper's
    checkpoint around it (its ``backbone.*`` weights), weights only (no pickled code). Extra weights (e.g. a
    pretraining head) are ignored; missing ones are an error."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    wrapper = any(k.startswith("backbone.") for k in state)
    if wrapper and not any(k.startswith("backbone.") for k in backbone.state_dict()):  # a wrapper's backbone
        state = {k[len("backbone."):]: v for k, v in state.items() if k.startswith("backbone.")}
    try:
        missing, unexpected = backbone.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shapes differ
        raise ValueError(f"checkpoint {checkpoint} does not fit {type(backbone).__name__} as configured in "
                         f"the config: {err}") from err
    if missing:
        raise ValueError(f"checkpoint {checkpoint} is not a {type(backbone).__name__} checkpoint of this "
                         f"architecture: {len(missing)} weights missing (first: {missing[0]})")
    log.info("loaded %s (ignored %d extra weights)", checkpoint, len(unexpected))
