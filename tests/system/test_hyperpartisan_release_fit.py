"""docs/reproduce.md's Hyperpartisan commands without the converter: ``fit`` then ``test`` of the shipped
classification config on the SemEval-2019 task 4 release layout (articles and ground-truth XML, Longformer's
hp-splits.json), the tiny encoder in place of the hub model."""

from __future__ import annotations

import sys

import pytest
import yaml
from corpus_files import write_semeval_hyperpartisan
from journeys import ROOT, journey_config

from lit_docemb.commands import main


@pytest.mark.slow
def test_fit_and_test_on_the_semeval_release(tiny_encoder_dir, tmp_path, capsys):
    prepared = journey_config(ROOT / "configs/graph_roberta/classify_hyperpartisan.yaml", tiny_encoder_dir, tmp_path)
    articles = write_semeval_hyperpartisan(tmp_path / "release")
    data = ["--data.init_args.source", str(articles), "--data.init_args.source_format", "semeval_hyperpartisan",
            "--data.init_args.splits_file", str(articles.parent / "hp-splits.json")]
    settings = yaml.safe_load(prepared.read_text(encoding="utf-8"))
    assert settings["data"]["init_args"]["val_split"] == "dev" and settings["data"]["init_args"]["test_split"] == "test"
    try:
        main(["fit", "--config", str(prepared), *data])
    finally:  # the offline wandb run ends with the fit, as the fit's process would end it
        wandb_run = getattr(sys.modules.get("wandb"), "run", None)
        if wandb_run is not None:
            wandb_run.finish()
    stats = yaml.safe_load((tmp_path / "run" / "data_stats.json").read_text(encoding="utf-8"))
    assert (stats["documents"]["train"], stats["validation"]["validation"], stats["test"]["test"]) == (12, 4, 4)
    capsys.readouterr()
    main(["test", "--config", str(prepared), *data, "--ckpt_path", str(tmp_path / "run" / "checkpoints" / "last.ckpt")])
    assert "test/accuracy" in capsys.readouterr().out
