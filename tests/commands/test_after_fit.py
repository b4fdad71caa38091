"""The commands a user runs after ``fit``, on a run folder the real CLI wrote with a learning-rate scheduler:
``embed`` and ``export`` parse its config, ``evaluate`` with no ``--evaluation`` scores an unlabelled corpus,
``figures --run`` on a run without logs and ``export`` of a method without a Hugging Face form end in one line."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from runs import save_run, tiny_args

from lit_docemb.commands import main
from lit_docemb.commands import main as cli_main
from lit_docemb.methods import CTPE
from lit_docemb.models.ctpe import WordEmbeddings


@pytest.fixture(scope="module")
def scheduled_run(tiny_encoder_dir, tmp_path_factory):
    """A DocSplit run over an unlabelled JSONL corpus, trained 2 steps with LinearWarmupDecay, no logger."""
    from conftest import write_corpus_jsonl

    root = tmp_path_factory.mktemp("scheduled")
    corpus = write_corpus_jsonl(root / "corpus.jsonl")
    run = root / "run"
    cli_main(["fit", *tiny_args(tiny_encoder_dir, str(corpus), run), "--trainer.max_steps=2",
              "--model.scheduler=lit_docemb.methods.LinearWarmupDecay", "--model.scheduler.warmup_steps=1",
              "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint"])
    assert "LinearWarmupDecay" in (run / "config.yaml").read_text()
    return run, corpus


def _one_line_exit_2(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_embed_reads_a_run_whose_config_has_a_scheduler(scheduled_run, tmp_path):
    run, corpus = scheduled_run
    out = tmp_path / "embeddings"
    main(["embed", "--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
          "--input", str(corpus), "--output", str(out), "--format", "npy", "--batch_size", "4"])
    lines = [line for line in corpus.read_text().splitlines() if line.strip()]
    vectors = __import__("numpy").load(out / "embeddings.npy")
    assert vectors.shape[0] == len(lines) and (out / "ids.txt").read_text().split() == [
        json.loads(line)["id"] for line in lines]


def test_evaluate_without_evaluations_scores_held_out_retrieval(scheduled_run, tmp_path):
    run, _ = scheduled_run
    main(["evaluate", "--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
          "--output", str(tmp_path / "evaluation")])
    results = json.loads((tmp_path / "evaluation" / "evaluation.json").read_text())
    heldout = results["results"]["heldout"]
    assert heldout["heldout/candidates"] > 0 and 0.0 <= heldout["heldout/mrr@10"] <= 1.0


def test_figures_of_a_run_without_logs_is_one_line(scheduled_run, capsys):
    run, _ = scheduled_run
    err = _one_line_exit_2(capsys, ["figures", "--run", str(run)])
    assert str(run) in err


def test_export_of_a_method_without_a_hugging_face_form_is_one_line(tmp_path, capsys):
    corpus_words = ["alpha beta gamma delta", "beta gamma delta alpha"]
    method = CTPE(WordEmbeddings(init="random", dim=8, min_count=1))
    from lit_docemb.data.core.document import Document, Section

    method.prepare([Document(str(i), title=t, sections=[Section("", t)]) for i, t in enumerate(corpus_words)])
    config, ckpt = save_run(method, tmp_path / "run", {"embeddings": {
        "class_path": "lit_docemb.methods.WordEmbeddings", "init_args": {"init": "random", "dim": 8, "min_count": 1}}})
    err = _one_line_exit_2(capsys, ["export", "--config", str(config), "--ckpt_path", str(ckpt),
                                    "--output", str(tmp_path / "exported")])
    assert "embed" in err and not (tmp_path / "exported").exists()
    assert torch.load(ckpt, weights_only=True)["state_dict"]  # the run itself is untouched
    assert yaml.safe_load(config.read_text())["model"]["class_path"] == "lit_docemb.methods.CTPE"


def test_embed_with_a_missing_checkpoint_is_one_line(scheduled_run, tmp_path, capsys):
    run, corpus = scheduled_run
    err = _one_line_exit_2(capsys, ["embed", "--config", str(run / "config.yaml"), "--ckpt_path",
                                    str(run / "nothing.ckpt"), "--input", str(corpus), "--output", str(tmp_path)])
    assert "nothing.ckpt does not exist" in err
