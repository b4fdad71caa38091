"""On a CUDA GPU: one shipped config per method, stacked with ``configs/trainer/single_gpu.yaml`` (bf16 autocast) as
docs/cluster.md tells a GPU user, trains 2 steps with two dataloader workers (batches cross the worker boundary and
are pinned), then ``evaluate`` (fp32) and ``embed`` (bf16) run on the GPU; the GPU's embeddings agree with the CPU's fp32 ones.

Marked ``cuda``: collected everywhere, deselected with one summary line where torch sees no GPU (CI has none). Run
them on a GPU machine with ``python -m pytest -m cuda tests/system/test_cuda_journeys.py``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml
from journeys import ROOT, journey_config
from runs import run_embed

from lit_docemb.commands import main
from lit_docemb.methods.checkpoints import read_checkpoint

pytestmark = [pytest.mark.cuda, pytest.mark.slow]

CONFIGS = ["configs/quickstart.yaml", "configs/graph_roberta/retrieval_msmarco.yaml",
           "configs/docsplit/bert_wikipedia.yaml", "configs/deca/r8_bt_sc.yaml", "configs/colde/aan.yaml",
           "configs/ctpe/arxiv.yaml"]
"""DECA's GPU journey is its BERT backbone: the Doc2VecC one trains on the CPU (Chen's rule) and refuses a GPU."""


def on_gpu(prepared, run, piece: str = "single_gpu") -> None:
    """The journey's CPU trainer replaced by a shipped GPU trainer piece, with workers and a CSV logger."""
    raw = yaml.safe_load(prepared.read_text(encoding="utf-8"))
    gpu = yaml.safe_load((ROOT / "configs" / "trainer" / f"{piece}.yaml").read_text(encoding="utf-8"))["trainer"]
    raw["trainer"].update(gpu, logger={"class_path": "lightning.pytorch.loggers.CSVLogger",
                                       "init_args": {"save_dir": str(run)}})
    raw["data"]["init_args"]["num_workers"] = 2
    prepared.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")


@pytest.mark.parametrize("config", CONFIGS)
def test_gpu_journey(config, tiny_encoder_dir, tmp_path):
    prepared = journey_config(ROOT / config, tiny_encoder_dir, tmp_path)
    run = tmp_path / "run"
    on_gpu(prepared, run)
    main(["fit", "--config", str(prepared)])
    saved, last = run / "config.yaml", run / "checkpoints" / "last.ckpt"
    assert last.exists()

    main(["evaluate", "--config", str(saved), "--ckpt_path", str(last), "--accelerator", "cuda"])
    results = json.loads((run / "evaluation" / "evaluation.json").read_text())["results"]
    assert results and all(np.isfinite(list(metrics.values())).all() for metrics in results.values())

    documents = tmp_path / "docs.jsonl"
    documents.write_text("".join(json.dumps({"id": f"d{i}", "title": f"Topic {i}", "sections": [
        {"title": "Body", "text": f"Document {i} is about the {word} and its long history in the archive."}]}) + "\n"
        for i, word in enumerate(["river", "castle", "engine", "garden", "violin"])))
    run_embed(saved, last, documents, tmp_path / "cpu", "--format", "npy")
    main(["embed", "--config", str(saved), "--ckpt_path", str(last), "--input", str(documents), "--output",
          str(tmp_path / "gpu"), "--format", "npy", "--accelerator", "gpu", "--devices", "1", "--precision",
          "bf16-mixed", "--progress_bar", "false"])
    vectors = "former.npy" if "ctpe" in config else "embeddings.npy"
    cpu, gpu = np.load(tmp_path / "cpu" / vectors), np.load(tmp_path / "gpu" / vectors)
    cosine = (cpu * gpu).sum(1) / (np.linalg.norm(cpu, axis=1) * np.linalg.norm(gpu, axis=1))
    print(f"{config}: cosine(cpu fp32, gpu bf16) min {cosine.min():.5f}")
    assert cpu.shape == gpu.shape and cosine.min() > 0.99


@pytest.mark.parametrize("piece", ["deepspeed_zero2", "deepspeed_zero3"])
def test_gpu_deepspeed_journey(piece, tiny_encoder_dir, tmp_path):
    """DocSplit's Wikipedia config on a DeepSpeed piece (one GPU): its sharded ``last.ckpt/`` folder is read by
    ``evaluate`` and ``embed``, and ``fit --ckpt_path last`` resumes from it. Each fit is a process of its own, as
    a user runs it (DeepSpeed keeps its process groups for the life of the process)."""
    prepared = journey_config(ROOT / "configs/docsplit/bert_wikipedia.yaml", tiny_encoder_dir, tmp_path)
    run = tmp_path / "run"
    on_gpu(prepared, run, piece)
    fit(prepared)
    saved, last = run / "config.yaml", run / "checkpoints" / "last.ckpt"
    assert last.is_dir() and read_checkpoint(str(last))["global_step"] == 2

    main(["evaluate", "--config", str(saved), "--ckpt_path", str(last), "--accelerator", "cuda"])
    assert json.loads((run / "evaluation" / "evaluation.json").read_text())["results"]
    documents = tmp_path / "docs.jsonl"
    documents.write_text("".join(json.dumps({"id": f"d{i}", "title": f"T{i}", "sections": [
        {"title": "Body", "text": f"Document {i} tells of the {word} in the valley."}]}) + "\n"
        for i, word in enumerate(["river", "castle", "engine"])))
    main(["embed", "--config", str(saved), "--ckpt_path", str(last), "--input", str(documents), "--output",
          str(tmp_path / "gpu"), "--format", "npy", "--accelerator", "gpu", "--devices", "1", "--progress_bar",
          "false"])
    assert np.isfinite(np.load(tmp_path / "gpu" / "embeddings.npy")).all()
    fit(prepared, "--ckpt_path", "last", "--trainer.max_steps=3")
    assert read_checkpoint(str(last))["global_step"] == 3


def fit(config, *extra: str) -> None:
    result = subprocess.run([sys.executable, "-m", "lit_docemb", "fit", "--config", str(config), *extra],
                            capture_output=True, text=True, timeout=600, cwd=config.parent, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
