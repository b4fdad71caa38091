"""Cross-validation folds run in folders of their own: ``{<config key>}`` in ``trainer.default_root_dir`` and the
loggers' folders is filled from the config (Robust04's ``fold{data.init_args.test_fold}``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonargparse import Namespace

from lit_docemb.commands import main
from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.commands.run_folder import fill_run_folder
from lit_docemb.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ROBUST04 = str(ROOT / "configs/graph_roberta/retrieval_robust04.yaml")


def test_placeholders_are_filled_from_the_config():
    config = Namespace(data=Namespace(init_args=Namespace(test_fold=3)), trainer=Namespace(
        default_root_dir="runs/r/fold{data.init_args.test_fold}",
        logger=[Namespace(class_path="x", init_args=Namespace(save_dir="runs/r/fold{data.init_args.test_fold}",
                                                              name="r_{data.init_args.test_fold}"))]))
    fill_run_folder(config)
    assert config.trainer.default_root_dir == "runs/r/fold3"
    assert config.trainer.logger[0].init_args.save_dir == "runs/r/fold3"
    assert config.trainer.logger[0].init_args.name == "r_3"


def test_an_unknown_placeholder_names_the_key():
    config = Namespace(data=Namespace(init_args=Namespace()), trainer=Namespace(default_root_dir="runs/{data.fold}"))
    with pytest.raises(ConfigError, match=r"trainer.default_root_dir: 'runs/\{data.fold\}' names \{data.fold\}"):
        fill_run_folder(config)


def test_robust04_folds_run_in_their_own_folders(tiny_encoder_dir):
    """Fold 2 run after fold 1 lands in fold2/, not in fold 1's folder (which would keep fold 1's config.yaml)."""
    folders = []
    for fold in (1, 2):
        cli = DocEmbCLI(args=["--config", ROBUST04, f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                              "--model.init_args.backbone.init_args.passages.max_passage_tokens=64",
                              "--model.init_args.checkpoint=null",
                              f"--data.init_args.test_fold={fold}",
                              "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true"],
                        run=False)
        folders.append((cli.trainer.default_root_dir, cli.trainer.loggers[0].save_dir))
    assert folders == [(f"runs/graph_roberta_retrieval_robust04/fold{f}",) * 2 for f in (1, 2)]


def test_a_bad_placeholder_stops_fit_with_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", ROBUST04, "--trainer.default_root_dir=runs/x/fold{data.init_args.fold}"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().startswith("error: trainer.default_root_dir: 'runs/x/fold{data.init_args.fold}'")


def test_the_run_name_is_that_of_the_filled_folder(tiny_encoder_dir):
    """A placeholder whose value is a path (a data folder) is filled before the folder names the run: the wandb
    name joins the filled folder's parts, it does not carry the value's slashes."""
    cli = DocEmbCLI(args=["--config", ROBUST04, f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                          "--model.init_args.backbone.init_args.passages.max_passage_tokens=64",
                          "--model.init_args.checkpoint=null", "--data.init_args.folds=data/robust04/folds.json",
                          "--trainer.default_root_dir=runs/baselines/{data.init_args.folds}",
                          "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true"],
                    run=False)
    assert cli.trainer.default_root_dir == "runs/baselines/data/robust04/folds.json"
    assert cli.config["trainer"]["logger"]["init_args"]["name"] == "baselines_data_robust04_folds.json"
