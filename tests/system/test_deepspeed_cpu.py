"""DeepSpeed ZeRO-2 and ZeRO-3 on 2 CPU processes against DDP on the same data: DocSplit's gathered loss and the
parameters after one optimizer step are equal in fp32, and within bf16's precision of them under bf16-mixed;
the sharded checkpoint folder reads (``read_checkpoint``, what every command uses) as Lightning's converter
writes it.

The optimizer is SGD with momentum: it has state for ZeRO to shard, and its first update is ``lr * gradient``,
so comparing updates compares gradients (Adam's first update is about ``lr * sign(gradient)``, which would
hide a gradient wrong by any positive factor).

The first DeepSpeed run compiles DeepSpeed's shared-memory communication op (about 90 s, cached afterwards).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch.utilities.deepspeed import (
    convert_zero_checkpoint_to_fp32_state_dict,
)
from runs import tiny_args

from lit_docemb.methods import DocSplit
from lit_docemb.methods.checkpoints import read_checkpoint

TESTS = Path(__file__).resolve().parents[1]


def fit_one_step(encoder: str, corpus: str, root: Path, strategy: list[str],
                 precision: str = "32-true") -> tuple[float, Path]:
    """One optimizer step of DocSplit on 2 CPU processes; returns the logged loss and the plain (single-file)
    checkpoint after the step."""
    cmd = [sys.executable, "-m", "lit_docemb", "fit", *tiny_args(encoder, corpus, root), *strategy,
           "--trainer.devices=2", "--data.max_documents=8", "--data.val_fraction=0", "--data.batch_size=2",
           "--trainer.max_steps=1", "--trainer.log_every_n_steps=1", f"--trainer.precision={precision}",
           "--model.optimizer=torch.optim.SGD", "--model.optimizer.lr=0.5", "--model.optimizer.momentum=0.9",
           "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={root}",
           "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    [metrics] = root.glob("lightning_logs/version_*/metrics.csv")
    [loss] = [float(row["train/loss"]) for row in csv.DictReader(metrics.open()) if row.get("train/loss")]
    last = root / "checkpoints" / "last.ckpt"
    if last.is_dir():  # DeepSpeed: a sharded folder, which every command reads as it is (weights-only)
        convert_zero_checkpoint_to_fp32_state_dict(str(last), str(root / "consolidated.ckpt"))
        read = read_checkpoint(last)
        last = root / "consolidated.ckpt"
        converted = torch.load(last, map_location="cpu", weights_only=True)
        assert read["global_step"] == converted["global_step"] == 1
        assert read["state_dict"].keys() == converted["state_dict"].keys()
        assert all(torch.equal(read["state_dict"][k], v) for k, v in converted["state_dict"].items())
    return loss, last


def update_error(state: dict, reference: dict, before: dict) -> tuple[float, float]:
    """Difference of two updates from the same initial weights over the encoder's weights, relative to the
    reference update: the norm ``|(a - w0) - (b - w0)| / |b - w0|`` and the largest element
    ``max |(a - w0) - (b - w0)| / max |b - w0|``."""
    keys = [k for k in reference if k.split("model.", 1)[-1] in before]
    diff = torch.cat([(state[k].float() - reference[k].float()).flatten() for k in keys])
    update = torch.cat([(reference[k].float() - before[k.split("model.", 1)[1]]).flatten() for k in keys])
    return (diff.norm() / update.norm()).item(), (diff.abs().max() / update.abs().max()).item()


@pytest.mark.slow
def test_zero2_and_zero3_equal_ddp_in_fp32_and_bf16(tiny_encoder_dir, corpus_jsonl, tmp_path):
    from transformers import AutoModelForMaskedLM

    ddp_loss, ddp_checkpoint = fit_one_step(tiny_encoder_dir, corpus_jsonl, tmp_path / "ddp",
                                            ["--trainer.strategy=ddp"])
    ddp_state = torch.load(ddp_checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    before = AutoModelForMaskedLM.from_pretrained(tiny_encoder_dir).state_dict()
    moved = max((ddp_state[k] - before[k.split("model.", 1)[1]]).abs().max().item()
                for k in ddp_state if k.split("model.", 1)[-1] in before)
    assert moved > 1e-4  # the step changed the weights: the comparison below is not of untouched copies
    for stage in (2, 3):
        for precision in ("32-true", "bf16-mixed"):
            loss, checkpoint = fit_one_step(tiny_encoder_dir, corpus_jsonl, tmp_path / f"zero{stage}_{precision}",
                                            ["--trainer.strategy=cpu_deepspeed.CPUDeepSpeedStrategy",
                                             f"--trainer.strategy.stage={stage}"], precision)
            # the converted checkpoint loads into the method as it is (what predict/embed use)
            state = DocSplit.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True).state_dict()
            assert state.keys() == ddp_state.keys(), (stage, precision)
            if precision == "32-true":
                assert loss == pytest.approx(ddp_loss, abs=1e-5), stage
                worst = max((state[k].float() - ddp_state[k].float()).abs().max().item() for k in state)
                assert worst <= 1e-5, (stage, worst)
            else:  # bf16 keeps 8 significant bits (relative 2**-8 = 0.4 %) in the forward and backward pass
                assert loss == pytest.approx(ddp_loss, rel=2e-2), stage
                norm, largest = update_error(state, ddp_state, before)
                # the norm, not the largest element (one weight's update, rounded in bf16 at several places); 0.02
                # with the fixture's seeded weights, up to 0.13 with other random ones (docs/cluster.md)
                assert norm <= 0.1, (stage, norm, largest)
