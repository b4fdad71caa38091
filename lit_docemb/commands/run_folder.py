"""One run per folder: a fresh ``fit`` refuses a ``trainer.default_root_dir`` that already holds a run.

A run folder holds a run when it has the ``config.yaml`` a fit writes (:class:`~lit_docemb.methods.callbacks.
SaveRunConfig`) or a checkpoint (``*.ckpt`` up to :data:`DEPTH` folders down: ``checkpoints/``, a logger's
``lightning_logs/version_<n>/checkpoints/``, SLURM's ``hpc_ckpt_<n>.ckpt``). Starting a second run there would
merge the two: the first run's ``config.yaml`` kept, new checkpoints written as ``last-v1.ckpt`` beside the old
``last.ckpt``, one wandb run for both, and ``embed``/``evaluate --ckpt_path .../last.ckpt`` quietly using the old
model. So a ``fit`` without ``--ckpt_path`` into such a folder stops before anything is built, read or written:
resume the run with ``--ckpt_path last``, or choose another ``trainer.default_root_dir``.

With ``LIT_DOCEMB_OVERWRITE=1`` in the environment the fit starts over instead, cleanly: the previous run's files
(``config.yaml``, ``wandb_id``, ``data_stats.json``, ``checkpoints/``, ``lightning_logs/``, ``evaluation/``,
``figures/`` and every other top-level entry holding a checkpoint) are moved, not deleted, into
``<default_root_dir>/replaced-<UTC time>/``, which later checks ignore; the new run writes its own config, gets a
new wandb id and a ``last.ckpt`` of its own.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

from lit_docemb.errors import ConfigError
from lit_docemb.methods.checkpoints import read_checkpoint

log = logging.getLogger(__name__)

OVERWRITE_VARIABLE = "LIT_DOCEMB_OVERWRITE"
REPLACED_PREFIX = "replaced-"
DEPTH = 4  # folders below the run folder searched for checkpoints
#: Top-level entries a fit writes into its run folder (moved aside on overwrite even without a checkpoint).
RUN_ENTRIES = ("config.yaml", "wandb_id", "data_stats.json", "checkpoints", "lightning_logs", "evaluation", "figures")


def run_checkpoints(root: str) -> list[str]:
    """Checkpoint files under ``root`` (relative paths, sorted), at most :data:`DEPTH` folders down, leaving out the
    ``replaced-*`` folders of overwritten runs."""
    found = []
    root = os.path.abspath(root)
    for folder, subfolders, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        depth = 0 if relative == "." else relative.count(os.sep) + 1
        if depth == 0:
            subfolders[:] = [s for s in subfolders if not s.startswith(REPLACED_PREFIX)]
        if depth >= DEPTH:
            subfolders[:] = []
        found += [os.path.normpath(os.path.join(relative, f)) for f in files if f.endswith(".ckpt")]
    return sorted(found)


def is_resume_point(name: str) -> bool:
    """Whether a checkpoint file name is one ``--ckpt_path last`` resumes: a ``last`` or a preemption checkpoint."""
    return "last" in name or name.startswith("hpc_ckpt_")


def last_checkpoint(root: str | None) -> str | None:
    """The checkpoint ``--ckpt_path last`` resumes in the run folder ``root`` (None: the working folder): its newest
    ``*last*.ckpt`` or preemption checkpoint (``hpc_ckpt_<n>.ckpt``, which
    :class:`~lit_docemb.methods.callbacks.RunCheckpoint` also resumes); when that cannot be read (a kill or a full
    disk during its save), the newest intact checkpoint of the run instead, with a warning. None when the run has
    no such checkpoint (Lightning then starts from scratch and says so); a :class:`ConfigError` naming the file
    when no checkpoint of the run is intact."""
    root = os.getcwd() if root is None else os.path.expanduser(str(root))
    found = [os.path.join(root, path) for path in run_checkpoints(root)] if os.path.isdir(root) else []
    newest_first = sorted(found, key=os.path.getmtime, reverse=True)
    last = next((path for path in newest_first if is_resume_point(os.path.basename(path))), None)
    if last is None:
        return None
    try:
        read_checkpoint(last, "--ckpt_path last", mmap=True)
        return last
    except ConfigError as err:
        problem = err
    for path in (p for p in newest_first if p != last):
        try:
            read_checkpoint(path, mmap=True)
        except ConfigError:
            continue
        log.warning("--ckpt_path last: %s cannot be read; resuming from %s, the newest intact checkpoint of the run",
                    last, path)
        return path
    raise ConfigError(f"{problem}; no other checkpoint of {root} is intact either: start over in another "
                      f"trainer.default_root_dir (or with {OVERWRITE_VARIABLE}=1)")


def holds_run(root: str) -> list[str]:
    """What makes ``root`` a run folder: its ``config.yaml`` and its checkpoints (relative paths); empty if none."""
    config = ["config.yaml"] if os.path.isfile(os.path.join(root, "config.yaml")) else []
    return config + run_checkpoints(root)


def overwrite_requested(environ=os.environ) -> bool:
    value = environ.get(OVERWRITE_VARIABLE, "").strip()
    if value not in ("", "0", "1"):
        raise ConfigError(f"{OVERWRITE_VARIABLE}={value!r}: set it to 1 to start a fit over in a run folder that "
                          f"holds a run, or to 0 (or unset it)")
    return value == "1"


def move_run_aside(root: str, found: list[str]) -> str:
    """Moves the previous run's entries of ``root`` into a new ``replaced-<UTC time>`` folder; returns its path."""
    target = os.path.join(root, REPLACED_PREFIX + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    suffix = 0
    while os.path.exists(target + (f"-{suffix}" if suffix else "")):
        suffix += 1
    target += f"-{suffix}" if suffix else ""
    entries = {path.split(os.sep, 1)[0] for path in found} | {e for e in RUN_ENTRIES
                                                                if os.path.lexists(os.path.join(root, e))}
    os.makedirs(target)
    for entry in sorted(entries):
        shutil.move(os.path.join(root, entry), os.path.join(target, entry))
    return target


def check_fresh_fit(root: str | None, ckpt_path: str | None, environ=os.environ) -> None:
    """Refuses (:class:`ConfigError`) a fit without ``ckpt_path`` into a run folder that holds a run, or, with
    ``LIT_DOCEMB_OVERWRITE=1``, moves that run aside (:func:`move_run_aside`). ``root`` None is the working folder,
    Lightning's default ``default_root_dir``."""
    if ckpt_path is not None:
        return  # a resume (or a fine-tune from a checkpoint) continues the run it names
    root = os.getcwd() if root is None else os.path.expanduser(str(root))
    if not os.path.isdir(root):
        return
    overwrite = overwrite_requested(environ)
    found = holds_run(root)
    if not found:
        return
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    if not overwrite:
        raise ConfigError(f"trainer.default_root_dir: {root} already holds a run ({shown}); resume it with "
                          f"--ckpt_path last, or choose another trainer.default_root_dir (or set "
                          f"{OVERWRITE_VARIABLE}=1 to move that run into {root}/{REPLACED_PREFIX}<time>/ and start "
                          f"over)")
    target = move_run_aside(root, found)
    log.warning("%s=1: the previous run in %s (%s) was moved to %s; starting a new run", OVERWRITE_VARIABLE, root,
                shown, target)
