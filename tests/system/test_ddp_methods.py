"""Every method not covered elsewhere trains under 2-process CPU DDP as shipped (``strategy=ddp``, so
``find_unused_parameters=False``): Graph-RoBERTa with both pretraining objectives and with GradCache, the
classification and dense-retrieval wrappers around it, and CoLDE with and without its LSTM (the ablation
leaves the chunk attention out). DocSplit, CTPE and DECA have their own DDP tests.

Two optimizer steps each: DDP reports a parameter that received no gradient in the first step when the second
one starts, so a method with an unused head fails here. After the fit both ranks hold the same weights, and
the weights moved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from corpus_files import _write_wikir, write_aan_network, write_labelled_folder

TESTS = Path(__file__).resolve().parents[1]
GRAPH = ["--model.init_args.node_dim=16", "--model.init_args.passages.max_passage_tokens=64"]


def backbone(encoder: str) -> list[str]:
    return [f"--model.init_args.backbone.init_args.encoder.name={encoder}",
            "--model.init_args.backbone.init_args.node_dim=16",
            "--model.init_args.backbone.init_args.passages.max_passage_tokens=64", "--model.init_args.checkpoint=null"]


def colde(encoder: str) -> list[str]:
    return [f"--model.init_args.encoder.name={encoder}", "--model.init_args.chunk_tokens=32",
            "--model.init_args.lstm_output_size=16", "--model.init_args.projection_size=8",
            "--model.init_args.num_heads=2"]


def aan_split(root: Path) -> list[str]:
    """The AAN release fixture at ``root`` (with a fourth citation group) under CoLDE's group split: one group each
    for validation and test, two and an irrelevant paper to train on, in full batches."""
    if "P7 ==> P8" not in (root / "acl.txt").read_text():
        with open(root / "acl.txt", "a") as citations:
            citations.write("P7 ==> P8\n")
    return ["--data.init_args.drop_last=true", f"--data.init_args.corpus.init_args.source={root}",
            "--data.init_args.corpus.init_args.citations_file=acl.txt", "--data.init_args.val_fraction=0.3",
            "--data.init_args.test_fraction=0.3", "--data.init_args.global_batch_size=4", "--data.init_args.num_workers=0"]


@pytest.mark.slow
def test_every_wrapper_and_objective_trains_under_ddp(tiny_encoder_dir, corpus_jsonl, tmp_path):
    corpus = ["--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus_jsonl}]", "--data.batch_size=2",
              "--data.num_workers=0", "--data.val_fraction=0"]
    pretrain = ["--model=lit_docemb.methods.GraphRoBERTa", f"--model.init_args.encoder.name={tiny_encoder_dir}", *GRAPH]
    spec = {
        "graph_roberta_halves": [*pretrain, *corpus],
        "graph_roberta_one_passage_grad_cache": [*pretrain, "--model.init_args.objective=one_passage",
                                                 "--model.init_args.grad_cache_token_budget=128", *corpus],
        "classifier": ["--config", str(TESTS.parent / "configs/graph_roberta/classify_imdb.yaml"),
                       *backbone(tiny_encoder_dir), "--model.init_args.labels=[code,sea]",
                       "--data=lit_docemb.data.LabelledTextDataModule",
                       f"--data.source={write_labelled_folder(tmp_path / 'labelled')}", "--data.label_column=label",
                       "--data.global_batch_size=4", "--data.num_workers=0"],
        "colde": ["--config", str(TESTS.parent / "configs/colde/aan.yaml"), *colde(tiny_encoder_dir),
                  *aan_split(write_aan_network(tmp_path / "aan"))],
        "colde_minus_lstm": ["--config", str(TESTS.parent / "configs/colde/aan_minus_lstm.yaml"),
                             *colde(tiny_encoder_dir), *aan_split(tmp_path / "aan")],
        "dense_retrieval": ["--config", str(TESTS.parent / "configs/graph_roberta/retrieval_wikir.yaml"),
                            *backbone(tiny_encoder_dir), "--data=lit_docemb.data.WIKIRDataModule",
                            f"--data.root={_write_wikir(tmp_path / 'wikir')}", "--data.mode=retrieval",
                            "--data.negatives=run", "--data.negatives_run=null", "--data.num_negatives=1",
                            "--data.val_queries_from_train=0", "--data.global_batch_size=4", "--data.num_workers=0",
                            f"--data.cache_dir={tmp_path / 'cache'}"],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(TESTS / "support" / "ddp_fits.py"), str(tmp_path / "spec.json")],
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    for name in spec:
        ranks = [torch.load(tmp_path / f"{name}.rank{r}.pt", weights_only=True) for r in range(2)]
        assert [r["world_size"] for r in ranks] == [2, 2] and ranks[0]["global_step"] == 2, name
        assert ranks[0]["sums"] == ranks[1]["sums"], name  # DDP kept the replicas equal
        assert max(ranks[0]["moved"].values()) > 1e-6, name
