"""The SLURM batch script of a fit: ``python -m lit_docemb slurm``'s options, its ``#SBATCH`` directives and the
script's text (:mod:`lit_docemb.commands.slurm` resolves the fit config and submits it). Nothing here imports torch,
so ``slurm --help`` answers without it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from string import Template

#: Fit arguments the helper sets from the allocation; passing them as extra fit arguments is an error.
SET_BY_HELPER = ("--trainer.num_nodes", "--trainer.devices", "--trainer.accelerator", "--ckpt_path")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lit_docemb slurm",
        description="Write a requeue-safe SLURM job for `python -m lit_docemb fit` into the run folder and "
                    "submit it. Arguments after `--` are passed to fit.")
    p.add_argument("--config", action="append", required=True, help="fit config (repeat to combine, e.g. a "
                   "method config then configs/trainer/ddp.yaml)")
    p.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    devices = p.add_mutually_exclusive_group(required=True)
    devices.add_argument("--gpus-per-node", type=int, help="GPUs per node; one task per GPU")
    devices.add_argument("--cpu-tasks-per-node", type=int, help="CPU-only job: this many processes per node")
    p.add_argument("--cpus-per-task", type=int, help="CPU cores per task (dataloader workers + 1)")
    p.add_argument("--partition", help="SLURM partition")
    p.add_argument("--time", help="time limit, e.g. 2-00:00:00")
    p.add_argument("--account", help="SLURM account")
    p.add_argument("--job-name", help="job name, also the wandb group (default: the run folder's name)")
    p.add_argument("--signal-seconds", type=int, default=90,
                   help="send SIGUSR1 this many seconds before the time limit (default 90)")
    p.add_argument("--dry-run", action="store_true", help="write and print the script, do not submit it")
    p.add_argument("fit_args", nargs="*", help="extra fit arguments, after `--`")
    return p


def check_run_config(config: dict) -> str:
    """The run folder (``trainer.default_root_dir``) of a resolved fit config that a requeued job can resume."""
    trainer = config["trainer"]
    if not trainer.get("default_root_dir"):
        raise SystemExit("slurm: the config sets no trainer.default_root_dir; a requeued job finds its "
                         "checkpoints and wandb id in that folder, so give one (--run_dir runs/<experiment>)")
    callbacks = trainer.get("callbacks") or []
    if not any(isinstance(c, dict) and c.get("class_path") == "lit_docemb.methods.callbacks.RunCheckpoint"
               for c in callbacks):
        raise SystemExit("slurm: the config has no lit_docemb.methods.callbacks.RunCheckpoint callback, so a requeued "
                         "job would find no checkpoint to resume; add it to trainer.callbacks")
    return trainer["default_root_dir"]


def sbatch_directives(args: argparse.Namespace, job_name: str, log_dir: Path) -> list[str]:
    tasks = args.gpus_per_node if args.gpus_per_node is not None else args.cpu_tasks_per_node
    options = [("job-name", job_name), ("nodes", args.nodes), ("ntasks-per-node", tasks)]
    if args.gpus_per_node is not None:
        options.append(("gpus-per-node", args.gpus_per_node))
    options += [("cpus-per-task", args.cpus_per_task), ("partition", args.partition), ("time", args.time),
                ("account", args.account)]
    lines = [f"#SBATCH --{name}={value}" for name, value in options if value is not None]
    lines += [f"#SBATCH --signal=SIGUSR1@{args.signal_seconds}", "#SBATCH --requeue", "#SBATCH --open-mode=append",
              f"#SBATCH --output={log_dir / '%x-%j.out'}", f"#SBATCH --chdir={Path.cwd()}"]
    return lines


def fit_arguments(args: argparse.Namespace) -> list[str]:
    """The arguments of the job's ``fit``: the configs, the extra fit arguments, then the allocation."""
    gpu = args.gpus_per_node is not None
    config_args = [a for path in args.config for a in ("--config", path)]
    return [*config_args, *args.fit_args, "--trainer.num_nodes", str(args.nodes),
            "--trainer.devices", str(args.gpus_per_node if gpu else args.cpu_tasks_per_node),
            "--trainer.accelerator", "gpu" if gpu else "cpu", "--ckpt_path", "last"]


def render(args: argparse.Namespace, job_name: str, log_dir: Path) -> str:
    template = Template(resources.files(__package__).joinpath("fit.sbatch").read_text())
    return template.substitute(
        created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), script=log_dir / "job.sbatch",
        signal_seconds=args.signal_seconds, directives="\n".join(sbatch_directives(args, job_name, log_dir)),
        command=shlex.join([sys.executable, "-m", "lit_docemb", "fit", *fit_arguments(args)]))


def validate(args: argparse.Namespace, p: argparse.ArgumentParser) -> None:
    for name in ("nodes", "gpus_per_node", "cpu_tasks_per_node", "cpus_per_task", "signal_seconds"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    for arg in args.fit_args:
        if arg.split("=", 1)[0] in SET_BY_HELPER:
            p.error(f"{arg}: the helper sets {', '.join(SET_BY_HELPER)} from --nodes and --gpus-per-node / "
                    f"--cpu-tasks-per-node (and resumes with --ckpt_path last); do not pass them")
    missing = [path for path in args.config if not Path(path).is_file()]
    if missing:
        p.error(f"--config: no such file: {', '.join(missing)}")
