"""What every run uses: checkpoints in a fixed run folder written atomically, the random state of every process
in them (so that a resumed run continues the interrupted one exactly), the resolved config saved beside
them (and handed to the loggers), and live throughput figures."""

from __future__ import annotations

import glob
import logging
import os
import random
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import lightning as L
import numpy as np
import torch
import yaml
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import _is_local_file_protocol, get_filesystem
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn

from lit_docemb import distributed
from lit_docemb.data.core.batches import added_counts, token_counts
from lit_docemb.errors import ConfigError, staged_write

log = logging.getLogger(__name__)


def run_dir(trainer: L.Trainer) -> str:
    return trainer.default_root_dir


def inside_accumulation_window(trainer: L.Trainer) -> bool:
    """Whether a fit is between the micro-batches of one optimizer step (``accumulate_grad_batches > 1``): the
    gradients of the micro-batches so far are accumulated but not applied, and a checkpoint written now would
    lose them (a resume continues with the next micro-batch and fresh gradients). Lightning's own test of
    whether the current micro-batch steps (``FitLoop._should_accumulate``), valid from a training batch's start
    to its end and in a validation run inside the epoch."""
    if trainer.state.fn != TrainerFn.FITTING or trainer.sanity_checking or trainer.accumulate_grad_batches == 1:
        return False
    return trainer.fit_loop._should_accumulate()


def logging_step(trainer: L.Trainer | None) -> bool:
    """Whether the current training step is one at which lit_docemb logs its per-step values: a step whose
    on-step metrics Lightning hands to the loggers (every ``log_every_n_steps``-th, each step of a
    ``fast_dev_run``, the step that stops the run), the last batch of an epoch, or the run's last step. The
    loggers so receive exactly what logging every step would give them, and ``trainer.callback_metrics`` hold
    the values of the last step when an epoch or the fit ends (in between, those of the last logging step).
    Logging only there saves the cost of ``self.log`` on the other steps (docs/performance.md). ``True``
    without a trainer or outside a fit."""
    if trainer is None or not trainer.training:
        return True
    if trainer.fast_dev_run or trainer._logger_connector.should_update_logs:
        return True
    if trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
        return True
    return 0 <= trainer.max_steps <= trainer.global_step + 1


class RunCheckpoint(ModelCheckpoint):
    """A ModelCheckpoint whose folder defaults to ``<trainer.default_root_dir>/checkpoints``.

    Lightning's default folder contains the logger's version (a new wandb id per run), so a requeued job
    could not find its own ``last.ckpt``; a fixed folder per run makes ``--ckpt_path last`` work. With
    ``--ckpt_path last`` the newest of ``checkpoints/last.ckpt`` and the checkpoints Lightning writes into
    ``<default_root_dir>`` when SLURM signals a preemption (``hpc_ckpt_<n>.ckpt``) is resumed; with none, the
    run starts from scratch. Arguments are those of :class:`~lightning.pytorch.callbacks.ModelCheckpoint`
    (``save_last`` defaults on). Without a ``monitor``, the best checkpoint is the best by the method's own measure:
    the ``(metric, mode)`` its LightningModule declares as ``checkpoint_monitor`` (``("val/macro_f1", "max")`` for
    :class:`~lit_docemb.methods.DocumentClassifier`), taken in :meth:`setup`; a method that declares none keeps
    the latest (Lightning's behaviour without a monitor). A ``monitor`` given to the callback wins, with its
    ``mode``. When a fit starts, the unfinished files of a save that a kill interrupted
    (:class:`AtomicCheckpointIO`'s ``.<name>.<random>.tmp``) are removed from both folders.

    With ``accumulate_grad_batches > 1`` checkpoints are written only at optimizer-step boundaries, after the
    micro-batch that completes a step, so a resume never loses accumulated gradients: a step-triggered save
    waits for the end of the window (its step counts, ``every_n_train_steps``, are optimizer steps anyway), and
    a save after a validation run inside a window is made at the end of that window, with that validation's
    metrics. (Lightning's ModelCheckpoint would save in the middle of a window after a resume, where it has
    forgotten which step it saved last.)
    """

    def __init__(self, *args, save_last: bool | None = True, **kwargs) -> None:
        super().__init__(*args, save_last=save_last, **kwargs)
        self._validation_save_pending = False

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if inside_accumulation_window(trainer):
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self._validation_save_pending:
            self._validation_save_pending = False
            super().on_validation_end(trainer, pl_module)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if inside_accumulation_window(trainer):
            self._validation_save_pending = True
            return
        super().on_validation_end(trainer, pl_module)

    def _default_dirpath(self, trainer: L.Trainer) -> None:
        if self.dirpath is None:
            self.dirpath = os.path.join(run_dir(trainer), "checkpoints")

    def _monitor_from_method(self, pl_module: L.LightningModule) -> None:
        """Takes the method's ``checkpoint_monitor`` when no ``monitor`` was given (before a resume reads this
        callback's state, which Lightning keys by monitor and mode)."""
        declared = getattr(pl_module, "checkpoint_monitor", None)  # any LightningModule may declare one
        if self.monitor is not None or declared is None:
            return
        self.monitor, self.mode = declared
        self.kth_value = torch.tensor(torch.inf if self.mode == "min" else -torch.inf)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._default_dirpath(trainer)
        self._monitor_from_method(pl_module)
        super().setup(trainer, pl_module, stage)
        if stage == "fit" and trainer.is_global_zero:  # what a kill during a save left behind
            for folder in {self.dirpath, run_dir(trainer)}:
                remove_partial_saves(folder)

    def _find_last_checkpoints(self, trainer: L.Trainer) -> set[str]:
        self._default_dirpath(trainer)  # ckpt_path="last" is resolved before the callbacks' setup
        preempted = glob.glob(os.path.join(glob.escape(run_dir(trainer)), "hpc_ckpt_*.ckpt"))
        return super()._find_last_checkpoints(trainer) | {os.path.normpath(p) for p in preempted}

    def _save_last_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict[str, Any]) -> None:
        """``last.ckpt`` is a relative symbolic link to the checkpoint this step has just written under its own
        name (the top-k file of an epoch end), not a second copy of it; when this step wrote none, it is saved in
        full as usual. A run folder so keeps one copy of each distinct checkpoint; moved or copied with its links
        (``mv``, ``cp -r``), ``last.ckpt`` still points at its neighbour, and a copy that follows links gets a
        plain file. ``save_last="link"`` keeps Lightning's own behaviour (a link to the last top-k file even when
        it is older than this step)."""
        if not self.save_last:
            return
        last = self.format_checkpoint_name(monitor_candidates, self.CHECKPOINT_NAME_LAST)
        if not self.last_model_path and os.path.lexists(last):
            # resumed from the file last.ckpt links to, saved before last.ckpt was named in its state: the run folder
            # holds one run (commands/run_folder.py), so this last.ckpt is the run's own, not one to keep beside
            self.last_model_path = last  # (else Lightning would write last-v1.ckpt beside it)
        written_now = (self._last_global_step_saved == trainer.global_step and self._last_checkpoint_saved
                       and os.path.basename(self._last_checkpoint_saved) != os.path.basename(last)
                       and os.path.exists(self._last_checkpoint_saved))
        if self.save_last is True and written_now and self.save_top_k != 0 and _is_local_file_protocol(self.dirpath):
            self.save_last = "link"
            try:
                return super()._save_last_checkpoint(trainer, monitor_candidates)
            finally:
                self.save_last = True
        if os.path.islink(last) and not isinstance(trainer.strategy.checkpoint_io, AtomicCheckpointIO):
            os.remove(last)  # a plain write would go through the link into the checkpoint it points at
        super()._save_last_checkpoint(trainer, monitor_candidates)

    @staticmethod
    def _link_checkpoint(trainer: L.Trainer, filepath: str, linkpath: str) -> None:
        """Points ``linkpath`` at ``filepath`` by a relative link made under a temporary name and renamed over
        it, so that a kill never leaves the run without its ``last.ckpt`` (Lightning removes it first)."""
        if not trainer.is_global_zero or os.path.abspath(filepath) == os.path.abspath(linkpath):
            return
        if os.path.isdir(linkpath) and not os.path.islink(linkpath):
            shutil.rmtree(linkpath)  # a sharded (DeepSpeed) last checkpoint folder
        folder = os.path.dirname(os.path.abspath(linkpath))
        staged = os.path.join(folder, f".{os.path.basename(linkpath)}.{secrets.token_hex(4)}.tmp")
        os.symlink(os.path.relpath(filepath, folder), staged)
        os.replace(staged, linkpath)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A run folder that was moved or copied keeps its checkpoint bookkeeping: the paths the checkpoint
        recorded under its old folder are read as the same files in this one (so ``last.ckpt`` is written again,
        not ``last-v1.ckpt``, and superseded top-k files in this folder are removed, never the old folder's)."""
        old = state_dict.get("dirpath")
        if old is not None and self.dirpath is not None and os.path.normpath(old) != os.path.normpath(self.dirpath):
            old, new = os.path.normpath(old), os.path.normpath(self.dirpath)

            def moved(path):
                if not isinstance(path, str) or not path.startswith(old + os.sep):
                    return path
                return os.path.join(new, os.path.relpath(path, old))

            state_dict = {**state_dict, "dirpath": self.dirpath,
                          **{key: moved(state_dict[key]) for key in ("best_model_path", "kth_best_model_path",
                                                                     "last_model_path") if key in state_dict}}
            if "best_k_models" in state_dict:
                state_dict["best_k_models"] = {moved(k): v for k, v in state_dict["best_k_models"].items()}
            log.info("run folder moved: checkpoint paths under %s are read as under %s", old, new)
        super().load_state_dict(state_dict)


#: The name of a checkpoint being written by :class:`AtomicCheckpointIO`: ``.<name>.<8 random characters>.tmp``.
PARTIAL_SAVE = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp")


def remove_partial_saves(folder: str) -> list[str]:
    """Deletes the temporary files :class:`AtomicCheckpointIO` (and the staged links of
    :meth:`RunCheckpoint._link_checkpoint`) left in ``folder`` when a run was killed while saving (never read:
    the checkpoint they were to become is the previous complete one) and returns their paths. Other files,
    checkpoints included, are left alone."""
    if not isinstance(get_filesystem(folder), LocalFileSystem) or not os.path.isdir(folder):
        return []
    removed = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if PARTIAL_SAVE.fullmatch(name) and (os.path.isfile(path) or os.path.islink(path)):
            os.unlink(path)
            removed.append(path)
    if removed:
        log.warning("removed %d unfinished checkpoint file(s) of an interrupted save in %s", len(removed), folder)
    return removed


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes each checkpoint to a temporary file in its own folder, flushes it to disk and renames it over
    the target (:func:`~lit_docemb.errors.staged_write`), so that ``last.ckpt`` is always either the previous or
    the new complete checkpoint, also when the job is killed while saving or the disk is full. (Lightning's own
    save stages the file in the system's temporary folder and moves it, which is a copy — not atomic — when the
    checkpoint folder is on another file system, as on clusters.) Remote paths (``s3://`` ...) keep Lightning's
    write. The DeepSpeed strategy writes its sharded checkpoint folders itself and does not use this. A kill during
    the write leaves the temporary file (``.<name>.<random>.tmp``); :class:`RunCheckpoint` removes those of its
    folders when the next fit starts. A full disk ends the fit with :class:`~lit_docemb.errors.DiskFull` naming
    the checkpoint and the last complete one, which is kept (one line from the command line, exit status 2).
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        if not isinstance(get_filesystem(path), LocalFileSystem):
            return super().save_checkpoint(checkpoint, path)
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        with staged_write(path, kept=lambda: kept_checkpoint(folder)) as staged, open(staged, "xb") as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())


def kept_checkpoint(folder: str) -> str:
    """What a failed save leaves a resume: the newest complete checkpoint in ``folder`` (``last.ckpt`` when it
    links to that one), in words."""
    found = [path for path in glob.glob(os.path.join(glob.escape(folder), "*.ckpt")) if os.path.isfile(path)]
    if not found:
        return f"no complete checkpoint is in {folder} yet"
    newest = max(found, key=lambda path: (os.path.getmtime(path), os.path.basename(path) == "last.ckpt"))
    named = f"{newest} (-> {os.readlink(newest)})" if os.path.islink(newest) else newest
    return f"the last complete checkpoint, {named}, is kept (free space, then resume with --ckpt_path last)"


def current_umask() -> int:
    """The process's file-mode creation mask (read by setting it, then put back: the only way to read it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def random_state() -> dict[str, Any]:
    """This process's global random states (torch CPU and current CUDA device, Python, numpy) as tensors and
    plain Python values, so that a checkpoint holding them still loads with ``torch.load(weights_only=True)``."""
    version, mt, gauss = random.getstate()
    kind, keys, position, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": [version, list(mt), gauss],
             "numpy": [kind, keys.tolist(), int(position), int(has_gauss), float(cached)]}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()  # this process's device (one per process)
    return state


def set_random_state(state: dict[str, Any]) -> None:
    """Restores what :func:`random_state` returned."""
    torch.set_rng_state(state["torch"])
    version, mt, gauss = state["python"]
    random.setstate((version, tuple(mt), gauss))
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"])


class RandomStateCheckpoint(Callback):
    """Saves every process's random state in each checkpoint and restores it on resume, so that dropout
    continues with the masks the interrupted run would have drawn. Lightning saves no random state: a resumed
    run otherwise restarts from ``seed_everything``'s.

    The states of all ranks are gathered when a checkpoint is written (every rank calls ``state_dict``) and
    each rank restores its own just before the first training batch after the resume, after everything
    Lightning does at start-up (model construction, sanity check) has drawn from the generators. The batches'
    own randomness does not depend on these states (``lit_docemb.data.core.sampling``: seeded per batch). A
    checkpoint from another number of processes, or one without these states, is resumed with the seeded
    start-up state and a warning. Added to every method's fit by
    :meth:`~lit_docemb.methods.base.EmbeddingMethod.configure_callbacks`.
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        return {"ranks": distributed.gather_objects(random_state())}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        ranks, world = state_dict.get("ranks", []), distributed.world_size()
        if len(ranks) != world:
            log.warning("the checkpoint holds the random states of %d processes, this run has %d: dropout "
                        "continues from the seeded start-up state, not the interrupted run's", len(ranks), world)
            return
        self._pending = ranks[distributed.rank()]

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._pending is not None:
            set_random_state(self._pending)
            self._pending = None


class PauseAfterEpoch(Callback):
    """Ends a fit after its ``epoch``-th epoch, while ``max_epochs`` and the learning-rate schedule stay those of the
    whole run: a run in phases that is resumed (``--ckpt_path last``) with its optimizer, schedule and epoch count,
    after something was made from the paused checkpoint. Graph-RoBERTa's MSMARCO fine-tuning (Table 4) is one
    10-epoch run whose negatives, from epoch 6, are mined by its own 5-epoch checkpoint: ``epoch: 5``, mine, resume
    with the mined run as ``data.init_args.negatives_run``. The resumed fit starts after ``epoch`` and never pauses
    again.

    Args:
        epoch: The epoch (counted from 1) after which the fit stops.
    """

    def __init__(self, epoch: int) -> None:
        if epoch < 1:
            raise ConfigError(f"trainer.callbacks: PauseAfterEpoch.epoch must be >= 1 (counted from 1), got {epoch}")
        self.epoch = epoch

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch + 1 == self.epoch:
            trainer.should_stop = True


class SaveRunConfig(SaveConfigCallback):
    """Writes the resolved config of a run to ``<trainer.default_root_dir>/config.yaml``, beside the
    ``checkpoints`` folder, once: a resumed or requeued run keeps the file its first start wrote. Every start
    also hands the resolved config it runs with to the loggers (``log_hyperparams({"config": ...})``: the
    wandb run's config, TensorBoard's hparams, the CSV logger's ``hparams.yaml``)."""

    def save_config(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        path = os.path.join(run_dir(trainer), "config.yaml")
        if os.path.exists(path):
            log.info("config already saved at %s (resumed run): kept", path)
        else:
            os.makedirs(run_dir(trainer), exist_ok=True)
            self.parser.save(self.config, path, skip_none=False, overwrite=True, multifile=False)
        resolved = yaml.safe_load(self.parser.dump(self.config, skip_none=False))  # what config.yaml holds
        for logger in trainer.loggers:
            logger.log_hyperparams({"config": resolved})


class SlurmRequeue(Callback):
    """Checkpoint and requeue on SLURM's warning signal, with no work inside the signal handler.

    ``--signal=SIGUSR1@90`` makes SLURM send SIGUSR1 before the time limit; the handler only records it. At the
    next batch end the ranks agree (one boolean all-reduce per step), save ``<default_root_dir>/hpc_ckpt_<n>.ckpt``
    together, rank 0 runs ``scontrol requeue <job>``, and training stops; the requeued job resumes from that
    checkpoint (``--ckpt_path last``, see :class:`RunCheckpoint`). Lightning's own auto-requeue saves inside the
    signal handler, where the save can stop and never finish (Lightning issue #21406); the CLI turns it off under
    SLURM and adds this callback instead.

    With ``accumulate_grad_batches > 1`` the checkpoint waits for the end of the accumulation window (the
    micro-batch that completes an optimizer step), so that a resume loses no accumulated gradients: leave
    SLURM's warning time for that many micro-batches more.

    Args:
        signum: The signal that announces the preemption.
    """

    def __init__(self, signum: int = signal.SIGUSR1) -> None:
        self.signum = signum
        self.signalled = False
        self._previous_handler = None

    def _record(self, signum, frame) -> None:
        self.signalled = True

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._previous_handler = signal.signal(self.signum, self._record)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._previous_handler is not None:
            signal.signal(self.signum, self._previous_handler)
            self._previous_handler = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if inside_accumulation_window(trainer):  # the same on every rank: all wait for the step's end
            return
        if not trainer.strategy.reduce_boolean_decision(self.signalled, all=False):
            return
        folder = run_dir(trainer)
        numbers = [int(m.group(1)) for p in glob.glob(os.path.join(glob.escape(folder), "hpc_ckpt_*.ckpt"))
                   if (m := re.search(r"hpc_ckpt_(\d+)\.ckpt$", p))]
        trainer.save_checkpoint(os.path.join(folder, f"hpc_ckpt_{max(numbers, default=0) + 1}.ckpt"))
        if trainer.is_global_zero:
            job = os.environ.get("SLURM_JOB_ID")
            if os.environ.get("SLURM_ARRAY_JOB_ID"):
                job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
            result = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
            if result.returncode == 0:
                log.warning("preemption signal: checkpoint saved, SLURM job %s requeued", job)
            else:
                log.error("preemption signal: checkpoint saved, but `scontrol requeue %s` failed: %s", job,
                          result.stderr.strip())
        trainer.should_stop = True


def peak_memory_gib(device: torch.device) -> float:
    """Peak memory of this process so far: CUDA's max allocated bytes on a CUDA device, else the process's
    peak resident set size (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**30 if sys.platform == "darwin" else peak / 2**20


class Throughput(Callback):
    """Logs ``train/documents_per_s``, ``train/tokens_per_s`` and ``train/peak_memory_gib`` while training,
    at the trainer's ``log_every_n_steps`` (the steps the loss is logged at, so the dashboard shows them side by
    side). The command line adds it to every ``fit`` unless the config already has one.

    Rates are per process (one device), over the wall time since the previous logged step: the step itself,
    waiting for the next batch, logging and callbacks, everything a training run spends. Documents are
    ``len(batch)`` (the documents trained on, after a collator's skips); tokens are the real, non-padding
    tokens the encoder reads (:func:`~lit_docemb.data.core.batches.count_tokens`; a batch without tokens logs no
    ``tokens_per_s``). Each step only keeps its batch's token counts, which stay on the device; they are added
    at a logged step, so counting adds no synchronisation and no addition per step; on CUDA the logged step waits
    for the device, so the window ends when its work does. Without a logger nothing is counted.

    Peak memory is CUDA's maximum allocated memory on a GPU, the process's peak resident set size on CPU.
    Validation runs inside training are left out of the rates.
    """

    def __init__(self) -> None:
        self._reset(None)

    def _reset(self, started: float | None) -> None:
        self._started = started
        self._paused: float | None = None
        self._documents = 0
        self._token_counts: list[torch.Tensor] = []  # 0-dim counts of the steps since the last logged one

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._reset(None)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._started is None:
            self._started = time.perf_counter()
            return
        if not trainer._logger_connector.should_update_logs or not trainer.loggers or not self._documents:
            return
        device = pl_module.device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        now = time.perf_counter()
        seconds = max(now - self._started, 1e-9)
        metrics = {"train/documents_per_s": self._documents / seconds,
                   "train/peak_memory_gib": peak_memory_gib(device)}
        if self._token_counts:
            metrics["train/tokens_per_s"] = float(added_counts(self._token_counts)) / seconds
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.fit_loop.epoch_loop._batches_that_stepped)
        self._reset(now)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._started is not None:
            self._paused = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._started is not None and self._paused is not None:
            self._started += time.perf_counter() - self._paused
            self._paused = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if not trainer.loggers:
            return
        self._documents += len(batch)
        self._token_counts += token_counts(batch)
        if len(self._token_counts) > MAX_KEPT_COUNTS:  # logged steps far apart: keep the list short
            self._token_counts = [added_counts(self._token_counts)]


#: The most token counts :class:`Throughput` keeps before adding them up (they are added at each logged step).
MAX_KEPT_COUNTS = 1024
