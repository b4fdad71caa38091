"""What makes a run survive a requeue: the persistent wandb id, atomic checkpoints, ``--ckpt_path last``."""

from __future__ import annotations

import multiprocessing
import os
import shutil

import pytest
import torch
import yaml
from jsonargparse import Namespace
from runs import tiny_args

from lit_docemb.commands.cli import main
from lit_docemb.commands.loggers import configure_wandb_loggers, persistent_run_id
from lit_docemb.methods.callbacks import AtomicCheckpointIO


def test_persistent_run_id_is_created_once_and_kept(tmp_path):
    first = persistent_run_id(tmp_path / "run")
    assert (tmp_path / "run" / "wandb_id").read_text().strip() == first
    assert persistent_run_id(tmp_path / "run") == first
    assert persistent_run_id(tmp_path / "other") != first
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["wandb_id"]  # no temporary file left


def _id_in_child(run_dir: str, queue) -> None:
    queue.put(persistent_run_id(run_dir))


def test_processes_starting_together_agree_on_one_id(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_id_in_child, args=(str(tmp_path), queue)) for _ in range(6)]
    for p in procs:
        p.start()
    ids = {queue.get(timeout=60) for _ in procs}
    for p in procs:
        p.join()
    assert len(ids) == 1 and ids == {(tmp_path / "wandb_id").read_text().strip()}


def test_corrupt_id_file_is_an_error(tmp_path):
    (tmp_path / "wandb_id").write_text("not an id!\n")
    with pytest.raises(ValueError, match="does not hold a wandb run id"):
        persistent_run_id(tmp_path)


def wandb_logger(**init_args) -> Namespace:
    defaults = {"id": None, "version": None, "resume": None, "group": None, "offline": True}
    return Namespace(class_path="lightning.pytorch.loggers.WandbLogger",
                     init_args=Namespace(**{**defaults, **init_args}))


def test_wandb_logger_gets_the_run_id_resume_and_slurm_group(tmp_path):
    trainer = Namespace(default_root_dir=str(tmp_path), logger=[wandb_logger(), Namespace(
        class_path="lightning.pytorch.loggers.CSVLogger", init_args=Namespace(save_dir=str(tmp_path)))])
    configure_wandb_loggers(trainer, environ={"SLURM_JOB_NAME": "docsplit-bert"})
    args = trainer.logger[0].init_args
    assert args.id == (tmp_path / "wandb_id").read_text().strip()
    assert args.resume == "allow" and args.group == "docsplit-bert"
    assert "id" not in trainer.logger[1].init_args  # other loggers untouched


def test_values_set_in_the_config_are_kept(tmp_path):
    trainer = Namespace(default_root_dir=str(tmp_path), logger=wandb_logger(id="mine", resume="must", group="g"))
    configure_wandb_loggers(trainer, environ={"SLURM_JOB_NAME": "job"})
    assert (trainer.logger.init_args.id, trainer.logger.init_args.resume, trainer.logger.init_args.group) == (
        "mine", "must", "g")
    assert not (tmp_path / "wandb_id").exists()
    trainer = Namespace(default_root_dir=str(tmp_path), logger=wandb_logger())
    configure_wandb_loggers(trainer, environ={})  # outside SLURM: no group
    assert trainer.logger.init_args.group is None


class Unpicklable:
    def __reduce__(self):
        raise RuntimeError("killed while saving")


def test_atomic_checkpoint_keeps_the_previous_file_when_a_save_fails(tmp_path):
    io = AtomicCheckpointIO()
    path = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"global_step": 1, "weight": torch.ones(3)}, path)
    with pytest.raises(RuntimeError, match="killed while saving"):
        io.save_checkpoint({"global_step": 2, "weight": Unpicklable()}, path)
    assert torch.load(path, weights_only=True)["global_step"] == 1
    assert os.listdir(path.parent) == ["last.ckpt"]  # the failed save's temporary file is gone
    io.save_checkpoint({"global_step": 3}, path)
    assert torch.load(path, weights_only=True)["global_step"] == 3


def test_a_fit_removes_the_unfinished_files_of_an_interrupted_save(tiny_encoder_dir, corpus_jsonl, tmp_path):
    base = tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path) + [
        "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint", "--trainer.limit_val_batches=0",
        "--ckpt_path=last"]
    main(["fit", *base, "--trainer.max_steps=1"])
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "kept.ckpt").write_bytes((checkpoints / "last.ckpt").read_bytes())
    partial = [checkpoints / ".last.ckpt.k3_x9abc.tmp", tmp_path / ".hpc_ckpt_2.ckpt.0a1b2c3d.tmp"]
    others = [checkpoints / "notes.tmp", tmp_path / ".last.ckpt.tmp"]  # not the name of an atomic save's file
    for path in partial + others:
        path.write_bytes(b"half a checkpoint")
    kept = (checkpoints / "kept.ckpt").read_bytes()
    resumed = main(["fit", *base, "--trainer.max_steps=2"])
    assert resumed.trainer.global_step == 2
    assert [path.name for path in partial if path.exists()] == []
    assert all(path.read_bytes() == b"half a checkpoint" for path in others)
    assert (checkpoints / "kept.ckpt").read_bytes() == kept
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["global_step"] == 2


def test_ckpt_path_last_starts_cleanly_then_resumes_the_newest_checkpoint(tiny_encoder_dir, corpus_jsonl, tmp_path):
    base = tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path) + [
        "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint", "--trainer.limit_val_batches=0",
        "--ckpt_path=last"]
    first = main(["fit", *base, "--trainer.max_steps=2"])  # no checkpoint yet: starts at step 0
    assert isinstance(first.trainer.strategy.checkpoint_io, AtomicCheckpointIO)
    assert first.trainer.ckpt_path is None and first.trainer.global_step == 2
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)  # loadable without pickle code
    assert last["global_step"] == 2
    # a preemption checkpoint written after last.ckpt (as Lightning's SIGUSR1 handler does) is the newer one
    first.trainer.save_checkpoint(tmp_path / "hpc_ckpt_1.ckpt")
    os.utime(tmp_path / "hpc_ckpt_1.ckpt", (os.path.getmtime(tmp_path / "checkpoints" / "last.ckpt") + 10,) * 2)
    second = main(["fit", *base, "--trainer.max_steps=3"])
    assert second.trainer.ckpt_path == str(tmp_path / "hpc_ckpt_1.ckpt")
    assert second.trainer.global_step == 3


def test_resolved_config_is_handed_to_the_loggers(tiny_encoder_dir, corpus_jsonl, tmp_path):
    main(["fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path), "--trainer.max_steps=1",
          "--trainer.limit_val_batches=0", "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
          f"--trainer.logger.save_dir={tmp_path}"])
    [hparams] = tmp_path.glob("lightning_logs/version_0/hparams.yaml")
    logged = yaml.safe_load(hparams.read_text())["config"]
    assert logged["trainer"]["max_steps"] == 1 and logged["model"]["class_path"] == "lit_docemb.methods.DocSplit"
    assert logged == yaml.safe_load((tmp_path / "config.yaml").read_text())


def _fit(tiny_encoder_dir, corpus_jsonl, root, *extra):
    return main(["fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, root), "--trainer.limit_val_batches=0",
                 "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint", *extra])


def _run_files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_second_fresh_fit_into_a_run_folder_stops_before_writing(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.delenv("LIT_DOCEMB_OVERWRITE", raising=False)
    _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=1")
    before = {p: (tmp_path / p).read_bytes() for p in _run_files(tmp_path)}
    assert "config.yaml" in before and "checkpoints/last.ckpt" in before
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=2", "--model.temperature=0.5")
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: trainer.default_root_dir: {tmp_path} already holds a run (config.yaml, "
                           "checkpoints/epoch=0-step=1.ckpt, checkpoints/last.ckpt); resume it with --ckpt_path last")
    assert "--ckpt_path last" in line and "LIT_DOCEMB_OVERWRITE=1" in line
    assert {p: (tmp_path / p).read_bytes() for p in _run_files(tmp_path)} == before  # nothing written or moved
    # a config.yaml alone (a run stopped before its first checkpoint) is a run too
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "config.yaml").write_text("trainer: {}\n")
    with pytest.raises(SystemExit):
        _fit(tiny_encoder_dir, corpus_jsonl, tmp_path / "alone", "--trainer.max_steps=1")
    assert "alone already holds a run (config.yaml)" in capsys.readouterr().err


def test_validate_into_a_run_folder_still_runs(tiny_encoder_dir, corpus_jsonl, tmp_path):
    _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=1")
    cli = main(["validate", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path),
                f"--ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"])
    assert cli.trainer.ckpt_path == str(tmp_path / "checkpoints" / "last.ckpt")


def test_overwrite_moves_the_previous_run_aside_and_starts_clean(tiny_encoder_dir, corpus_jsonl, tmp_path,
                                                                 monkeypatch):
    from lit_docemb.commands.loggers import configure_wandb_loggers as configure
    first_ids = []
    monkeypatch.setattr("lit_docemb.commands.cli.configure_wandb_loggers",
                        lambda trainer: (configure(trainer), first_ids.append(persistent_run_id(tmp_path))))
    _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=1")
    old_config = (tmp_path / "config.yaml").read_text()
    monkeypatch.setenv("LIT_DOCEMB_OVERWRITE", "1")
    second = _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=2", "--model.temperature=0.5")
    assert second.trainer.global_step == 2 and second.trainer.ckpt_path is None
    [replaced] = tmp_path.glob("replaced-*")
    assert (replaced / "config.yaml").read_text() == old_config
    assert (replaced / "wandb_id").read_text().strip() == first_ids[0]
    assert sorted(p.name for p in (replaced / "checkpoints").iterdir()) == ["epoch=0-step=1.ckpt", "last.ckpt"]
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["model"]["init_args"]["temperature"] == 0.5
    assert first_ids[1] != first_ids[0]  # a new wandb run
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["epoch=0-step=2.ckpt", "last.ckpt"]
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2
    monkeypatch.setenv("LIT_DOCEMB_OVERWRITE", "yes")
    with pytest.raises(SystemExit) as exit_info:
        _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=1")
    assert exit_info.value.code == 2


def test_a_copied_run_folder_resumes_and_keeps_writing_last_ckpt_in_its_new_place(tiny_encoder_dir, corpus_jsonl,
                                                                                  tmp_path):
    original = tmp_path / "original"
    _fit(tiny_encoder_dir, corpus_jsonl, original, "--trainer.max_steps=2")
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    before = {p: (original / p).read_bytes() for p in _run_files(original)}
    resumed = _fit(tiny_encoder_dir, corpus_jsonl, copy, "--trainer.max_steps=3", "--ckpt_path=last")
    assert resumed.trainer.ckpt_path == str(copy / "checkpoints" / "last.ckpt")
    assert resumed.trainer.global_step == 3
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == ["epoch=0-step=3.ckpt", "last.ckpt"]
    assert torch.load(copy / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 3
    assert {p: (original / p).read_bytes() for p in _run_files(original)} == before  # the original is untouched
