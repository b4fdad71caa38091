"""What makes a run survive a requeue: the persistent wandb id, atomic checkpoints, ``--ckpt_path last``."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from jsonargparse import Namespace
from runs import run_embed, tiny_args

from lit_docemb.commands import main
from lit_docemb.commands.loggers import configure_wandb_loggers, persistent_run_id
from lit_docemb.commands.run_folder import apply_run_dir
from lit_docemb.errors import ConfigError
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


def test_a_run_folder_keeps_one_copy_of_each_checkpoint(tiny_encoder_dir, corpus_jsonl, tmp_path):
    """last.ckpt is a relative link to the checkpoint its step wrote (the quickstart left two identical 273 MB
    files); moved or copied with its links the run resumes, and embed reads the linked checkpoint."""
    per_epoch = ["--trainer.limit_train_batches=1"]
    root = tmp_path / "run"
    _fit(tiny_encoder_dir, corpus_jsonl, root, "--trainer.max_epochs=2", *per_epoch)
    checkpoints = root / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["epoch=1-step=2.ckpt", "last.ckpt"]
    assert os.readlink(checkpoints / "last.ckpt") == "epoch=1-step=2.ckpt"
    moved = tmp_path / "moved"
    os.rename(root, moved)
    resumed = _fit(tiny_encoder_dir, corpus_jsonl, moved, "--trainer.max_epochs=3", *per_epoch, "--ckpt_path=last")
    assert resumed.trainer.ckpt_path == str(moved / "checkpoints" / "last.ckpt") and resumed.trainer.global_step == 3
    checkpoints = moved / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["epoch=2-step=3.ckpt", "last.ckpt"]
    assert os.readlink(checkpoints / "last.ckpt") == "epoch=2-step=3.ckpt"
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["global_step"] == 3
    copy = tmp_path / "copy"
    shutil.copytree(moved, copy, symlinks=True)  # as cp -r does
    assert os.path.islink(copy / "checkpoints" / "last.ckpt")
    again = _fit(tiny_encoder_dir, corpus_jsonl, copy, "--trainer.max_epochs=4", *per_epoch, "--ckpt_path=last")
    assert again.trainer.global_step == 4 and os.readlink(copy / "checkpoints" / "last.ckpt") == "epoch=3-step=4.ckpt"
    assert os.readlink(checkpoints / "last.ckpt") == "epoch=2-step=3.ckpt"  # the copy's source is untouched
    output = tmp_path / "vectors"
    run_embed(copy / "config.yaml", copy / "checkpoints" / "last.ckpt", Path(corpus_jsonl), output)
    assert any(output.iterdir()) if output.is_dir() else output.exists()


def test_last_ckpt_is_a_file_when_its_step_wrote_no_other_checkpoint(tiny_encoder_dir, corpus_jsonl, tmp_path):
    _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=2", "--trainer.callbacks.save_top_k=0")
    [last] = (tmp_path / "checkpoints").iterdir()
    assert last.name == "last.ckpt" and not last.is_symlink()
    assert torch.load(last, weights_only=True)["global_step"] == 2


def test_a_dangling_last_link_resumes_from_the_newest_intact_checkpoint(tiny_encoder_dir, corpus_jsonl, tmp_path):
    """A kill between the removal of the previous top-k file and the new link leaves last.ckpt pointing nowhere."""
    _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=2")
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "last.ckpt").unlink()
    os.symlink("epoch=0-step=1.ckpt", checkpoints / "last.ckpt")  # removed when step 2 was saved
    resumed = _fit(tiny_encoder_dir, corpus_jsonl, tmp_path, "--trainer.max_steps=3", "--ckpt_path=last")
    assert resumed.trainer.ckpt_path == str(checkpoints / "epoch=0-step=2.ckpt")
    assert resumed.trainer.global_step == 3


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_atomic_checkpoints_are_readable_as_the_umask_allows(tmp_path, umask):
    previous = os.umask(umask)
    try:
        AtomicCheckpointIO().save_checkpoint({"state_dict": {}}, tmp_path / "last.ckpt")
    finally:
        os.umask(previous)
    assert (tmp_path / "last.ckpt").stat().st_mode & 0o777 == 0o666 & ~umask


# --- one flag names the run folder: --run_dir ----------------------------------------------------------------
def _parsed(root=None, save_dir=".", name=None, run_dir=None) -> Namespace:
    """One subcommand's parsed config with a WandbLogger, as jsonargparse leaves it."""
    logger = Namespace(class_path="lightning.pytorch.loggers.WandbLogger",
                       init_args=Namespace(save_dir=save_dir, name=name, project="lit_docemb"))
    return Namespace(run_dir=run_dir, trainer=Namespace(default_root_dir=root, logger=logger))


def _folders(config) -> tuple:
    return (config.run_dir, config.trainer.default_root_dir, config.trainer.logger.init_args.save_dir,
            config.trainer.logger.init_args.name)


def test_run_dir_names_checkpoints_logger_folder_and_run_name():
    config = _parsed(root="runs/colde_aan", save_dir="runs/colde_aan", name="colde_aan", run_dir="runs/mine")
    apply_run_dir(config, ["fit", "--config", "configs/colde/aan.yaml", "--run_dir", "runs/mine"])
    assert _folders(config) == ("runs/mine", "runs/mine", "runs/mine", "mine")


def test_a_config_folder_alone_names_the_logger_folder_and_run_name_it_leaves_unset():
    config = _parsed(root="runs/quickstart")
    apply_run_dir(config, ["fit", "--config", "q.yaml"])
    assert _folders(config) == ("runs/quickstart", "runs/quickstart", "runs/quickstart", "quickstart")
    kept = _parsed(root="runs/g/fold{data.init_args.test_fold}", save_dir="runs/g/fold{data.init_args.test_fold}",
                   name="g_fold{data.init_args.test_fold}")
    apply_run_dir(kept, [])  # a config's own save_dir and name are kept
    assert _folders(kept)[2:] == ("runs/g/fold{data.init_args.test_fold}", "g_fold{data.init_args.test_fold}")


def test_the_long_spelling_on_the_command_line_moves_the_whole_run_as_run_dir_does():
    # a run's saved config.yaml names its folder twice; the command line's default_root_dir wins over both
    config = _parsed(root="runs/other", save_dir="runs/colde_aan", name="colde_aan", run_dir="runs/colde_aan")
    apply_run_dir(config, ["--config", "runs/colde_aan/config.yaml", "--trainer.default_root_dir=runs/other"])
    assert _folders(config) == ("runs/other", "runs/other", "runs/other", "other")
    named = _parsed(root="runs/other/", save_dir="runs/other", name="my name", run_dir="runs/other")
    apply_run_dir(named, ["--run_dir", "runs/other", "--trainer.default_root_dir", "runs/other/",
                          "--trainer.logger.init_args.name", "my name"])  # the same folder; a name of its own
    assert _folders(named) == ("runs/other", "runs/other", "runs/other", "my name")


def test_a_csv_logger_keeps_its_name_a_subfolder_of_the_run():
    config = Namespace(run_dir="runs/x", trainer=Namespace(default_root_dir="runs/r", logger=[Namespace(
        class_path="lightning.pytorch.loggers.CSVLogger", init_args=Namespace(save_dir="runs/r", name="lightning_logs"))]))
    apply_run_dir(config, ["--run_dir=runs/x"])
    assert config.trainer.logger[0].init_args.as_dict() == {"save_dir": "runs/x", "name": "lightning_logs"}


@pytest.mark.parametrize("given, key", [
    (["--trainer.default_root_dir", "runs/y"], "trainer.default_root_dir"),
    (["--trainer.logger.init_args.save_dir=runs/y"], "trainer.logger.init_args.save_dir"),
])
def test_run_dir_with_another_folder_on_the_same_command_line_is_refused(given, key):
    config = _parsed(root="runs/y", save_dir="runs/y", run_dir="runs/x")
    with pytest.raises(ConfigError, match=rf"^--run_dir runs/x and --{key} runs/y name two run folders: give "
                                          rf"--run_dir alone"):
        apply_run_dir(config, ["--run_dir", "runs/x", *given])


def test_run_dir_through_the_cli(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    """A real fit: --run_dir is the folder of the checkpoints, config.yaml and the logger; a second folder on the
    same command line stops before anything is written, in one line, status 2."""
    run = tmp_path / "runs" / "mine"
    args = [arg for arg in tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path)
            if arg != "--trainer.logger=false" and not arg.startswith("--trainer.default_root_dir")]
    cli = main(["fit", *args, "--trainer.limit_val_batches=0", "--trainer.max_steps=1",
                "--trainer.logger=lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir=.",
                "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint", f"--run_dir={run}"])
    assert cli.trainer.default_root_dir == str(run) and cli.trainer.logger.save_dir == str(run)
    assert (run / "checkpoints" / "last.ckpt").is_file() and (run / "config.yaml").is_file()
    assert (run / "lightning_logs" / "version_0" / "hparams.yaml").is_file()  # CSVLogger: <save_dir>/<name>/
    assert yaml.safe_load((run / "config.yaml").read_text())["run_dir"] == str(run)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        main(["fit", *args, f"--run_dir={tmp_path / 'other'}", f"--trainer.default_root_dir={tmp_path / 'third'}"])
    assert stopped.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (f"error: --run_dir {tmp_path / 'other'} and --trainer.default_root_dir {tmp_path / 'third'} "
                    "name two run folders: give --run_dir alone (it sets trainer.default_root_dir, the logger's "
                    "save_dir and name)")
    assert not (tmp_path / "other").exists() and not (tmp_path / "third").exists()
