"""The SLURM submit helper: the script it writes, its errors, and real jobs on a one-node Slurm cluster.

The cluster tests start munged (unless one already answers), slurmctld and slurmd from a slurm.conf in a
temporary folder (ports picked free, no cgroup plugins: they fail in containers), submit through
``python -m lit_docemb slurm``, and stop the daemons they started. They need root and Debian's ``slurm-wlm``
and ``munge`` packages (``.ci/run`` installs them); they are skipped only when ``sbatch`` is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from lit_docemb.slurm import submit_main


def write_config(path: Path, encoder: str, corpus: str, root: Path, max_steps: int,
                 callbacks: tuple[str, ...] = ()) -> Path:
    """A tiny DocSplit fit config (offline wandb, a checkpoint every step) for jobs of a few seconds."""
    extra = "".join(f"\n            - class_path: {c}" for c in callbacks)
    path.write_text(textwrap.dedent(f"""\
        seed_everything: 0
        trainer:
          default_root_dir: {root}
          max_steps: {max_steps}
          limit_val_batches: 0
          log_every_n_steps: 1
          enable_progress_bar: false
          logger:
            class_path: lightning.pytorch.loggers.WandbLogger
            init_args: {{project: lit_docemb_test, save_dir: {root}, offline: true}}
          callbacks:
            - class_path: lit_docemb.callbacks.RunCheckpoint
              init_args: {{every_n_train_steps: 1}}{extra}
        model:
          class_path: lit_docemb.methods.DocSplit
          init_args: {{encoder: {encoder}, max_length: 64}}
        data:
          class_path: lit_docemb.data.JSONLDataModule
          init_args: {{paths: [{corpus}], batch_size: 2, num_workers: 0, val_fraction: 0}}
        """))
    return path


def directives(script: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(.*))?$", script, flags=re.M))


def test_dry_run_writes_the_job_script_into_the_run_folder(tiny_encoder_dir, corpus_jsonl, tmp_path, monkeypatch,
                                                           capsys):
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, Path("runs/tiny"), 3)
    assert submit_main(["--config", str(config), "--nodes", "2", "--gpus-per-node", "4", "--cpus-per-task", "6",
                        "--partition", "gpu", "--time", "1:00:00", "--account", "lab", "--dry-run",
                        "--", "--data.init_args.batch_size=8"]) is None
    [script_path] = (tmp_path / "runs" / "tiny" / "slurm").glob("*/job.sbatch")
    script = script_path.read_text()
    assert script in capsys.readouterr().out
    assert directives(script) == {
        "job-name": "tiny", "nodes": "2", "ntasks-per-node": "4", "gpus-per-node": "4", "cpus-per-task": "6",
        "partition": "gpu", "time": "1:00:00", "account": "lab", "signal": "SIGUSR1@90", "requeue": "",
        "open-mode": "append", "output": f"{script_path.parent}/%x-%j.out", "chdir": str(tmp_path)}
    [srun] = [line for line in script.splitlines() if line.startswith("srun ")]
    assert srun == (f"srun {sys.executable} -m lit_docemb fit --config {config} --data.init_args.batch_size=8 "
                    f"--trainer.num_nodes 2 --trainer.devices 4 --trainer.accelerator gpu --ckpt_path last")
    assert subprocess.run(["bash", "-n", str(script_path)]).returncode == 0  # valid bash


def test_cpu_job_asks_for_no_gpus(tiny_encoder_dir, corpus_jsonl, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, tmp_path / "run", 3)
    submit_main(["--config", str(config), "--cpu-tasks-per-node", "2", "--job-name", "cpu-test", "--dry-run"])
    [script_path] = (tmp_path / "run" / "slurm").glob("*/job.sbatch")
    found = directives(script_path.read_text())
    assert "gpus-per-node" not in found and "cpus-per-task" not in found
    assert (found["job-name"], found["nodes"], found["ntasks-per-node"]) == ("cpu-test", "1", "2")
    assert "--trainer.devices 2 --trainer.accelerator cpu --ckpt_path last" in script_path.read_text()


@pytest.mark.parametrize("extra, message", [
    ([], "one of the arguments --gpus-per-node --cpu-tasks-per-node is required"),
    (["--gpus-per-node", "2", "--cpu-tasks-per-node", "2"], "not allowed with argument"),
    (["--gpus-per-node", "0"], "--gpus-per-node must be >= 1"),
    (["--gpus-per-node", "1", "--nodes", "0"], "--nodes must be >= 1"),
    (["--gpus-per-node", "1", "--", "--trainer.devices=4"], "the helper sets"),
    (["--gpus-per-node", "1", "--", "--ckpt_path", "x.ckpt"], "the helper sets"),
])
def test_bad_arguments_are_refused(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys, extra, message):
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, tmp_path / "run", 3)
    with pytest.raises(SystemExit):
        submit_main(["--config", str(config), *extra])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_config_that_cannot_resume_is_refused(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, tmp_path / "run", 3)
    with pytest.raises(SystemExit, match="no lit_docemb.callbacks.RunCheckpoint"):
        submit_main(["--config", str(config), "--gpus-per-node", "1", "--", "--trainer.callbacks=[]"])
    no_root = tmp_path / "no_root.yaml"
    no_root.write_text(re.sub(r" *default_root_dir: .*\n", "", config.read_text()))
    with pytest.raises(SystemExit, match="no trainer.default_root_dir"):
        submit_main(["--config", str(no_root), "--gpus-per-node", "1"])
    with pytest.raises(SystemExit):
        submit_main(["--config", str(tmp_path / "missing.yaml"), "--gpus-per-node", "1"])
    assert "--config: no such file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
