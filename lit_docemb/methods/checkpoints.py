"""Reading and loading a method's weights from a Lightning checkpoint, and the class an import path names."""

from __future__ import annotations

import importlib
import logging
import pickle
import zipfile
from pathlib import Path

import lightning as L
import torch

from lit_docemb.errors import ConfigError

log = logging.getLogger(__name__)

#: What to do about a checkpoint that cannot be read, appended to every such error.
USE_ANOTHER = ("give another checkpoint of the run (its checkpoints/*.ckpt), or --ckpt_path last to take the newest "
               "intact one")


def read_checkpoint(path: str | Path, key: str = "--ckpt_path", mmap: bool = False) -> dict:
    """The Lightning checkpoint at ``path``, loaded weights-only on the CPU; a checkpoint that cannot be one (no
    file, a folder, empty, truncated, not a torch file, holding objects other than weights and plain values) is a
    :class:`~lit_docemb.errors.ConfigError` naming ``key``, the file and what to do. ``mmap`` maps the tensors
    instead of reading them (a cheap check of a large file that something else loads later)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ConfigError(f"{key}: {path} does not exist; {USE_ANOTHER}")
    if path.is_dir():
        raise ConfigError(f"{key}: {path} is a folder, not a checkpoint file; {USE_ANOTHER}")
    if path.stat().st_size == 0:
        raise ConfigError(f"{key}: {path} is empty (0 bytes; a save that never finished); {USE_ANOTHER}")
    if not zipfile.is_zipfile(path):
        raise ConfigError(f"{key}: {path} is not a torch checkpoint (not a zip archive: truncated, corrupt or "
                          f"another kind of file); {USE_ANOTHER}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:  # never take torch's advice to unpickle: it would run the file's code
        first = next((line.strip() for line in str(err).splitlines() if "GLOBAL" in line), "")
        found = f" ({first})" if first else ""
        raise ConfigError(f"{key}: {path} holds objects other than weights and plain values{found}; lit_docemb "
                          f"loads only weights-only checkpoints: {USE_ANOTHER}") from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"{key}: {path} cannot be read as a checkpoint ({reason}); {USE_ANOTHER}") from None
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise ConfigError(f"{key}: {path} is not a Lightning checkpoint (it has no state_dict); {USE_ANOTHER}")
    return checkpoint


def class_at(path: str | None):
    """The class an import path such as ``lit_docemb.methods.DocSplit`` names (None if it names none)."""
    if not path or "." not in path:
        return None
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


def load_method_checkpoint(backbone: L.LightningModule, checkpoint: str, key: str = "--ckpt_path") -> None:
    """Loads a method's weights from a Lightning checkpoint of that method, or from a fine-tuning wrapper's
    checkpoint around it (its ``backbone.*`` weights), weights only (no pickled code). Extra weights (e.g. a
    pretraining head) are ignored; missing ones are an error. An unreadable file is a ConfigError naming ``key``
    (:func:`read_checkpoint`)."""
    state = read_checkpoint(checkpoint, key)["state_dict"]
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
