"""docs/reproduce.md's new DECA, CoLDE and CTPE rows run on fixtures in the releases' layouts (tiny encoder, a few
steps): the encoder baselines of DECA's Tables 3-4 through the plain-encoder path of ``evaluate``, CoLDE's PAT
config fitted and tested, then tested again with shuffled sections (Fig. 8), whose evaluation ``evaluate
--evaluation matching`` repeats. The numbers mean nothing (random tiny weights); the commands must run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_files import write_google_patents
from journeys import write_text_gcn_release

from lit_docemb.commands import main
from lit_docemb.commands.evaluate import main as evaluate_main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_deca_encoder_baseline_through_the_plain_encoder_path(tiny_encoder_dir, tmp_path):
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    out = tmp_path / "baselines" / "deca_r8" / "bert-base-uncased"
    evaluate_main(["--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), "--config",
                   str(ROOT / "configs/baselines/bert-base-uncased.yaml"), f"--model.init_args.encoder.name={tiny_encoder_dir}",
                   "--model.init_args.encoder.max_length=128",
                   f"--data.init_args.source={source}", "--data.init_args.num_workers=0", "--output", str(out),
                   "--accelerator", "cpu"])
    results = json.loads((out / "evaluation.json").read_text())
    flat = json.dumps(results)
    assert "probe/error_rate" in flat and "cluster/nmi" in flat, flat[:500]
    assert "as initialised" in (out / "evaluation.md").read_text()


@pytest.mark.slow
def test_colde_patents_fit_test_and_shuffled_sections(tiny_encoder_dir, tmp_path):
    common = ["--config", str(ROOT / "configs/colde/patents.yaml"),
              f"--model.init_args.encoder.name={tiny_encoder_dir}",
              "--model.init_args.chunk_tokens=32", "--model.init_args.lstm_output_size=16",
              "--model.init_args.projection_size=8", "--model.init_args.num_heads=2",
              f"--data.init_args.corpus.init_args.source={write_google_patents(tmp_path / 'patents' / 'p.json.gz')}",
              f"--data.init_args.corpus.init_args.cache_dir={tmp_path / 'cache'}", "--data.init_args.val_fraction=0.3",
              "--data.init_args.test_fraction=0.3", "--data.init_args.global_batch_size=4", "--data.init_args.num_workers=0"]
    trainer = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true",
               "--trainer.logger=false", "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={tmp_path}"]
    main(["fit", *common, *trainer, "--trainer.max_steps=2"])
    last = tmp_path / "checkpoints" / "last.ckpt"
    plain = main(["test", *common, *trainer, f"--ckpt_path={last}"]).trainer.callback_metrics
    shuffled = main(["test", *common, "--data.init_args.shuffle_test_sections=true", *trainer,
                     f"--ckpt_path={last}"]).trainer.callback_metrics
    assert shuffled["test/matching_threshold"] == pytest.approx(float(plain["test/matching_threshold"]))
    for name in ("precision", "recall", "f1", "accuracy"):
        assert 0.0 <= float(plain[f"test/matching_{name}"]) <= 1.0
        assert 0.0 <= float(shuffled[f"test/matching_{name}"]) <= 1.0
    evaluated = evaluate_main([*common, "--data.init_args.shuffle_test_sections=true", "--ckpt_path", str(last),
                               "--evaluation", "matching", "--accelerator", "cpu",
                               "--output", str(tmp_path / "evaluation")])["matching"]
    assert 0.0 <= evaluated["matching/threshold/accuracy"] <= 1.0
