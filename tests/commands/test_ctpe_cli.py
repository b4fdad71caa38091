"""CTPE through the real CLI on a candidate/test task folder written here; checkpoint re-ranking."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from lit_docemb.commands.candidates import evaluate_checkpoint
from lit_docemb.commands import main
from lit_docemb.data import JSONLDataModule
from lit_docemb.eval.candidates import CandidateRanking, read_candidate_task
from lit_docemb.methods import CTPE, WordEmbeddings


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    """Python documentation topics as title + abstract papers: even topics are candidates, odd ones test
    documents; a test document is relevant to the candidates whose name starts with its first letter."""
    from pydoc_data.topics import topics

    names = sorted(n for n, t in topics.items() if len(t.split()) > 80)[:60]
    root = tmp_path_factory.mktemp("ctpe_task")
    docs = {n: {"id": n, "title": n.replace("-", " "), "sections": [{"heading": "Abstract",
                                                                    "text": " ".join(topics[n].split()[:120])}]}
            for n in names}
    candidates, tests = names[::2], names[1::2]
    for file, ids in (("candidates.jsonl", candidates), ("test.jsonl", tests)):
        (root / file).write_text("".join(json.dumps(docs[n]) + "\n" for n in ids))
    lines = [f"{q} 0 {c} 1" for q in tests for c in candidates if c[0] == q[0]]
    lines.append("not-a-test-doc 0 x 1")
    (root / "qrels.txt").write_text("\n".join(lines) + "\n")
    return root


def ctpe_args(root: Path, task: Path) -> list[str]:
    return [
        "--model=lit_docemb.methods.CTPE", "--model.embeddings=lit_docemb.methods.WordEmbeddings",
        "--model.embeddings.dim=16", "--model.embeddings.min_count=1", "--model.embeddings.epochs=1",
        "--model.n_filters=8", "--model.max_length=32", "--model.tfidf_neighbours=5",
        "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{task}/candidates.jsonl,{task}/test.jsonl]",
        "--data.batch_size=8", "--data.num_workers=0", "--data.val_fraction=0.2", "--trainer.accelerator=cpu",
        "--trainer.devices=1", "--trainer.logger=false", "--trainer.enable_progress_bar=false",
        f"--trainer.default_root_dir={root}",
        "--trainer.callbacks+=lit_docemb.eval.candidates.CandidateRanking", f"--trainer.callbacks.root={task}",
    ]


def test_task_folder_is_read_with_counts(task_dir):
    task = read_candidate_task(task_dir)
    assert len(task.candidates) == 30 and len(task.queries) == 30
    assert task.stats["qrels_unknown_test_document"] == 1 and "not-a-test-doc" not in task.qrels
    with pytest.raises(FileNotFoundError, match="candidates.jsonl"):
        read_candidate_task(task_dir / "missing")


def test_fast_dev_run_through_real_cli(task_dir, tmp_path):
    cmd = [sys.executable, "-m", "lit_docemb", "fit", *ctpe_args(tmp_path, task_dir), "--trainer.fast_dev_run=2"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "`Trainer.fit` stopped: `max_steps=2` reached" in result.stderr + result.stdout
    ranking = json.loads(re.search(r"^ranking (\{.*\})$", result.stdout, re.MULTILINE).group(1))
    assert 0.0 <= ranking["P@20"] <= 1.0 and 0.0 <= ranking["map"] <= 1.0 and ranking["queries"] > 0


@pytest.mark.slow
def test_checkpoint_reranks_like_the_callback(task_dir, tmp_path):
    """The vocabulary travels in the checkpoint: re-ranking from last.ckpt gives the callback's figures, and
    validate / predict work from the checkpoint alone."""
    cli = main(["fit", *ctpe_args(tmp_path, task_dir), "--trainer.max_steps=3", "--trainer.limit_val_batches=1",
                "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint"])
    callback = next(c for c in cli.trainer.callbacks if isinstance(c, CandidateRanking))
    assert cli.trainer.global_step == 3
    last = tmp_path / "checkpoints" / "last.ckpt"
    again = evaluate_checkpoint(str(last), str(task_dir))
    for key, value in again.items():
        assert value == pytest.approx(callback.results[key], abs=1e-6), key
    validated = main(["validate", *ctpe_args(tmp_path, task_dir), f"--ckpt_path={last}"])
    loss = validated.trainer.callback_metrics["val/coupled_margin_loss"]
    assert torch.isfinite(loss) and loss >= 0
    model = CTPE.load_from_checkpoint(last, map_location="cpu", weights_only=False)
    data = JSONLDataModule([str(task_dir / "test.jsonl")], batch_size=8, num_workers=0)
    outputs = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False).predict(model, datamodule=data)
    ids = [i for out in outputs for i in out["ids"]]
    assert len(ids) == 30 and torch.cat([out["former"] for out in outputs]).shape == (30, 32)


@pytest.mark.slow
def test_two_process_ddp_fit_on_cpu(task_dir, tmp_path):
    """CTPE under DDP (2 CPU processes, gloo): each rank builds the same vocabulary (and, with one word2vec
    thread and stable hashing, the same vectors; DDP starts every rank from rank 0's weights anyway). 60
    documents in batches of 8 per device for one epoch; the final checkpoint is finite."""
    cmd = [sys.executable, "-m", "lit_docemb", "fit", *ctpe_args(tmp_path, task_dir), "--data.val_fraction=0",
           "--trainer.devices=2", "--trainer.strategy=ddp", "--trainer.max_epochs=1",
           "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["global_step"] == 4  # ceil(60 / (2 * 8))
    assert all(torch.isfinite(v).all() for v in checkpoint["state_dict"].values() if v.is_floating_point())
    assert len(checkpoint["ctpe_vocabulary"]) > 100


def ctpe0_config(task_dir: Path, tmp_path: Path, document_vector: str = "coupled") -> Path:
    import yaml

    config = tmp_path / f"ctpe_{document_vector}.yaml"
    config.write_text(yaml.safe_dump({
        "seed_everything": 1,
        "trainer": {"default_root_dir": str(tmp_path / "run"), "logger": False, "accelerator": "cpu",
                    "max_steps": 1},
        "model": {"class_path": "lit_docemb.methods.CTPE", "init_args": {
            "embeddings": {"class_path": "lit_docemb.methods.WordEmbeddings",
                           "init_args": {"dim": 16, "min_count": 1, "epochs": 1}},
            "n_filters": 8, "max_length": 32, "document_vector": document_vector}},
        "data": {"class_path": "lit_docemb.data.JSONLDataModule", "init_args": {
            "paths": [str(task_dir / "candidates.jsonl"), str(task_dir / "test.jsonl")], "num_workers": 0,
            "val_fraction": 0.0}}}))
    return config


@pytest.mark.parametrize("document_vector", ["coupled", "average"])
def test_evaluate_without_checkpoint_scores_the_untrained_ctpe_and_the_average(task_dir, tmp_path, document_vector):
    """Table 4's CTPE0 (the vocabulary and word vectors built from the training documents as fit builds them, the
    CNN untrained) and avg column (mean word vector); both trec_eval's measures and the paper's formulas come out."""
    spec = f"{{class_path: lit_docemb.eval.candidates.CandidateRanking, init_args: {{root: {task_dir}}}}}"
    out = tmp_path / "out"
    main(["evaluate", "--config", str(ctpe0_config(task_dir, tmp_path, document_vector)), "--evaluation", spec,
          "--output", str(out), "--accelerator", "cpu"])
    flat = json.dumps(json.loads((out / "evaluation.json").read_text()))
    for name in ("P@20", "bpref", "paper_map@20", "paper_ndcg@20", "paper_bpref"):
        assert f'"{name}"' in flat or f"ranking/{name}" in flat, name
    assert "CTPE as initialised" in (out / "evaluation.md").read_text()


def test_average_document_vector_is_the_mean_token_vector_and_fit_refuses_it(task_dir, tmp_path, capsys):
    data = JSONLDataModule([str(task_dir / "candidates.jsonl"), str(task_dir / "test.jsonl")], num_workers=0,
                           val_fraction=0.0)
    data.setup("fit")
    method = CTPE(embeddings=WordEmbeddings(dim=8, min_count=1, epochs=1), n_filters=4, max_length=16,
                  document_vector="average")
    method.prepare(data.train_set)
    documents = [data.train_set[i] for i in range(3)]
    batch = method.collator("predict")(documents)
    pairs = method.embed(batch)
    assert pairs.shape == (3, 2, 8) and torch.equal(pairs[:, 0], pairs[:, 1])
    for row in range(3):
        ids = torch.cat([batch.former.input_ids[row][batch.former.attention_mask[row].bool()],
                         batch.latter.input_ids[row][batch.latter.attention_mask[row].bool()]])
        expected = method.encoder.token_vectors(ids[None], torch.ones_like(ids)[None])[0].mean(0)
        assert torch.allclose(pairs[row, 0], expected, atol=1e-6)
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", str(ctpe0_config(task_dir, tmp_path, "average"))])
    assert stopped.value.code == 2 and "document_vector 'average' is Table 4's avg column" in capsys.readouterr().err
