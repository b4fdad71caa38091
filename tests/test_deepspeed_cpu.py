"""DeepSpeed ZeRO-2 and ZeRO-3 on 2 CPU processes against DDP on the same data: DocSplit's gathered loss and the
parameters after one AdamW step are equal in fp32; the sharded checkpoint converts to a plain state dict.

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
from lightning.pytorch.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict

from lit_docemb.methods import DocSplit
from test_cli import tiny_args

TESTS = Path(__file__).resolve().parent


def fit_one_step(encoder: str, corpus: str, root: Path, strategy: list[str]) -> tuple[float, Path]:
    """One optimizer step of DocSplit (fp32, AdamW) on 2 CPU processes; returns the logged loss and the
    plain (single-file) checkpoint after the step."""
    cmd = [sys.executable, "-m", "lit_docemb", "fit", *tiny_args(encoder, corpus, root), *strategy,
           "--trainer.devices=2", "--data.max_documents=8", "--data.val_fraction=0", "--data.batch_size=2",
           "--trainer.max_steps=1", "--trainer.log_every_n_steps=1", "--trainer.precision=32-true",
           "--model.optimizer=torch.optim.AdamW", "--model.optimizer.lr=1e-3",
           "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={root}",
           "--trainer.callbacks+=lit_docemb.callbacks.RunCheckpoint"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    [metrics] = root.glob("lightning_logs/version_*/metrics.csv")
    [loss] = [float(row["train/loss"]) for row in csv.DictReader(metrics.open()) if row.get("train/loss")]
    last = root / "checkpoints" / "last.ckpt"
    if last.is_dir():  # DeepSpeed: a sharded folder
        convert_zero_checkpoint_to_fp32_state_dict(str(last), str(root / "consolidated.ckpt"))
        last = root / "consolidated.ckpt"
    return loss, last


@pytest.mark.slow
def test_zero2_and_zero3_equal_ddp_in_fp32(tiny_encoder_dir, corpus_jsonl, tmp_path):
    from transformers import AutoModelForMaskedLM

    ddp_loss, ddp_checkpoint = fit_one_step(tiny_encoder_dir, corpus_jsonl, tmp_path / "ddp",
                                            ["--trainer.strategy=ddp"])
    ddp_state = torch.load(ddp_checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    before = AutoModelForMaskedLM.from_pretrained(tiny_encoder_dir).state_dict()
    moved = max((ddp_state[k] - before[k.split("model.", 1)[1]]).abs().max().item()
                for k in ddp_state if k.split("model.", 1)[-1] in before)
    assert moved > 1e-4  # the step changed the weights: the comparison below is not of untouched copies
    for stage in (2, 3):
        loss, checkpoint = fit_one_step(tiny_encoder_dir, corpus_jsonl, tmp_path / f"zero{stage}",
                                        ["--trainer.strategy=cpu_deepspeed.CPUDeepSpeedStrategy",
                                         f"--trainer.strategy.stage={stage}"])
        assert loss == pytest.approx(ddp_loss, abs=1e-5), stage
        # the converted checkpoint loads into the method as it is (what predict/embed use)
        state = DocSplit.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True).state_dict()
        assert state.keys() == ddp_state.keys(), stage
        worst = max((state[k].float() - ddp_state[k].float()).abs().max().item() for k in state)
        assert worst <= 1e-5, (stage, worst)
