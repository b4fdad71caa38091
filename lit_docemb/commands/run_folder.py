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

A run folder may name config values: ``{<dotted config key>}`` in ``trainer.default_root_dir`` and in a logger's
``save_dir``, ``name`` or ``version`` is replaced by that key's value before anything is built
(:func:`fill_run_folder`), e.g. ``runs/graph_roberta_retrieval_robust04/fold{data.init_args.test_fold}``: each fold of
a cross-validation then runs, resumes and is evaluated in a folder of its own.

One flag names the run folder: ``--run_dir runs/x`` sets ``trainer.default_root_dir``, each logger's ``save_dir``
and a WandbLogger's run ``name`` (``x``, :func:`run_name`) at once (:func:`apply_run_dir`); a config names its folder with
``trainer.default_root_dir`` alone, and its logger's ``save_dir`` and ``name``, left unset, follow that folder too.
``--run_dir`` together with a ``--trainer.default_root_dir`` or logger ``save_dir`` naming another folder on the
same command line is a :class:`ConfigError` naming both keys.
"""

from __future__ import annotations

import logging
import os
import re
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


#: ``{<dotted config key>}`` in a run folder name.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")
#: Logger arguments that name a run folder (filled like ``trainer.default_root_dir``).
LOGGER_FOLDER_KEYS = ("save_dir", "name", "version")


def fill_placeholders(value: str, config, key: str) -> str:
    """``value`` with each ``{<dotted config key>}`` replaced by that key's value in ``config`` (a jsonargparse
    Namespace of one subcommand); a key the config lacks is a :class:`ConfigError` naming ``key``."""
    def value_of(match: re.Match) -> str:
        try:
            found = config[match.group(1)]
        except (KeyError, TypeError):
            found = None
        if found is None or not isinstance(found, (str, int, float)):
            raise ConfigError(f"{key}: {value!r} names {{{match.group(1)}}}, which is not a set config value; name "
                              f"a key such as data.init_args.test_fold")
        return str(found)
    return PLACEHOLDER.sub(value_of, value)


def fill_run_folder(config) -> None:
    """Fills the ``{<config key>}`` placeholders of ``trainer.default_root_dir`` and of each logger's
    ``save_dir``/``name``/``version`` in ``config`` (one subcommand's Namespace), in place."""
    trainer = config.get("trainer")
    if trainer is None:
        return
    if isinstance(trainer.get("default_root_dir"), str):
        trainer.default_root_dir = fill_placeholders(trainer.default_root_dir, config, "trainer.default_root_dir")
    if isinstance(config.get(RUN_DIR_KEY), str):
        config[RUN_DIR_KEY] = fill_placeholders(config[RUN_DIR_KEY], config, RUN_DIR_KEY)
    loggers = trainer.get("logger")
    for index, logger in enumerate(loggers if isinstance(loggers, list) else [loggers]):
        init_args = logger.get("init_args") if hasattr(logger, "get") else None
        for name in LOGGER_FOLDER_KEYS if init_args is not None else ():
            if isinstance(init_args.get(name), str):
                key = f"trainer.logger{f'[{index}]' if isinstance(loggers, list) else ''}.init_args.{name}"
                init_args[name] = fill_placeholders(init_args[name], config, key)


#: The flag that names the run folder, and the keys it sets.
RUN_DIR_KEY = "run_dir"
ROOT_KEY = "trainer.default_root_dir"
#: A logger's ``save_dir`` when the config leaves it unset (WandbLogger's default is the working folder).
UNSET_SAVE_DIRS = (None, ".", "")


def run_name(folder: str) -> str:
    """The run name a run folder gives a WandbLogger: its path below ``runs/``, parts joined by ``_``
    (``runs/deca_r8_dc_sc`` -> ``deca_r8_dc_sc``, ``runs/graph_roberta_retrieval_robust04/fold3`` ->
    ``graph_roberta_retrieval_robust04_fold3``); the last part of a folder outside a ``runs/`` folder."""
    parts = os.path.normpath(str(folder)).split(os.sep)
    below = parts[len(parts) - parts[::-1].index("runs"):] if "runs" in parts else []
    return "_".join(below) if below else parts[-1]


def command_line_keys(argv) -> set[str]:
    """The dotted keys given as ``--key value`` or ``--key=value`` in ``argv`` (config files not opened)."""
    return {str(arg)[2:].partition("=")[0] for arg in argv or () if str(arg).startswith("--")}


def _loggers(trainer) -> list[tuple[str, str, object]]:
    """(key, class path, init_args) of each logger of a parsed ``trainer`` section that has init_args."""
    loggers = trainer.get("logger")
    listed = isinstance(loggers, list)
    found = []
    for index, logger in enumerate(loggers if listed else [loggers]):
        init_args = logger.get("init_args") if hasattr(logger, "get") else None
        if init_args is not None:
            found.append((f"trainer.logger{f'[{index}]' if listed else ''}", str(logger.get("class_path")), init_args))
    return found


def _refuse_two_folders(run_dir: str, trainer, given: set[str]) -> None:
    """A :class:`ConfigError` when the command line gives ``--run_dir`` and another folder for a key it sets."""
    named = [(ROOT_KEY, trainer.get("default_root_dir"))] + [
        (f"{key}.init_args.save_dir", init_args.get("save_dir")) for key, _, init_args in _loggers(trainer)]
    for key, value in named:
        if key in given and value is not None and os.path.normpath(str(value)) != os.path.normpath(str(run_dir)):
            raise ConfigError(f"--{RUN_DIR_KEY} {run_dir} and --{key} {value} name two run folders: give "
                              f"--{RUN_DIR_KEY} alone (it sets {ROOT_KEY}, the logger's save_dir and name)")


def apply_run_dir(config, argv) -> None:
    """Makes the run folder of ``config`` (one subcommand's Namespace) name checkpoints, logs and the run, in place.

    The folder is ``--run_dir`` when given, else ``trainer.default_root_dir`` (from the command line before the
    config's ``run_dir``, then the config's). ``trainer.default_root_dir`` and ``run_dir`` are set to it; each
    logger's ``save_dir`` and a WandbLogger's ``name`` (:func:`run_name`; the ``name`` of a CSV or TensorBoard
    logger is a subfolder, kept) follow it where the command line did not give them and, for a folder the config
    names, where the config left them unset. ``--run_dir`` with a ``--trainer.default_root_dir`` or logger
    ``save_dir`` of another folder on the same command line is a :class:`ConfigError` naming both keys.
    """
    trainer = config.get("trainer")
    if trainer is None:
        return
    given = command_line_keys(argv)
    run_dir, root = config.get(RUN_DIR_KEY), trainer.get("default_root_dir")
    if RUN_DIR_KEY in given:
        _refuse_two_folders(run_dir, trainer, given)
    folder = run_dir if RUN_DIR_KEY in given or (run_dir is not None and ROOT_KEY not in given) else root
    if folder is None:
        return
    config[RUN_DIR_KEY] = trainer["default_root_dir"] = folder
    from_command_line = bool({RUN_DIR_KEY, ROOT_KEY} & given)
    for key, class_path, init_args in _loggers(trainer):
        if "save_dir" in init_args and f"{key}.init_args.save_dir" not in given and (
                from_command_line or init_args.get("save_dir") in UNSET_SAVE_DIRS):
            init_args["save_dir"] = folder
        if class_path.endswith(".WandbLogger") and f"{key}.init_args.name" not in given and (
                from_command_line or init_args.get("name") is None):
            init_args["name"] = run_name(folder)


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
    # a link's own time: last.ckpt links to the checkpoint of its step (RunCheckpoint), and may point at nothing if
    # a kill came between the removal of the previous one and the new link; reading it then fails, as below
    newest_first = sorted(found, key=lambda path: os.lstat(path).st_mtime, reverse=True)
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
