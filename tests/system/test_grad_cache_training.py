"""GradCache as a training mode of the method base: DocSplit with ``grad_cache_token_budget`` trains exactly as
without it (loss, every gradient, parameters after several optimizer steps, on 1 and 2 processes), and the
combinations it cannot serve are refused before training starts.

Dropout is off in these checks (the encoder's config sets it to 0) so that a plain, unsplit forward is the
reference; the dropout-mask replay itself is checked against a same-sub-batch reference in
``test_grad_cache.py``.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.strategies import DeepSpeedStrategy

from lit_docemb.commands import main
from lit_docemb.data.core.document import Document, Section
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.models import EncoderSpec

TOLERANCE = 1e-5
SGD = '{"class_path": "torch.optim.SGD", "init_args": {"lr": 0.5}}'


def documents(n: int) -> list[Document]:
    """Documents of very different lengths, so sub-batches by token budget differ in row count."""
    return [Document(f"d{i}", sections=[Section("", " ".join(
        f"Sentence {j} of document {i} talks about topic {i * j % 7}." for j in range(1 + 3 * (i % 5))))])
        for i in range(n)]


def gradients(model: DocSplit) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("mlm_weight", [0.1, 0.0], ids=["with-mlm", "no-mlm"])
def test_cached_step_equals_plain_step(no_dropout_encoder_dir, mlm_weight):
    torch.manual_seed(0)
    plain = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=64), mlm_weight=mlm_weight)
    cached = copy.deepcopy(plain)
    cached.grad_cache_token_budget = 96
    torch.manual_seed(1)
    batch = plain.collator("fit")(documents(10) + [Document("short", sections=[Section("", "x")])])
    assert batch.skipped == 1

    terms = plain.losses(batch)
    plain.total_loss(terms).backward()
    logged = cached.grad_cache_forward(batch)
    logged.backward_loss.backward()

    assert set(logged.terms) == set(terms)
    for name, value in terms.items():
        assert abs(logged.terms[name].item() - value.item()) <= TOLERANCE, name
    assert abs(logged.loss.item() - plain.total_loss(terms).item()) <= TOLERANCE
    assert logged.sub_batches > 2  # the budget really split the batch
    reference, got = gradients(plain), gradients(cached)
    assert set(got) == set(reference)
    assert max((got[k] - reference[k]).abs().max().item() for k in reference) <= TOLERANCE
    if mlm_weight:  # the MLM head's own weights got their (additive-term) gradient
        head = "encoder.model.cls.predictions.transform.dense.weight"
        assert got[head].abs().sum() > 0


def test_a_batch_that_lost_every_document_still_uses_every_weight(no_dropout_encoder_dir):
    model = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=64), grad_cache_token_budget=64)
    batch = model.collator("fit")([Document("a", sections=[Section("", "x")])])
    assert len(batch) == 0
    out = model.grad_cache_forward(batch)
    out.backward_loss.backward()
    assert out.loss.item() == 0.0
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)  # DDP would need them all


def fit_args(encoder: str, corpus: str, root: Path, *extra: str) -> list[str]:
    return ["fit", "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={encoder}", "--model.encoder.max_length=64",
            f"--model.optimizer={SGD}", "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus}]",
            "--data.batch_size=8", "--data.num_workers=0", "--data.val_fraction=0", "--data.max_documents=24",
            "--trainer.accelerator=cpu", "--trainer.logger=false", "--trainer.enable_progress_bar=false",
            "--trainer.enable_checkpointing=false", f"--trainer.default_root_dir={root}", "--seed_everything=3",
            *extra]


def test_fit_with_grad_cache_ends_with_the_same_parameters(no_dropout_encoder_dir, corpus_jsonl, tmp_path):
    runs = {}
    for name, extra in [("plain", []), ("cached", ["--model.grad_cache_token_budget=128"])]:
        cli = main(fit_args(no_dropout_encoder_dir, corpus_jsonl, tmp_path / name, "--trainer.max_steps=3",
                            *extra))
        runs[name] = {k: v.detach().clone() for k, v in cli.model.state_dict().items()}
        assert cli.trainer.global_step == 3
    start = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=64)).state_dict()
    moved = max((runs["plain"][k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-3  # training changed the weights, so equality below is not trivial
    assert max((runs["cached"][k] - runs["plain"][k]).abs().max().item() for k in start) <= TOLERANCE


@pytest.mark.slow
def test_two_process_ddp_fit_with_grad_cache_matches_plain_ddp(no_dropout_encoder_dir, corpus_jsonl, tmp_path):
    """2 CPU processes: every rank's batch is encoded in sub-batches, negatives gathered across ranks, DDP
    synchronises once per step; the weights after 3 steps equal those of plain DDP training."""
    states = {}
    for name, extra in [("plain", []), ("cached", ["--model.grad_cache_token_budget=128"])]:
        root = tmp_path / name
        cmd = [sys.executable, "-m", "lit_docemb",
               *fit_args(no_dropout_encoder_dir, corpus_jsonl, root, "--trainer.max_steps=3",
                         "--trainer.devices=2", "--trainer.strategy=ddp",
                         "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint", *extra)]
        cmd.remove("--trainer.enable_checkpointing=false")
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        states[name] = torch.load(root / "checkpoints" / "last.ckpt", map_location="cpu",
                                  weights_only=False)["state_dict"]
    assert max((states["cached"][k] - states["plain"][k]).abs().max().item() for k in states["plain"]) <= TOLERANCE


@pytest.mark.parametrize("trainer_kwargs, precision, message", [
    ({"strategy": DeepSpeedStrategy(stage=2)}, None, "not supported with DeepSpeed"),
    ({}, "16-mixed", "Use precision: bf16-mixed or 32-true"),  # set after: CPU turns 16-mixed into bf16
])
def test_unsupported_combinations_are_refused_before_training(no_dropout_encoder_dir, trainer_kwargs, precision,
                                                             message):
    model = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=64), grad_cache_token_budget=128)
    model.trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, **trainer_kwargs)
    if precision is not None:
        model.trainer.strategy.precision_plugin.precision = precision
    with pytest.raises(ValueError, match="model.init_args.grad_cache_token_budget") as error:
        model.setup("fit")
    assert message in str(error.value)
    model.grad_cache_token_budget = None
    model.setup("fit")  # the same trainer without GradCache is fine


def test_budget_must_be_positive(no_dropout_encoder_dir):
    with pytest.raises(ValueError, match="grad_cache_token_budget: must be >= 1"):
        DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=64), grad_cache_token_budget=0)
