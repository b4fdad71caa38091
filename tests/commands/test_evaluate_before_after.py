"""The before/after report on a quickstart-like run (the quickstart's config on the tiny encoder and installed
documents of two sources): ``fit`` prints it from the callback, ``evaluate --before_after`` on the run folder
prints the same figures, and the command refuses to run without a checkpoint."""

from __future__ import annotations

import json

import pytest
from journeys import ROOT, journey_config

from lit_docemb.commands import main


pytestmark = pytest.mark.slow  # a fit and two measurements of each model: about a minute on 2 loaded cores


@pytest.fixture(scope="module")
def quickstart_run(tiny_encoder_dir, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("quickstart")
    config = journey_config(ROOT / "configs" / "quickstart.yaml", tiny_encoder_dir, tmp_path)
    main(["fit", "--config", str(config)])
    wandb_run = getattr(__import__("sys").modules.get("wandb"), "run", None)
    if wandb_run is not None:
        wandb_run.finish()
    return tmp_path / "run"


ROWS = ["retrieval/summary/mrr@10", "retrieval/summary/recall@1", "retrieval/section/mrr@10",
        "retrieval/section/recall@1", "clustering/nmi", "clustering/purity", "probe/accuracy"]


def test_fit_and_evaluate_print_the_same_before_after_table(quickstart_run, capsys):
    at_fit_end = json.loads((quickstart_run / "evaluation" / "before_after.json").read_text())
    assert [row["metric"] for row in at_fit_end["rows"]] == ROWS
    capsys.readouterr()
    output = quickstart_run / "again"
    results = main(["evaluate", "--config", str(quickstart_run / "config.yaml"), "--ckpt_path",
                    str(quickstart_run / "checkpoints" / "last.ckpt"), "--before_after", "--resamples", "200",
                    "--batch_size", "8", "--accelerator", "cpu", "--output", str(output)])
    printed = capsys.readouterr().out
    assert "| metric | items | before | after | change | 95% interval of the change |" in printed
    assert all(f"| {name} |" in printed for name in ROWS) and "written to" in printed
    again = json.loads((output / "before_after.json").read_text())
    for fitted, evaluated in zip(at_fit_end["rows"], again["rows"], strict=True):
        assert fitted["metric"] == evaluated["metric"] and fitted["items"] == evaluated["items"]
        # the config's starting encoder and the last checkpoint, as the callback measured them during fit
        assert evaluated["before"] == pytest.approx(fitted["before"], abs=1e-6)
        assert evaluated["after"] == pytest.approx(fitted["after"], abs=1e-6)
        assert evaluated["low"] <= evaluated["change"] <= evaluated["high"]
    assert results["before_after"]["probe/accuracy/after"] == pytest.approx(again["rows"][-1]["after"])


def test_before_after_needs_a_checkpoint(quickstart_run, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["evaluate", "--config", str(quickstart_run / "config.yaml"), "--before_after"])
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and len(err.splitlines()) == 1 and "--ckpt_path" in err, err
