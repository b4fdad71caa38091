"""The trainer pieces every experiment shares are written once, in ``configs/trainer/``, and named by path
(``logger: ../trainer/wandb_logger.yaml``, ``callbacks: [../trainer/run_checkpoint.yaml, ...]``): each shipped
config resolves to the logger, callbacks and run folder it had when it copied them (``trainer_settings.json``,
written from the configs before they named the pieces; a RunCheckpoint as it checkpoints, its monitor the method's
when unset), and none writes a logger or a RunCheckpoint inline again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonargparse import ArgumentParser
from jsonargparse._util import import_object

from lightning.pytorch.loggers import Logger

from lit_docemb.commands.sbatch import check_run_config
from lit_docemb.commands.slurm import resolve_fit_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
#: configs/<path> -> its resolved trainer.default_root_dir, logger and callbacks, each argument its class defaults
#: (a summary, :func:`summary`), from the configs before they named the pieces; the wandb run names of
#: baselines/classify/ are their run folder's since those configs left the logger to their experiment's piece.
SETTINGS = json.loads((Path(__file__).with_name("trainer_settings.json")).read_text())
#: Pieces added with a second --config after an experiment (as tests/commands/test_cli.py adds them).
EXPERIMENT = CONFIGS / "docsplit" / "bert_wikipedia.yaml"
CLASSIFY_EXPERIMENT = CONFIGS / "graph_roberta" / "classify_hyperpartisan.yaml"
#: The pieces that are a value of one key (a class_path of their own), and that key.
VALUE_PIECES = {path.name: "logger" if issubclass(import_object(piece["class_path"]), Logger) else "callbacks"
                for path in sorted((CONFIGS / "trainer").glob("*.yaml"))
                if "class_path" in (piece := yaml.safe_load(path.read_text()))}
RUN_CHECKPOINT = "lit_docemb.methods.callbacks.RunCheckpoint"
#: RunCheckpoint's arguments a config may still write inline: a checkpoint interval, which no method declares and
#: a YAML list item cannot change on the piece it names (configs/trainer/run_checkpoint.yaml says why).
INTERVALS = {"every_n_train_steps", "train_time_interval", "every_n_epochs"}

_defaults: dict[str, dict] = {}


def class_defaults(class_path: str) -> dict:
    if class_path not in _defaults:
        parser = ArgumentParser(exit_on_error=False)
        parser.add_class_arguments(import_object(class_path), "x", fail_untyped=False)
        _defaults[class_path] = parser.get_defaults().x.as_dict()
    return _defaults[class_path]


def summary(item):
    """A resolved ``{class_path, init_args}`` with only the arguments that differ from the class's defaults (a
    Lightning release adding an argument leaves it unchanged); anything else as it is."""
    if isinstance(item, list):
        return [summary(i) for i in item]
    if not isinstance(item, dict) or "class_path" not in item:
        return item
    defaults = class_defaults(item["class_path"])
    args = {k: v for k, v in (item.get("init_args") or {}).items() if k not in defaults or defaults[k] != v}
    return {"class_path": item["class_path"], **({"init_args": args} if args else {})}


def as_checkpointed(callbacks, model_class_path: str):
    """``callbacks`` (summarised) with each RunCheckpoint as it checkpoints: without a ``monitor``, with the
    ``checkpoint_monitor`` the method declares (``RunCheckpoint.setup``); ``every_n_epochs: 1`` alone and ``mode:
    min`` left out, ModelCheckpoint's defaults."""
    declared = getattr(import_object(model_class_path), "checkpoint_monitor", None)
    out = []
    for item in callbacks or []:
        if isinstance(item, dict) and item.get("class_path") == RUN_CHECKPOINT:
            args = dict(item.get("init_args") or {})
            if "monitor" not in args and declared is not None:
                args.update(monitor=declared[0], mode=declared[1])
            if args.get("mode") == "min":
                del args["mode"]  # ModelCheckpoint's default, as summary() leaves it out
            if args.get("every_n_epochs") == 1 and not INTERVALS - {"every_n_epochs"} & set(args):
                del args["every_n_epochs"]
            item = {"class_path": RUN_CHECKPOINT, **({"init_args": args} if args else {})}
        out.append(item)
    return out


def resolved_config(config: Path, *extra: str) -> dict:
    """The config ``fit --config <config>`` runs with (its run folder applied)."""
    parts = config.relative_to(CONFIGS).parts
    configs = [config]
    if parts[0] == "baselines":
        configs.insert(0, CLASSIFY_EXPERIMENT if parts[:2] == ("baselines", "classify") else EXPERIMENT)
    return resolve_fit_config([*(a for c in configs for a in ("--config", str(c))), *extra])


def resolved_trainer(config: Path, *extra: str) -> dict:
    """The trainer settings ``fit --config <config>`` runs with (its run folder applied), summarised."""
    trainer = resolved_config(config, *extra)["trainer"]
    return {key: summary(trainer.get(key)) for key in ("default_root_dir", "logger", "callbacks")}


@pytest.mark.parametrize("config", sorted(SETTINGS))
def test_each_config_resolves_to_the_trainer_settings_it_had(config):
    resolved = resolved_config(CONFIGS / config)
    trainer = {key: summary(resolved["trainer"].get(key)) for key in ("default_root_dir", "logger", "callbacks")}
    model = resolved["model"]["class_path"]
    had = SETTINGS[config]
    assert {**trainer, "callbacks": as_checkpointed(trainer["callbacks"], model)} == \
        {**had, "callbacks": as_checkpointed(had["callbacks"], model)}


def test_every_config_with_a_trainer_is_in_the_settings():
    with_trainer = {str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob("*.yaml")
                    if p.relative_to(CONFIGS).parts[0] != "trainer" and "trainer" in (yaml.safe_load(p.read_text()) or {})}
    assert with_trainer == set(SETTINGS)


def _inline(node) -> list:
    """Each ``{class_path, init_args}`` written inline in a trainer section's logger and callbacks."""
    items = node if isinstance(node, list) else [node]
    return [item for item in items if isinstance(item, dict) and "class_path" in item]


def test_configs_name_loggers_and_run_checkpoint_through_the_pieces():
    """A config names its logger by a piece's path (a run folder names the run and its folder), and RunCheckpoint by
    ``run_checkpoint.yaml`` (the method declares the monitor); it writes RunCheckpoint inline only to set a
    checkpoint interval, and nothing more."""
    inline = []
    for path in sorted(CONFIGS.rglob("*.yaml")):
        trainer = (yaml.safe_load(path.read_text()) or {}).get("trainer") or {}
        where = path.relative_to(ROOT)
        inline += [f"{where}: trainer.logger {item['class_path']} inline" for item in _inline(trainer.get("logger"))]
        for item in _inline(trainer.get("callbacks")):
            args = item.get("init_args") or {}
            if item["class_path"] == RUN_CHECKPOINT and (set(args) - INTERVALS or args in ({}, {"every_n_epochs": 1})):
                inline.append(f"{where}: trainer.callbacks restates RunCheckpoint ({args}): name "
                              "../trainer/run_checkpoint.yaml")
    assert not inline


def test_pieces_resolve_from_any_working_folder(monkeypatch, tmp_path):
    """A piece's path is relative to the config that names it, not to the working folder."""
    monkeypatch.chdir(tmp_path)
    assert resolved_trainer(CONFIGS / "colde" / "aan.yaml") == SETTINGS["colde/aan.yaml"]


def test_run_dir_moves_a_config_with_pieces_to_its_folder():
    trainer = resolved_trainer(CONFIGS / "quickstart.yaml", "--run_dir", "runs/elsewhere")
    assert trainer["default_root_dir"] == "runs/elsewhere"
    assert trainer["logger"]["init_args"] == {"project": "lit_docemb", "offline": True, "save_dir": "runs/elsewhere",
                                              "name": "elsewhere"}
    assert trainer["callbacks"][0] == {"class_path": "lit_docemb.methods.callbacks.RunCheckpoint"}
    # the folder a SLURM job resumes from is the one --run_dir names
    fit_args = ["--config", str(CONFIGS / "quickstart.yaml"), "--run_dir", "runs/elsewhere"]
    assert check_run_config(resolve_fit_config(fit_args)) == "runs/elsewhere"


def test_a_piece_naming_an_untrusted_class_is_refused_before_it_is_imported(tmp_path, capsys):
    from lit_docemb.commands import main

    (tmp_path / "pieces").mkdir()
    (tmp_path / "pieces" / "logger.yaml").write_text("class_path: not_trusted_module.Logger\n")
    config = tmp_path / "experiment.yaml"
    config.write_text(EXPERIMENT.read_text().replace("logger: ../trainer/wandb_logger.yaml",
                                                     "logger: pieces/logger.yaml"))
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", str(config)])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.startswith("error: trainer.logger (pieces/logger.yaml).class_path: "
                                              "not_trusted_module.Logger is not allowed in a config")
