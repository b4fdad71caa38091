"""Reading a Lightning checkpoint, restoring a method from it (also a fine-tuning wrapper's backbone), and the
class an import path names."""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import pickle
import re
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
    if path.is_dir() and (path / "latest").is_file():
        return read_deepspeed_checkpoint(path, key, consolidate=not mmap)
    if path.is_dir():
        raise ConfigError(f"{key}: {path} is a folder, not a checkpoint file; {USE_ANOTHER}")
    checkpoint = _load_weights_only(path, key, mmap)
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise ConfigError(f"{key}: {path} is not a Lightning checkpoint (it has no state_dict); {USE_ANOTHER}")
    return checkpoint


def _load_weights_only(path: Path, key: str, mmap: bool = False):
    """``torch.load`` of ``path`` weights-only on the CPU, every failure a one-line :class:`ConfigError`."""
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
    return checkpoint


#: What DeepSpeed keeps in a checkpoint's model-states file besides Lightning's own entries (dropped on reading).
DEEPSPEED_ENTRIES = ("module", "buffer_names", "optimizer", "param_shapes", "frozen_param_shapes", "shared_params",
                     "frozen_param_fragments", "lr_scheduler", "data_sampler", "random_ltd", "skipped_steps",
                     "global_steps", "global_samples", "dp_world_size", "mp_world_size",
                     "checkpoint_parallel_dimensions", "ds_config", "ds_version", "csr_tensor_module_names")


def read_deepspeed_checkpoint(folder: Path, key: str = "--ckpt_path", consolidate: bool = True) -> dict:
    """A DeepSpeed ZeRO-2/3 checkpoint folder (what Lightning's ``DeepSpeedStrategy`` saves as ``x.ckpt/``) as a
    Lightning checkpoint dict: Lightning's entries from the rank-0 model-states file and, with ``consolidate``, the
    fp32 weights gathered from every rank's optimizer partition by DeepSpeed's ``zero_to_fp32`` (the same weights
    ``convert_zero_checkpoint_to_fp32_state_dict`` writes). Without ``consolidate`` (a cheap check that the folder
    is whole) ``state_dict`` holds the model-states file's own tensors (ZeRO-3: empty partitions).

    Every file is loaded weights-only, also inside ``zero_to_fp32`` (which asks for full unpickling): DeepSpeed's
    plain-data classes in its optimizer files (its ZeRO stage enum, loss-scaler records and
    fragment addresses) are the only globals
    allowed, and the ``zero_to_fp32.py`` script DeepSpeed copies into the folder is never run."""
    tag = (folder / "latest").read_text(encoding="utf-8").strip()
    shards = (folder / tag).resolve()
    if not tag or shards.parent != folder.resolve() or not shards.is_dir():
        raise ConfigError(f"{key}: {folder}/latest names {tag!r}, not a folder of the checkpoint; {USE_ANOTHER}")
    model_files = sorted(shards.glob("*model_states.pt"))
    optimizer_files = sorted(shards.glob("*optim_states.pt"))
    if not model_files or not optimizer_files:
        raise ConfigError(f"{key}: {shards} lacks DeepSpeed's model-states or optimizer-states files (a save that "
                          f"never finished); {USE_ANOTHER}")
    client = _load_weights_only(model_files[0], key, mmap=not consolidate)
    if not isinstance(client, dict) or "module" not in client:
        raise ConfigError(f"{key}: {model_files[0]} is not a DeepSpeed model-states file; {USE_ANOTHER}")
    checkpoint = {k: v for k, v in client.items() if k not in DEEPSPEED_ENTRIES}
    weights = client["module"]
    if consolidate:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        try:
            quiet = contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())
            with _weights_only_loads(), quiet[0], quiet[1]:  # its prints and progress bars
                weights = get_fp32_state_dict_from_zero_checkpoint(str(folder), tag=tag)
        except pickle.UnpicklingError as err:
            found = re.search(r"GLOBAL (\S+)", str(err))
            first = f"{found.group(1)}, " if found else ""
            raise ConfigError(f"{key}: {shards} holds objects other than weights and plain values ({first}not one "
                              "of DeepSpeed's plain-data classes); "
                              f"lit_docemb loads only weights-only checkpoints: {USE_ANOTHER}") from None
        except (RuntimeError, ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as err:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ConfigError(f"{key}: {folder} cannot be read as a DeepSpeed checkpoint ({reason}); "
                              f"{USE_ANOTHER}") from None
    # checkpoints of Lightning < 2.1 name weights through its wrapper module
    checkpoint["state_dict"] = {k.removeprefix("_forward_module."): v for k, v in weights.items()}
    return checkpoint


@contextlib.contextmanager
def _weights_only_loads():
    """Every ``torch.load`` inside the block loads weights only, whatever its caller asks for, with DeepSpeed's
    plain-data classes allowed (the weights-only unpickler builds them from their stored fields, running none of
    their code)."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    original = torch.load

    def load(*args, **kwargs):
        return original(*args, **{**kwargs, "weights_only": True})

    torch.load = load
    try:
        with torch.serialization.safe_globals([ZeroStageEnum, LossScaler, DynamicLossScaler, fragment_address]):
            yield
    finally:
        torch.load = original


def class_at(path: str | None):
    """The class an import path such as ``lit_docemb.methods.DocSplit`` names (None if it names none)."""
    if not path or "." not in path:
        return None
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


#: The entry of a fine-tuning wrapper's checkpoint that lists what its backbone method's own ``on_save_checkpoint``
#: added (DECA's and CTPE's vocabularies; none for a backbone built from its config). A wrapper's checkpoint
#: without it (saved before wrappers kept it) carries its backbone's weights only.
BACKBONE_ENTRIES = "backbone_entries"


class KeepsBackboneState:
    """What a fine-tuning wrapper (a method whose ``backbone`` is a pretraining method) keeps of its backbone in a
    checkpoint: what the backbone's own ``on_save_checkpoint`` adds, restored by its own ``on_load_checkpoint``, so
    that the wrapper's checkpoint rebuilds the backbone as the pretraining checkpoint did (DECA's word table and
    CTPE's encoder are sized by their vocabularies). A backbone built from its config alone has no such state (a
    method builds its vocabulary in its own ``setup``, which a wrapper never runs): its wrapper keeps none."""

    backbone: L.LightningModule
    _backbone_restored = False

    def restore_backbone(self, checkpoint: str) -> None:
        """The backbone as ``checkpoint`` (the ``checkpoint`` argument: a run of the backbone method, or of a
        wrapper around it) left it (:func:`restore_method`)."""
        restore_method(self.backbone, checkpoint, "model.init_args.checkpoint")
        self._backbone_restored = True

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        before = set(checkpoint)
        if self._backbone_restored:
            self.backbone.on_save_checkpoint(checkpoint)
        checkpoint[BACKBONE_ENTRIES] = sorted(set(checkpoint) - before)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        if checkpoint.get(BACKBONE_ENTRIES):
            self.backbone.on_load_checkpoint(checkpoint)
            self._backbone_restored = True


def restore_method(method: L.LightningModule, checkpoint: str, key: str = "--ckpt_path") -> None:
    """A method as its checkpoint (file or DeepSpeed folder) left it, read once, without Lightning's restore: the
    method's own ``on_load_checkpoint`` first (DECA's, CoLDE's and CTPE's vocabularies, which size their tables),
    then its weights (:func:`load_weights`). ``checkpoint`` may also be a fine-tuning wrapper's around ``method``
    (its ``backbone.*`` weights), whose :data:`BACKBONE_ENTRIES` say whether it kept anything for the method's hook.
    An unreadable file, or one the method's hook refuses, is a ConfigError naming ``key``."""
    saved = read_checkpoint(checkpoint, key)
    entries = saved.get(BACKBONE_ENTRIES)
    own = entries is None or isinstance(method, KeepsBackboneState)
    if type(method).on_load_checkpoint is not L.LightningModule.on_load_checkpoint and (own or entries):
        try:
            method.on_load_checkpoint(saved)
        except ConfigError as err:  # the methods' hooks name the commands' key
            if key == "--ckpt_path" or not str(err).startswith("--ckpt_path: "):
                raise
            raise ConfigError(f"{key}: {checkpoint}: {str(err).removeprefix('--ckpt_path: ')}") from None
    load_weights(method, saved["state_dict"], checkpoint, key)


def load_weights(backbone: L.LightningModule, state: dict, checkpoint: str, key: str = "--ckpt_path") -> None:
    """``state`` (the ``state_dict`` of ``checkpoint``) into ``backbone``: a wrapper's ``backbone.*`` weights when
    they name more of ``backbone``'s weights than ``state``'s own names do (DECA's own Doc2VecC is its
    ``backbone``); extra weights ignored, missing ones an error, and so is a checkpoint with weights for a method
    that has none yet (its vocabulary, which builds them, not restored)."""
    own = backbone.state_dict().keys()
    inner = {k[len("backbone."):]: v for k, v in state.items() if k.startswith("backbone.")}
    if len(own & inner.keys()) > len(own & state.keys()):  # a wrapper's checkpoint around ``backbone``
        state = inner
    name = type(backbone).__name__
    if state and not own:
        raise ConfigError(f"{key}: {checkpoint} has {len(state)} weights but not the vocabulary that builds {name}'s "
                          f"(as configured it has none): give the {name} run's checkpoint, or a fine-tuning run's "
                          f"that keeps its backbone's vocabulary")
    try:
        missing, unexpected = backbone.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shapes differ
        raise ValueError(f"checkpoint {checkpoint} does not fit {name} as configured in the config: {err}") from err
    if missing:
        raise ValueError(f"checkpoint {checkpoint} is not a {name} checkpoint of this "
                         f"architecture: {len(missing)} weights missing (first: {missing[0]})")
    log.info("loaded %s (ignored %d extra weights)", checkpoint, len(unexpected))
