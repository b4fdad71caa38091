"""WiSE-FT interpolation (issue 22): ``--interpolate_alpha`` of embed/export/evaluate (α = 0 the baseline exactly, α = 1
the checkpoint, export's encode equal to embed's at any α) and ``interpolate``, which chooses α on validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from runs import run_embed, save_run, tiny_args, write_tsv

from lit_docemb.commands import main
from lit_docemb.commands.loading import build_method, model_overrides
from lit_docemb.data.core.tokens import document_text
from lit_docemb.methods import DocSplit, GraphRoBERTa
from test_export import long_documents

SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer


def trained_run(method, root: Path, init_args: dict, seed: int = 7) -> tuple[Path, Path]:
    """A run folder whose checkpoint holds the method's weights moved away from their start (a stand-in for
    training), and whose config names the seed the start was drawn under."""
    with torch.no_grad():
        for parameter in method.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    config, ckpt = save_run(method, root, init_args)
    config.write_text(yaml.safe_dump({"seed_everything": seed, **yaml.safe_load(config.read_text())}))
    return config, ckpt


def embedded(config: Path, ckpt: Path | None, data: Path, out: Path, *extra: str) -> np.ndarray:
    if ckpt is None:
        main(["embed", "--config", str(config), "--input", str(data), "--output", str(out), "--format", "npy",
              "--batch_size", "3", "--accelerator", "cpu", "--devices", "1", "--progress_bar", "false"])
    else:
        run_embed(config, ckpt, data, out, "--format", "npy", *extra)
    return np.load(out / "embeddings.npy")


def test_docsplit_alpha_zero_is_the_baseline_one_the_checkpoint_and_export_matches(tiny_encoder_dir, tmp_path):
    args = {"encoder": {"name": tiny_encoder_dir, "pooling": "mean", "max_length": 64}}
    config, ckpt = trained_run(DocSplit(**args), tmp_path / "run", args)
    data = write_tsv(tmp_path / "docs.tsv", long_documents(), bad_lines=False)
    baseline = embedded(config, None, data, tmp_path / "baseline")
    trained = embedded(config, ckpt, data, tmp_path / "trained")
    assert np.abs(baseline - trained).max() > 1e-3
    np.testing.assert_array_equal(embedded(config, ckpt, data, tmp_path / "a0", "--interpolate_alpha", "0"), baseline)
    np.testing.assert_array_equal(embedded(config, ckpt, data, tmp_path / "a1", "--interpolate_alpha", "1"), trained)
    half = embedded(config, ckpt, data, tmp_path / "a05", "--interpolate_alpha", "0.5")
    assert np.abs(half - baseline).max() > 1e-4 and np.abs(half - trained).max() > 1e-4

    main(["export", "--config", str(config), "--ckpt_path", str(ckpt), "--output", str(tmp_path / "st"),
          "--interpolate_alpha", "0.5"])
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True)
    encoded = model.encode([document_text(d, True) for d in long_documents()], batch_size=2)
    np.testing.assert_allclose(encoded, half, atol=1e-5)


@pytest.mark.parametrize("head_init", ["random", "identity"])
def test_graph_roberta_alpha_zero_is_the_seeded_baseline_heads_included(tiny_encoder_dir, tmp_path, head_init):
    args = {"encoder": {"name": tiny_encoder_dir}, "node_dim": 32,
            "passages": {"words_per_passage": 20, "max_passage_tokens": 32}, "cache_passages": False,
            "head_init": head_init}
    config, ckpt = trained_run(GraphRoBERTa(**args), tmp_path / "run", args)
    data = write_tsv(tmp_path / "docs.tsv", long_documents(), bad_lines=False)
    baseline = embedded(config, None, data, tmp_path / "baseline")
    np.testing.assert_array_equal(embedded(config, None, data, tmp_path / "again"), baseline)  # seeded: one draw
    np.testing.assert_array_equal(embedded(config, ckpt, data, tmp_path / "a0", "--interpolate_alpha", "0"), baseline)
    np.testing.assert_array_equal(embedded(config, ckpt, data, tmp_path / "a1", "--interpolate_alpha", "1"),
                                  embedded(config, ckpt, data, tmp_path / "trained"))


def test_alpha_needs_a_checkpoint_and_a_range(tiny_encoder_dir, tmp_path, capsys):
    args = {"encoder": {"name": tiny_encoder_dir, "max_length": 64}}
    config, ckpt = trained_run(DocSplit(**args), tmp_path / "run", args)
    data = write_tsv(tmp_path / "docs.tsv", long_documents(), bad_lines=False)
    for extra in (["--interpolate_alpha", "0.5"], ["--ckpt_path", str(ckpt), "--interpolate_alpha", "2"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["embed", "--config", str(config), "--input", str(data), "--output", str(tmp_path / "x"), *extra])
        assert exit_info.value.code == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors[0].startswith("error: --interpolate_alpha needs --ckpt_path")
    assert errors[-1] == "error: --interpolate_alpha: must be in [0, 1] (0 the starting weights, 1 the trained " \
                         "ones), got 2.0"


def test_model_overrides_keeps_only_the_model_section():
    overrides = ["--data.init_args.root", "d", "--model.init_args.encoder.pooling=mean", "--model.init_args.x", "1",
                 "--trainer.max_steps=3"]
    assert model_overrides(overrides) == ["--model.init_args.encoder.pooling=mean", "--model.init_args.x", "1"]


def test_an_encoder_option_overrides_the_block_a_run_saved(tiny_encoder_dir, tmp_path):
    """A run's config.yaml holds the encoder block as LightningCLI saves it (``class_path`` / ``init_args``): a
    command's override of one of its options changes that option and keeps the others."""
    saved = {"class_path": "lit_docemb.models.EncoderSpec",
             "init_args": {"name": tiny_encoder_dir, "pretrained": False, "max_length": 32}}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model": {"class_path": "lit_docemb.methods.DocSplit",
                                                "init_args": {"encoder": saved}}}))
    method = build_method([config], ["--model.init_args.encoder.pooling", "mean"])
    assert method.encoder_spec.pooling == "mean" and method.encoder_spec.pretrained is False


def test_validation_evaluations_rank_a_ranking_corpus_validation_queries_and_score_documents_otherwise(tmp_path):
    """A ranking corpus gets retrieval of its validation queries (even without them: the evaluation then says so);
    a corpus of documents, set up, held-out retrieval."""
    from corpus_files import write_msmarco

    from lit_docemb.eval.runner import validation_evaluations
    from lit_docemb.data.corpora.jsonl import JSONLDataModule
    from lit_docemb.data.corpora.msmarco import MSMARCODataModule
    from lit_docemb.eval.heldout import HeldOutRetrieval
    from lit_docemb.eval.retrieval import RetrievalEvaluation

    root = str(write_msmarco(tmp_path / "msmarco"))
    for data in (MSMARCODataModule(root), MSMARCODataModule(root, val_split=None)):
        assert [(type(e), e.split) for e in validation_evaluations(data)] == [(RetrievalEvaluation, "val")]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": f"text {i}"}) + "\n"
                                                 for i in range(8)))
    documents = JSONLDataModule([str(tmp_path / "docs.jsonl")], val_fraction=0.5, num_workers=0)
    documents.setup_evaluation()
    assert [type(e) for e in validation_evaluations(documents)] == [HeldOutRetrieval]


def scores(results: dict) -> dict[str, float]:
    """Held-out retrieval's metrics without its timing."""
    return {k: v for k, v in results["heldout"].items() if not k.endswith("seconds")}


def test_interpolate_chooses_alpha_on_validation_and_evaluate_scores_it(tiny_encoder_dir, corpus_jsonl, tmp_path,
                                                                         capsys):
    root = tmp_path / "run"
    main(["fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, root), "--trainer.max_steps=3", "--seed_everything=3",
          "--model.encoder.pooling=mean"])
    ckpt = str(next((root / "checkpoints").glob("*.ckpt")))
    config = str(root / "config.yaml")
    record = main(["interpolate", "--config", config, "--ckpt_path", ckpt, "--alphas", "0", "0.5", "1",
                   "--accelerator", "cpu"])
    written = json.loads((root / "interpolation.json").read_text())
    assert written["best_alpha"] == record["best_alpha"] in (0.0, 0.5, 1.0)
    assert written["metric"] == "heldout/heldout/mrr@10" and set(written["scores"]) == {"0.0", "0.5", "1.0"}
    assert written["scores"][str(written["best_alpha"])] == max(written["scores"].values())
    baseline = main(["evaluate", "--config", config, "--evaluation", "heldout", "--output", str(tmp_path / "e0"),
                     "--accelerator", "cpu"])
    at_zero = main(["evaluate", "--config", config, "--ckpt_path", ckpt, "--interpolate_alpha", "0",
                    "--evaluation", "heldout", "--output", str(tmp_path / "a0"), "--accelerator", "cpu"])
    assert scores(at_zero) == scores(baseline)
    assert scores(written["results"]["0.0"]) == scores(baseline)
    trained = main(["evaluate", "--config", config, "--ckpt_path", ckpt, "--evaluation", "heldout", "--output",
                    str(tmp_path / "a1"), "--accelerator", "cpu"])
    assert scores(written["results"]["1.0"]) == scores(trained) != scores(baseline)
    assert "interpolated with its starting weights at alpha 0" in (tmp_path / "a0" / "evaluation.md").read_text()
    assert "best alpha" in capsys.readouterr().out
