"""DECA's encoder baselines (seed paper 002, Tables 3-4) on the R8 fixture in text_gcn's layout, as docs/reproduce.md
runs them: BERT-mlm fitted a few steps from its config then scored by ``evaluate`` on its run folder (Table 3's
``probe/error_rate`` and Table 4's ``cluster/nmi``, the same as the fit's own end-of-training evaluation); BERT-ST
through the plain-encoder path. Tiny random encoder: the numbers mean nothing, the commands and metrics must exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from journeys import write_text_gcn_release

from lit_docemb.commands import main
from lit_docemb.commands.evaluate import main as evaluate_main
from lit_docemb.eval.labelled import LabelledEmbeddingEvaluation

ROOT = Path(__file__).resolve().parents[2]


def labelled_metrics(results: dict) -> dict[str, float]:
    """The ``probe/error_rate`` and ``cluster/nmi`` values of an ``evaluation.json``'s results."""
    flat = {name: value for metrics in results["results"].values() for name, value in metrics.items()}
    return {name: value for name, value in flat.items() if name.endswith(("probe/error_rate", "cluster/nmi"))}


@pytest.mark.slow
def test_bert_mlm_fit_then_evaluate_gives_tables_3_and_4(tiny_encoder_dir, tmp_path):
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    common = ["--config", str(ROOT / "configs/deca/r8_bert_mlm.yaml"), f"--model.init_args.encoder.name={tiny_encoder_dir}",
              "--model.init_args.encoder.max_length=64", f"--data.init_args.source={source}",
              "--data.init_args.num_workers=0"]
    run = tmp_path / "runs" / "deca_r8_bert_mlm"
    fitted = main(["fit", *common, "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.max_epochs=1",
                   "--trainer.logger=false", "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={run}"])
    at_end = next(c for c in fitted.trainer.callbacks if isinstance(c, LabelledEmbeddingEvaluation)).metrics
    assert {"probe/error_rate", "cluster/nmi"} <= set(at_end), at_end  # the fit's own end-of-training evaluation
    out = tmp_path / "evaluation"
    evaluate_main([*common, "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), "--output", str(out),
                   "--accelerator", "cpu"])
    metrics = labelled_metrics(json.loads((out / "evaluation.json").read_text()))
    assert len(metrics) >= 2 and all(0.0 <= value <= 1.0 for value in metrics.values()), metrics
    for name, value in metrics.items():  # evaluate on the checkpoint repeats the fit's own evaluation
        assert value == pytest.approx(at_end[name], abs=1e-6)


@pytest.mark.slow
def test_bert_st_through_the_plain_encoder_path(tiny_encoder_dir, tmp_path):
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    out = tmp_path / "baselines" / "deca_r8" / "bert-st"
    evaluate_main(["--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), "--config",
                   str(ROOT / "configs/baselines/sentence_sum/bert-base-uncased.yaml"),
                   f"--model.init_args.encoder.name={tiny_encoder_dir}", "--model.init_args.encoder.max_length=64",
                   f"--data.init_args.source={source}", "--data.init_args.num_workers=0", "--output", str(out),
                   "--accelerator", "cpu"])
    metrics = labelled_metrics(json.loads((out / "evaluation.json").read_text()))
    assert len(metrics) >= 2 and all(0.0 <= value <= 1.0 for value in metrics.values()), metrics
    assert "as initialised" in (out / "evaluation.md").read_text()
