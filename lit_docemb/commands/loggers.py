"""One wandb run per training run, across requeues: the run id is kept in the run folder.

A SLURM job that is preempted and requeued starts ``python -m lit_docemb fit`` again with the same config;
without a fixed id every start would open a new wandb run. :func:`configure_wandb_loggers` fills in, for each
``WandbLogger`` of a fit config that names no ``id``/``version`` of its own, the id stored in
``<default_root_dir>/wandb_id`` (created by the first start), ``resume: allow``, and as ``group`` the SLURM job
name when the run is a SLURM job. Values set in the config are kept.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from jsonargparse import Namespace
from lightning.pytorch.loggers import WandbLogger

from lit_docemb.methods.checkpoints import class_at

ID_FILE = "wandb_id"
_ID_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"


def persistent_run_id(run_dir: str | os.PathLike) -> str:
    """The wandb run id of the run folder ``run_dir``: read from ``<run_dir>/wandb_id``, or, on the first start,
    a new random id written there. Safe when every process of a job calls it at once (also on a shared file
    system): the file appears complete through a hard link, which fails if another process made it first."""
    path = Path(run_dir) / ID_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate = "".join(secrets.choice(_ID_CHARS) for _ in range(12))
        tmp = path.with_name(f".{ID_FILE}.{os.getpid()}.{candidate}")
        tmp.write_text(candidate + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process of the job created it first: use its id
        finally:
            tmp.unlink()
    run_id = path.read_text().strip()
    if not run_id or any(c not in _ID_CHARS + "-_" for c in run_id.lower()):
        raise ValueError(f"{path} does not hold a wandb run id (letters, digits, '-', '_'): {run_id!r}; "
                         f"delete it to start a new wandb run")
    return run_id


def _is_wandb(class_path: str) -> bool:
    cls = class_at(class_path)
    return isinstance(cls, type) and issubclass(cls, WandbLogger)


def configure_wandb_loggers(trainer_config: Namespace, environ: Mapping[str, str] = os.environ) -> None:
    """Sets ``id`` (persistent, see :func:`persistent_run_id`), ``resume`` and ``group`` of the WandbLogger(s)
    in the parsed ``trainer`` section of a fit config, in place, where the config leaves them unset."""
    loggers = trainer_config.logger if isinstance(trainer_config.logger, list) else [trainer_config.logger]
    run_dir = trainer_config.default_root_dir or os.getcwd()
    for logger in loggers:
        if not isinstance(logger, Namespace) or not _is_wandb(logger.class_path):
            continue
        args = logger.init_args
        if args.get("id") is None and args.get("version") is None:
            args["id"] = persistent_run_id(run_dir)
        if args.get("resume") is None:
            args["resume"] = "allow"
        if args.get("group") is None and environ.get("SLURM_JOB_NAME"):
            args["group"] = environ["SLURM_JOB_NAME"]
