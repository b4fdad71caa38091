"""CTPE's Doc2VecC row (configs/baselines/doc2vecc/ctpe.yaml): plain Doc2VecC, DECA's backbone at lambda = 0, fitted
on a CTPE task folder through the real CLI with the paper's settings, then scored by ``evaluate`` on the checkpoint.
At lambda = 0 the augmentation must not reach the weights: two fits that differ only in it train the same vectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from journeys import write_ctpe_task

from lit_docemb.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]
TASK_CONFIG, PIECE = str(ROOT / "configs/ctpe/arxiv.yaml"), str(ROOT / "configs/baselines/doc2vecc/ctpe.yaml")


def fit(run: Path, *overrides: str):
    return main(["fit", "--config", TASK_CONFIG, "--config", PIECE, "--trainer.max_steps=2", "--trainer.logger=false",
                 f"--trainer.default_root_dir={run}", "--trainer.accelerator=cpu",
                 "--trainer.enable_progress_bar=false", "--data.init_args.num_workers=0", "--data.init_args.batch_size=8",
                 "--model.init_args.backbone.init_args.min_word_count=1", *overrides])


@pytest.fixture
def task_folder(tmp_path, monkeypatch):
    write_ctpe_task(tmp_path / "data" / "ctpe" / "arxiv")  # where configs/ctpe/arxiv.yaml reads it
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_fit_then_evaluate_scores_the_task(task_folder):
    cli = fit(task_folder / "run")
    backbone = cli.model.backbone
    assert (backbone.corruption, backbone.negative_samples, backbone.word_embeddings.embedding_dim) == (0.9, 5, 100)
    assert cli.model.backbone_spec.window_size == 10 and cli.model.loss_weights == {"ntxent_loss": 0.0}
    assert cli.trainer.max_epochs == 100 and len(cli.datamodule.train_set) == 40  # candidates and test papers
    out = task_folder / "scored"
    main(["evaluate", "--config", TASK_CONFIG, "--config", PIECE, "--ckpt_path",
          str(task_folder / "run/checkpoints/last.ckpt"), "--data.init_args.num_workers=0",
          "--model.init_args.backbone.init_args.min_word_count=1", "--output", str(out), "--accelerator", "cpu"])
    ranking = json.loads((out / "evaluation.json").read_text())["results"]["candidate_ranking"]
    assert ranking["ranking/candidates"] == 20 and ranking["ranking/queries"] == 20
    for name in ("P@20", "recall@20", "f1@20", "map", "ndcg", "bpref", "paper_map@20", "paper_ndcg@20", "paper_bpref"):
        assert 0.0 <= ranking[f"ranking/{name}"] <= 1.0, name
    assert ranking["ranking/map"] > 0.0


def test_lambda_zero_is_doc2vecc_alone(task_folder):
    """The total loss's gradient is Doc2VecC's (eq. 2-3) alone: the contrastive term, which has a gradient of its
    own, is weighed by 0."""
    method = fit(task_folder / "run").model.train()
    batch = method.collator("fit")([method.trainer.datamodule.train_set[i] for i in range(8)])
    parameters = [p for p in method.parameters() if p.requires_grad]
    gradients = {}
    for name in ("total", "doc2vecc_loss", "ntxent_loss"):
        torch.manual_seed(0)  # the same corruption and negative words each time
        terms = method.losses(batch)
        loss = method.total_loss(terms) if name == "total" else terms[name]
        gradients[name] = torch.autograd.grad(loss, parameters, allow_unused=True)
    for total, doc2vecc in zip(gradients["total"], gradients["doc2vecc_loss"], strict=True):
        torch.testing.assert_close(total, doc2vecc, rtol=0, atol=0)
    assert max(g.abs().max() for g in gradients["ntxent_loss"] if g is not None) > 0
