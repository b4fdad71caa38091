"""The SLURM submit helper: the script it writes, its errors, and real jobs on a one-node Slurm cluster.

The cluster tests start their own munged (on a socket of their own), slurmctld and slurmd from a slurm.conf in a
temporary folder (ports picked free, no cgroup plugins: they fail in containers), submit through
``python -m lit_docemb slurm``, and stop the daemons they started. Two such clusters may run at once (two
pytest-xdist workers, two test sessions): they share no daemon, and their job ids, which Lightning turns into the
jobs' DDP ports, start at different numbers. They need root and Debian's ``slurm-wlm`` and ``munge`` packages
(``.ci/run`` installs them); they are skipped only when ``sbatch`` is not installed.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import torch

from lit_docemb.commands.slurm import main as slurm_main


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
            - class_path: lit_docemb.methods.callbacks.RunCheckpoint
              init_args: {{every_n_train_steps: 1}}{extra}
        model:
          class_path: lit_docemb.methods.DocSplit
          init_args: {{encoder: {{name: {encoder}, max_length: 64}}}}
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
    assert slurm_main(["--config", str(config), "--nodes", "2", "--gpus-per-node", "4", "--cpus-per-task", "6",
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
    assert srun == (f"srun --kill-on-bad-exit=1 {sys.executable} -m lit_docemb fit --config {config} "
                    f"--data.init_args.batch_size=8 --trainer.num_nodes 2 --trainer.devices 4 "
                    f"--trainer.accelerator gpu --ckpt_path last")
    assert subprocess.run(["bash", "-n", str(script_path)]).returncode == 0  # valid bash


def test_cpu_job_asks_for_no_gpus(tiny_encoder_dir, corpus_jsonl, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, tmp_path / "run", 3)
    slurm_main(["--config", str(config), "--cpu-tasks-per-node", "2", "--job-name", "cpu-test", "--dry-run"])
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
        slurm_main(["--config", str(config), *extra])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_config_that_cannot_resume_is_refused(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, tmp_path / "run", 3)
    with pytest.raises(SystemExit, match="no lit_docemb.methods.callbacks.RunCheckpoint"):
        slurm_main(["--config", str(config), "--gpus-per-node", "1", "--", "--trainer.callbacks=[]"])
    no_root = tmp_path / "no_root.yaml"
    no_root.write_text(re.sub(r" *default_root_dir: .*\n", "", config.read_text()))
    with pytest.raises(SystemExit, match="no trainer.default_root_dir"):
        slurm_main(["--config", str(no_root), "--gpus-per-node", "1"])
    with pytest.raises(SystemExit):
        slurm_main(["--config", str(tmp_path / "missing.yaml"), "--gpus-per-node", "1"])
    assert "--config: no such file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# --- a real one-node Slurm cluster ------------------------------------------------------------------------------

SLURM_CONF = """\
ClusterName=lit-docemb-test
FirstJobId={first_job_id}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation={state}/slurmctld
SlurmdSpoolDir={state}/slurmd
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd.log
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def first_job_id(jobs: int = 10) -> int:
    """A first job id whose next ``jobs`` jobs find their DDP port free. Lightning puts a SLURM job's rendezvous on
    port 15000 + the job id's last four digits, so two clusters on one machine that both number from 1 (another
    test session's) would start their first jobs on one port, and their ranks would meet each other's."""
    def free(port: int) -> bool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    for first in random.Random().sample(range(1000, 10_000 - jobs), 200):
        if all(free(15000 + first + i) for i in range(jobs)):
            return first
    raise RuntimeError(f"no {jobs} consecutive free ports between 16000 and 25000 for the cluster's jobs")


def munge_answers(socket_path: Path) -> bool:
    cred = subprocess.run(["munge", "-n", f"--socket={socket_path}"], capture_output=True)
    return cred.returncode == 0 and subprocess.run(["unmunge", f"--socket={socket_path}"], input=cred.stdout,
                                                   capture_output=True).returncode == 0


def start_munged(folder: Path) -> tuple[subprocess.Popen, Path]:
    """munged as user munge with its socket, pid, seed and log in ``folder``, which it must own and everyone must be
    able to enter (munged refuses anything else), under a parent it can reach: pytest's temporary folders are
    root's alone, so ``folder`` lies elsewhere. Returns the daemon and its socket."""
    folder.mkdir(mode=0o711)
    folder.chmod(0o711)  # mkdir's mode is masked by the umask
    shutil.chown(folder, "munge", "munge")
    socket_path = folder / "munge.socket"
    daemon = subprocess.Popen(["munged", "--foreground", f"--socket={socket_path}", f"--pid-file={folder}/munged.pid",
                               f"--seed-file={folder}/munged.seed", f"--log-file={folder}/munged.log"],
                              user="munge", group="munge", stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    wait_for(lambda: munge_answers(socket_path), 20, "munged answering", folder / "munged.log")
    return daemon, socket_path


def wait_for(condition, timeout_s: float, what: str, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.5)
    tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
    raise TimeoutError(f"{what}: not within {timeout_s} s\n{tail}")


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """munged, slurmctld and slurmd on this machine, all three this cluster's own; yields the environment that
    points Slurm's commands at the cluster's slurm.conf. Stops the processes it started and removes munged's
    folder."""
    if shutil.which("sbatch") is None:
        pytest.skip("sbatch is not installed (apt-get install slurm-wlm munge; .ci/run does)")
    cpus = os.cpu_count() or 1
    if cpus < 2:
        raise RuntimeError(f"the cluster tests run 2 tasks and need 2 CPUs; this machine has {cpus}")
    state = tmp_path_factory.mktemp("slurm")
    munge_parent = Path(tempfile.mkdtemp(prefix="lit_docemb_munge_"))
    munge_parent.chmod(0o755)
    started: list[subprocess.Popen] = []
    try:
        munged, munge_socket = start_munged(munge_parent / "munge")
        started.append(munged)
        ctld_port, slurmd_port = free_ports(2)
        conf = state / "slurm.conf"
        conf.write_text(SLURM_CONF.format(host=socket.gethostname(), ctld_port=ctld_port, slurmd_port=slurmd_port,
                                          state=state, cpus=cpus, first_job_id=first_job_id(),
                                          munge_socket=munge_socket))
        # jobs start their own wandb service, never the one an in-process fit of this test session may have left
        env = {**{k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}, "SLURM_CONF": str(conf)}
        started.append(subprocess.Popen(["slurmctld", "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT))
        started.append(subprocess.Popen(["slurmd", "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT))

        def node_idle():
            result = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
            return result.stdout.strip() == "idle"

        wait_for(node_idle, 60, "slurm node idle", state / "slurmctld.log")
        yield env
        cancel_all_jobs(env)
    finally:
        for proc in reversed(started):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(munge_parent, ignore_errors=True)


def cancel_all_jobs(env: dict) -> None:
    """Cancels the cluster's jobs and waits until their processes are gone: stopping slurmd does not end the
    job steps it launched (proctrack/linuxproc), and a step left running would hold its port and CPUs."""
    queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True).stdout.split()
    if queued:
        subprocess.run(["scancel", "--full", *queued], env=env, check=True)
        wait_for(lambda: not subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True,
                                            text=True).stdout.split(), 120, f"jobs {queued} ending")


def job_state(job_id: str, env: dict) -> dict[str, str]:
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True, text=True)
    return dict(re.findall(r"(\w+)=(\S*)", shown.stdout))


def submit(config: Path, env: dict, cwd: Path) -> tuple[str, Path]:
    """Submits ``config`` as a 2-task CPU job through the real CLI; returns the job id and its output folder."""
    result = subprocess.run([sys.executable, "-m", "lit_docemb", "slurm", "--config", str(config),
                             "--cpu-tasks-per-node", "2"], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    job_id, log_dir = re.search(r"submitted job (\d+): \S+; output in (\S+)", result.stdout).groups()
    return job_id, Path(log_dir)


def wait_until_done(job_id: str, env: dict, log_dir: Path, timeout_s: float) -> dict[str, str]:
    done = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")
    output = next(iter(log_dir.glob("*.out")), None)
    return wait_for(lambda: (s := job_state(job_id, env)).get("JobState") in done and s, timeout_s,
                    f"job {job_id} finishing", output)


def job_output(log_dir: Path) -> str:
    return "".join(p.read_text() for p in log_dir.glob("*.out"))


@pytest.mark.slow
def test_two_task_cpu_ddp_job_completes_and_checkpoints(slurm_cluster, tiny_encoder_dir, corpus_jsonl, tmp_path):
    root = tmp_path / "run"
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, root, max_steps=3)
    job_id, log_dir = submit(config, slurm_cluster, tmp_path)
    state = wait_until_done(job_id, slurm_cluster, log_dir, 300)
    output = job_output(log_dir)
    assert state["JobState"] == "COMPLETED", output[-4000:]
    assert state["NumTasks"] == "2"
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in output  # two DDP processes, rank and world from SLURM
    checkpoint = torch.load(root / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert checkpoint["global_step"] == 3
    assert all(torch.isfinite(v).all() for v in checkpoint["state_dict"].values() if v.is_floating_point())
    run_id = (root / "wandb_id").read_text().strip()
    assert [p.name.endswith(f"-{run_id}") for p in (root / "wandb").glob("offline-run-*")] == [True]


STEP_REPORT = '''\
import os
from lightning.pytorch.callbacks import Callback


class FirstStepReport(Callback):
    """Prints the global step at which each start of the job trains its first batch."""

    def __init__(self):
        self.reported = False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self.reported and trainer.is_global_zero:
            restart = os.environ.get("SLURM_RESTART_COUNT", "0")
            print(f"first step {trainer.global_step} restart {restart}", flush=True)
        self.reported = True
'''


@pytest.mark.slow
@pytest.mark.parametrize("preemption", ["scontrol requeue", "SIGUSR1"])
def test_requeued_job_resumes_from_its_checkpoint_into_the_same_wandb_run(slurm_cluster, tiny_encoder_dir,
                                                                          corpus_jsonl, tmp_path, preemption):
    """``scontrol requeue``: Slurm kills and requeues the job, which resumes from ``last.ckpt``. SIGUSR1 (what
    ``--signal=SIGUSR1@90`` sends before the time limit): SlurmRequeue saves ``hpc_ckpt_1.ckpt`` at the next batch
    end and requeues the job itself, which resumes from that checkpoint, the newer one."""
    (tmp_path / "step_report.py").write_text(STEP_REPORT)
    env = {**slurm_cluster, "PYTHONPATH": os.pathsep.join([str(tmp_path), slurm_cluster.get("PYTHONPATH", "")])}
    root = tmp_path / "run"
    max_steps = 60
    config = write_config(tmp_path / "tiny.yaml", tiny_encoder_dir, corpus_jsonl, root, max_steps,
                          callbacks=("step_report.FirstStepReport",))
    job_id, log_dir = submit(config, env, tmp_path)
    last = root / "checkpoints" / "last.ckpt"

    def step_before_requeue() -> int:  # last.ckpt is replaced atomically: reading it while training is safe
        return last.exists() and torch.load(last, map_location="cpu", weights_only=True)["global_step"] >= 3

    wait_for(step_before_requeue, 300, "3 steps checkpointed", next(iter(log_dir.glob("*.out")), None))
    assert job_state(job_id, env)["JobState"] == "RUNNING"
    command = ["scontrol", "requeue", job_id] if preemption == "scontrol requeue" else [
        "scancel", "--signal=USR1", job_id]  # to the job steps' tasks, as --signal does
    requeue = subprocess.run(command, env=env, capture_output=True, text=True)
    assert requeue.returncode == 0, requeue.stderr
    # Slurm 22.05 holds a requeued job for about 2 minutes (Reason=BeginTime); start it as soon as it is pending
    pending = wait_for(lambda: (s := job_state(job_id, env)).get("JobState") == "PENDING" and s, 120,
                       "job requeued", next(iter(log_dir.glob("*.out")), None))
    assert pending["Reason"] == "BeginTime"
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=env, check=True)

    state = wait_until_done(job_id, env, log_dir, 400)
    output = job_output(log_dir)
    assert state["JobState"] == "COMPLETED", output[-4000:]
    assert state["Restarts"] == "1"
    starts = [(int(step), int(restart)) for step, restart in re.findall(r"first step (\d+) restart (\d+)", output)]
    assert [restart for _, restart in starts] == [0, 1], output[-4000:]
    assert starts[0][0] == 0 and 3 <= starts[1][0] < max_steps  # the requeued start continued, not from 0
    [resumed_from] = re.findall(r"Restoring states from the checkpoint path at (\S+)", output)
    if preemption == "scontrol requeue":
        # last.ckpt, or, when the kill fell between Lightning removing the top-k file last.ckpt linked to and the
        # new link, the newest intact checkpoint of the run, which last_checkpoint falls back to (the same step)
        intact = [str(p) for p in (root / "checkpoints").glob("epoch=*.ckpt")]
        assert resumed_from in (str(root / "checkpoints" / "last.ckpt"), *intact), resumed_from
    else:  # the preemption checkpoint, or a last.ckpt of the same or a later step: the newest one
        preempted_at = torch.load(root / "hpc_ckpt_1.ckpt", map_location="cpu", weights_only=True)["global_step"]
        assert resumed_from in (str(root / "hpc_ckpt_1.ckpt"), str(root / "checkpoints" / "last.ckpt"))
        assert starts[1][0] >= preempted_at
        assert f"checkpoint saved, SLURM job {job_id} requeued" in output  # by SlurmRequeue, at a batch end
        assert "Handling auto-requeue signal" not in output  # Lightning's in-handler save is off under SLURM
    assert torch.load(last, map_location="cpu", weights_only=True)["global_step"] == max_steps
    run_id = (root / "wandb_id").read_text().strip()
    runs = sorted((root / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(p.name.endswith(f"-{run_id}") for p in runs)  # one wandb run, two starts
    assert (root / "config.yaml").exists()
