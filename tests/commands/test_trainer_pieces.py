"""The trainer pieces every experiment shares are written once, in ``configs/trainer/``, and named by path
(``logger: ../trainer/wandb_logger.yaml``, ``callbacks: [../trainer/run_checkpoint.yaml, ...]``): each shipped
config resolves to the logger, callbacks and run folder it had when it copied them (``trainer_settings.json``,
written from the configs before they named the pieces), and none copies a piece again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonargparse import ArgumentParser
from jsonargparse._util import import_object

from lit_docemb.commands.sbatch import check_run_config
from lit_docemb.commands.slurm import resolve_fit_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
#: configs/<path> -> its resolved trainer.default_root_dir, logger and callbacks, each argument its class defaults
#: (a summary, :func:`summary`), from the configs before they named the pieces.
SETTINGS = json.loads((Path(__file__).with_name("trainer_settings.json")).read_text())
#: Pieces added with a second --config after an experiment (as tests/commands/test_cli.py adds them).
EXPERIMENT = CONFIGS / "docsplit" / "bert_wikipedia.yaml"
CLASSIFY_EXPERIMENT = CONFIGS / "graph_roberta" / "classify_hyperpartisan.yaml"
#: The pieces that are a value of one key, and that key.
VALUE_PIECES = {"wandb_logger.yaml": "logger", "run_checkpoint.yaml": "callbacks"}

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


def resolved_trainer(config: Path, *extra: str) -> dict:
    """The trainer settings ``fit --config <config>`` runs with (its run folder applied), summarised."""
    parts = config.relative_to(CONFIGS).parts
    configs = [config]
    if parts[0] == "baselines":
        configs.insert(0, CLASSIFY_EXPERIMENT if parts[:2] == ("baselines", "classify") else EXPERIMENT)
    trainer = resolve_fit_config([*(a for c in configs for a in ("--config", str(c))), *extra])["trainer"]
    return {key: summary(trainer.get(key)) for key in ("default_root_dir", "logger", "callbacks")}


@pytest.mark.parametrize("config", sorted(SETTINGS))
def test_each_config_resolves_to_the_trainer_settings_it_had(config):
    assert resolved_trainer(CONFIGS / config) == SETTINGS[config]


def test_every_config_with_a_trainer_is_in_the_settings():
    with_trainer = {str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob("*.yaml")
                    if p.relative_to(CONFIGS).parts[0] != "trainer" and "trainer" in (yaml.safe_load(p.read_text()) or {})}
    assert with_trainer == set(SETTINGS)


def _inline(node) -> list:
    """Each ``{class_path, init_args}`` written inline in a trainer section's logger and callbacks."""
    items = node if isinstance(node, list) else [node]
    return [item for item in items if isinstance(item, dict) and "class_path" in item]


def test_no_config_copies_a_piece():
    """A config names a piece by path; it writes a logger or a RunCheckpoint inline only to say what differs (a
    CSV logger, a monitor or a checkpoint interval; a run name other than its folder's, on a piece added to an
    experiment that names the wandb logger), never repeating the piece's values."""
    pieces = {name: yaml.safe_load((CONFIGS / "trainer" / name).read_text()) for name in VALUE_PIECES}
    copies = []
    for path in sorted(CONFIGS.rglob("*.yaml")):
        trainer = (yaml.safe_load(path.read_text()) or {}).get("trainer") or {}
        for name, key in VALUE_PIECES.items():
            piece = pieces[name]
            for item in _inline(trainer.get(key)):
                args, repeated = item.get("init_args") or {}, piece.get("init_args") or {}
                if item["class_path"] == piece["class_path"] and (repeated or not args) and all(
                        args.get(k) == v for k, v in repeated.items()):  # the piece again, maybe with more
                    copies.append(f"{path.relative_to(ROOT)}: trainer.{key} copies configs/trainer/{name}")
    assert not copies


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
