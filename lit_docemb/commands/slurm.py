"""``python -m lit_docemb slurm --config A.yaml [--config B.yaml] --nodes N --gpus-per-node G [...] [-- fit args]``

Writes a SLURM batch script for ``python -m lit_docemb fit`` into a new folder
``<default_root_dir>/slurm/<UTC time>/`` (``job.sbatch``; the job's output goes to ``<job name>-<job id>.out``
beside it, appended to on every requeue) and submits it with ``sbatch``. The job asks for ``--nodes N``,
``--ntasks-per-node G`` and ``--gpus-per-node G`` (``--cpu-tasks-per-node T`` instead: T CPU processes per node,
no GPUs), ``--signal=SIGUSR1@90``, ``--requeue`` and ``--open-mode=append``, and runs
``srun python -m lit_docemb fit ... --trainer.num_nodes N --trainer.devices G --ckpt_path last``, so a requeued
job resumes from its newest checkpoint (see :class:`~lit_docemb.methods.callbacks.RunCheckpoint`) and logs into the
same wandb run (:mod:`lit_docemb.commands.loggers`).

The fit arguments are parsed before anything is written, so a config error shows at submission, not in the
queue. The config must set ``trainer.default_root_dir`` (a requeued job finds its run by it) and use
:class:`~lit_docemb.methods.callbacks.RunCheckpoint`.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import yaml
from jsonargparse import dict_to_namespace

from lit_docemb.commands.cli import run as run_cli
from lit_docemb.commands.run_folder import apply_run_dir
from lit_docemb.commands.sbatch import check_run_config, fit_arguments, parser, render, validate


def resolve_fit_config(fit_args: list[str]) -> dict:
    """The resolved fit config of ``fit_args`` (what ``fit ... --print_config`` prints, with the run folder that
    ``--run_dir`` names: :func:`~lit_docemb.commands.run_folder.apply_run_dir`); parse errors exit, a config that cannot
    be read or names a class it may not raises :class:`~lit_docemb.errors.ConfigError`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # DocEmbCLI silences Lightning's warning about args given in Python
        try:
            run_cli(["fit", *fit_args, "--print_config"])
        except SystemExit as stop:
            if stop.code not in (0, None):
                raise
    text = out.getvalue()
    # libraries imported while parsing may print first (DeepSpeed logs to stdout): start at LightningCLI's header
    header = text.find("# lightning.pytorch==")
    config = dict_to_namespace(yaml.safe_load(text[max(header, 0):]))
    apply_run_dir(config, fit_args)  # --print_config prints before --run_dir is applied: as the fit will run
    return config.as_dict()


def main(argv: list[str]) -> str | None:
    """Runs the helper; returns the submitted job id (``None`` with ``--dry-run``)."""
    p = parser()
    args = p.parse_args(argv)
    validate(args, p)
    run_dir = Path(check_run_config(resolve_fit_config(fit_arguments(args))))
    job_name = args.job_name or run_dir.resolve().name
    log_dir = (run_dir / "slurm" / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")).resolve()
    log_dir.mkdir(parents=True)
    script = log_dir / "job.sbatch"
    script.write_text(render(args, job_name, log_dir))
    if args.dry_run:
        print(script.read_text(), end="")
        print(f"# written to {script} (not submitted: --dry-run)")
        return None
    if shutil.which("sbatch") is None:
        raise SystemExit(f"slurm: sbatch not found on PATH; the job script is at {script}")
    result = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"slurm: sbatch {script} failed ({result.returncode}): {result.stderr.strip()}")
    job_id = result.stdout.strip().split(";")[0]
    print(f"submitted job {job_id}: {script}; output in {log_dir}")
    return job_id
