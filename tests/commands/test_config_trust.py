"""Configs are data, checkpoints are weights and state (issue 18, items 1 and 2): a config instantiates only
allow-listed classes, refused before anything is built; ``--ckpt_path`` never overrides the config."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback
from test_config_errors import fit_args, run_cli

from lit_docemb.commands import main
from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.commands.trust import refuse_untrusted
from lit_docemb.errors import ConfigError


class MarkerCallback(Callback):
    """A user's callback outside the allow-list: building it leaves a marker file."""

    def __init__(self, marker: str) -> None:
        Path(marker).write_text("built")


def popen(marker: Path) -> dict:
    return {"class_path": "subprocess.Popen", "init_args": {"args": f"touch {marker}", "shell": True}}


CARRIERS = {  # (config under trainer, the key named in the refusal)
    "RichProgressBar.console_kwargs": (
        lambda m: {"callbacks": [{"class_path": "lightning.pytorch.callbacks.RichProgressBar",
                                  "init_args": {"console_kwargs": {"file": popen(m)}}}]},
        "trainer.callbacks[0].init_args.console_kwargs.file.class_path"),
    "PyTorchProfiler.table_kwargs": (
        lambda m: {"profiler": {"class_path": "lightning.pytorch.profilers.PyTorchProfiler",
                                "init_args": {"table_kwargs": {"sort_by": popen(m)}}}},
        "trainer.profiler.init_args.table_kwargs.sort_by.class_path"),
    "WandbLogger.config": (
        lambda m: {"logger": [{"class_path": "lightning.pytorch.loggers.WandbLogger",
                               "init_args": {"offline": True, "config": {"lr": popen(m)}}}]},
        "trainer.logger[0].init_args.config.lr.class_path"),
    "MLFlowLogger.tags": (
        lambda m: {"logger": {"class_path": "lightning.pytorch.loggers.MLFlowLogger",
                              "init_args": {"tags": {"team": popen(m)}}}},
        "trainer.logger.init_args.tags.team.class_path"),
    "nested plain dict": (
        lambda m: {"callbacks": [{"class_path": "lightning.pytorch.callbacks.RichProgressBar",
                                  "init_args": {"console_kwargs": {"a": [{"b": {"c": popen(m)}}]}}}]},
        "trainer.callbacks[0].init_args.console_kwargs.a[0].b.c.class_path"),
}


@pytest.mark.parametrize("carrier", CARRIERS)
def test_fit_refuses_a_class_outside_the_allow_list_at_any_depth(carrier, tiny_encoder_dir, corpus_jsonl,
                                                                  tmp_path, capsys):
    trainer, key = CARRIERS[carrier]
    marker = tmp_path / "MARKER"
    config = tmp_path / "attack.yaml"
    config.write_text(yaml.safe_dump({"trainer": trainer(marker)}))
    line = run_cli(fit_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "run", "--config", str(config)), capsys)
    assert line.startswith(f"error: {key}: subprocess.Popen is not allowed in a config"), line
    assert "LIT_DOCEMB_ALLOW=subprocess" in line
    assert not marker.exists() and not (tmp_path / "run").exists()


def test_a_python_yaml_tag_is_refused(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    config = tmp_path / "tag.yaml"
    config.write_text(f"trainer:\n  max_steps: !!python/object/apply:os.system ['touch {marker}']\n")
    line = run_cli(fit_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "run", "--config", str(config)), capsys)
    assert line.startswith(f"error: {config} (line 2): not a plain YAML config"), line
    assert "python/object/apply:os.system" in line and "never read" in line
    assert not marker.exists()


def test_a_shorthand_class_is_refused_after_parsing_and_allowed_by_the_environment(
        tiny_encoder_dir, corpus_jsonl, tmp_path, capsys, monkeypatch):
    """``--trainer.callbacks+=<path>`` is resolved by jsonargparse; the parsed config is checked before the
    callback is built, and ``LIT_DOCEMB_ALLOW`` lets the user's own module in."""
    marker = tmp_path / "MARKER"
    extra = ["--trainer.callbacks+=test_config_trust.MarkerCallback", f"--trainer.callbacks.marker={marker}"]
    args = fit_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "run", *extra)
    line = run_cli(args, capsys)
    assert line == ("error: trainer.callbacks[0].class_path: test_config_trust.MarkerCallback is not allowed in "
                    "a config (allowed: lit_docemb, torch.optim, lightning.pytorch.loggers, "
                    "lightning.pytorch.callbacks, lightning.pytorch.strategies, lightning.pytorch.plugins, "
                    "lightning.pytorch.profilers, lightning.fabric.plugins); to trust it, set "
                    "LIT_DOCEMB_ALLOW=test_config_trust"), line
    assert not marker.exists()
    monkeypatch.setenv("LIT_DOCEMB_ALLOW", "other.module, test_config_trust")
    cli = DocEmbCLI(args=args[1:], run=False)
    assert any(isinstance(c, MarkerCallback) for c in cli.trainer.callbacks)
    assert marker.read_text() == "built"


def test_a_re_export_inside_lit_docemb_is_judged_by_what_it_names():
    """``lit_docemb.commands.importlib.import_module`` starts with ``lit_docemb`` but names a function of
    ``importlib``: refused by the module it comes from."""
    with pytest.raises(ConfigError, match=r"^a.class_path: importlib.import_module is not allowed"):
        refuse_untrusted({"a": {"class_path": "lit_docemb.commands.importlib.import_module"}})
    refuse_untrusted({"a": {"class_path": "lit_docemb.methods.DocSplit"}, "b": [{"class_path": "torch.optim.AdamW"}]})


def test_evaluate_and_embed_refuse_a_tampered_run_folder(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    run = tmp_path / "run"
    run.mkdir()
    config = {"model": {"class_path": "lit_docemb.methods.DocSplit",
                        "init_args": {"encoder": {"name": tiny_encoder_dir}}},
              "data": {"class_path": "lit_docemb.data.JSONLDataModule", "init_args": {"paths": [corpus_jsonl]}},
              "trainer": {"callbacks": [popen(marker)]}, "ckpt_path": None}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    torch.save({"state_dict": {}}, run / "last.ckpt")
    line = run_cli(["evaluate", "--config", str(run / "config.yaml"), "--ckpt_path", str(run / "last.ckpt")],
                   capsys)
    assert line.startswith("error: trainer.callbacks[0].class_path: subprocess.Popen is not allowed"), line
    config["model"]["init_args"]["optimizer"] = popen(marker)
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    line = run_cli(["embed", "--config", str(run / "config.yaml"), "--ckpt_path", str(run / "last.ckpt"),
                    "--input", corpus_jsonl, "--output", str(tmp_path / "out")], capsys)
    assert line.startswith("error: model.init_args.optimizer.class_path: subprocess.Popen is not allowed"), line
    assert not marker.exists() and not (tmp_path / "out").exists()


# --- checkpoints are weights and state --------------------------------------------------------------------
@pytest.fixture
def one_step_checkpoint(tiny_encoder_dir, corpus_jsonl, tmp_path) -> Path:
    main(fit_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "first", "--data.val_fraction=0"))
    (path,) = (tmp_path / "first").rglob("*.ckpt")
    return path


def test_a_crafted_checkpoint_names_nothing_that_runs(one_step_checkpoint, tiny_encoder_dir, corpus_jsonl,
                                                      tmp_path):
    """A checkpoint whose stored hyper-parameters name ``os._exit`` as the scheduler (loadable with
    ``weights_only=True``): the fit resumes as configured and runs its second step."""
    checkpoint = torch.load(one_step_checkpoint, map_location="cpu", weights_only=True)
    checkpoint["hyper_parameters"] = {**checkpoint.get("hyper_parameters", {}),
                                      "_class_path": "lit_docemb.methods.DocSplit",
                                      "scheduler": {"class_path": "os._exit", "init_args": {"status": 0}},
                                      "optimizer": "os._exit"}
    crafted = tmp_path / "crafted.ckpt"
    torch.save(checkpoint, crafted)
    cli = main(fit_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "second", "--data.val_fraction=0",
                        "--trainer.max_steps=2", f"--ckpt_path={crafted}"))
    assert cli.trainer.global_step == 2
    assert cli.trainer.lr_scheduler_configs == []  # the config's (none), not the checkpoint's
    assert type(cli.trainer.optimizers[0]) is torch.optim.AdamW  # the method's default optimizer


def test_a_new_temperature_on_resume_is_used_and_reported(one_step_checkpoint, tiny_encoder_dir, corpus_jsonl,
                                                          tmp_path, capsys):
    capsys.readouterr()
    cli = main(fit_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "second", "--data.val_fraction=0",
                        "--trainer.max_steps=2", "--model.temperature=0.2", f"--ckpt_path={one_step_checkpoint}"))
    assert cli.trainer.global_step == 2
    assert cli.model.hparams.temperature == 0.2
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: --ckpt_path")]
    assert notes == [(f"note: --ckpt_path {one_step_checkpoint} was trained with model.init_args.temperature=0.05 "
                      "(config: 0.2); using the config's values")]


def test_a_checkpoint_of_another_architecture_stops_with_the_differing_keys(
        one_step_checkpoint, tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    checkpoint = torch.load(one_step_checkpoint, map_location="cpu", weights_only=True)
    checkpoint["hyper_parameters"]["encoder"]["init_args"]["max_length"] = 16
    checkpoint["state_dict"] = {k: v[:16] if "position_embeddings" in k else v
                                for k, v in checkpoint["state_dict"].items()}
    other = tmp_path / "other.ckpt"
    torch.save(checkpoint, other)
    line = run_cli(fit_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "second", "--trainer.max_steps=2",
                            f"--ckpt_path={other}"), capsys)
    assert line.startswith(f"error: --ckpt_path {other}: its weights do not fit the model of this config"), line
    assert "model.init_args.encoder.init_args.max_length=16 (config: 32)" in line
