"""An exception on one rank brings the whole 2-process job down promptly, with that rank's error in the output
(not a hang until the collective's timeout, 30 minutes by default)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SUPPORT = Path(__file__).parents[1] / "support"


def run(method: str, encoder: str, corpus: str, root: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "lit_docemb", "fit", f"--model=failing_method.{method}",
           f"--model.encoder.name={encoder}", "--model.encoder.max_length=64", "--data=lit_docemb.data.JSONLDataModule",
           f"--data.paths=[{corpus}]", "--data.batch_size=4", "--data.num_workers=0", "--data.val_fraction=0",
           "--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp", "--trainer.max_steps=6",
           "--trainer.logger=false", "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={root}",
           *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])}
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    return result, time.monotonic() - start


@pytest.mark.slow
@pytest.mark.parametrize("method", ["FailingDocSplit", "HangingPeerDocSplit"])
def test_exception_on_one_rank_ends_the_job_promptly(method, tiny_encoder_dir, corpus_jsonl, tmp_path):
    """``FailingDocSplit``: rank 0 waits in the loss's gather for the failed rank. ``HangingPeerDocSplit``: rank 0
    is blocked for 10 minutes elsewhere (as behind an NCCL collective with a dead peer), so only FailFast can
    end it: the job must still end within the limit, saying which rank failed and why."""
    result, elapsed = run(method, tiny_encoder_dir, corpus_jsonl, tmp_path)
    assert result.returncode != 0
    assert "ValueError: injected failure on rank 1 at step 2" in result.stderr
    assert elapsed < 120, f"the job took {elapsed:.0f} s to end after one rank failed"
    if method == "HangingPeerDocSplit":
        assert "[rank 0] stopping because rank 1 failed: ValueError: injected failure" in result.stderr
