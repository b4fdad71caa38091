"""Figures: embedding maps, training curves, the ``figures`` command, and images logged to an offline wandb run."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import matplotlib.image
import numpy as np
import pytest
from conftest import _topic_texts
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from runs import save_run

from lit_docemb.commands import main
from lit_docemb.eval.figures import (
    EmbeddingFigures,
    embedding_map,
    project_2d,
    read_run_metrics,
    training_curves,
)
from lit_docemb.commands.figures import main as figures_main
from lit_docemb.data import JSONLDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.methods import CoLDE, DocSplit, GraphRoBERTa
from lit_docemb.models import EncoderSpec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path) -> None:
    assert path.is_file() and path.read_bytes()[:8] == PNG_MAGIC
    height, width = matplotlib.image.imread(path).shape[:2]
    assert height > 100 and width > 100


def clusters(n_per_class: int = 12, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, dim)) * 5
    points = np.concatenate([c + rng.normal(size=(n_per_class, dim)) * 0.3 for c in centres])
    return points.astype(np.float32), [c for c in "abc" for _ in range(n_per_class)]


def test_tsne_map_keeps_labelled_clusters_apart(tmp_path):
    vectors, labels = clusters()
    path, points = embedding_map(vectors, labels, tmp_path / "map.png", "tsne")
    assert_png(path)
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1) + np.eye(len(points)) * 1e9
    nearest = distances.argmin(1)
    assert all(labels[i] == labels[j] for i, j in enumerate(nearest))  # each point's 2-D neighbour shares its label
    with pytest.raises(ValueError, match="labels"):
        embedding_map(vectors, labels[:-1], tmp_path / "bad.png")


def test_umap_is_optional_with_a_clear_message():
    try:
        import umap  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install umap-learn"):
            project_2d(clusters()[0], "umap")
    else:
        assert project_2d(clusters()[0], "umap").shape == (36, 2)


def test_training_curves_from_csv_logs_and_the_figures_command(tmp_path):
    logger = CSVLogger(tmp_path / "run", name="csv")
    for step in range(6):
        logger.log_metrics({"train/loss": 2.0 / (step + 1), "lr-AdamW": 1e-4}, step=step)
    logger.log_metrics({"val/loss": 0.9, "epoch": 0}, step=5)
    logger.save()
    curves = read_run_metrics(tmp_path / "run")
    assert curves["train/loss"] == [(s, pytest.approx(2.0 / (s + 1))) for s in range(6)]
    assert curves["val/loss"] == [(5, pytest.approx(0.9))] and "epoch" not in curves
    assert_png(training_curves(curves, tmp_path / "curves.png"))

    vectors, labels = clusters(5)
    embedded = tmp_path / "embedded"
    embedded.mkdir()
    np.save(embedded / "embeddings.npy", vectors)
    (embedded / "ids.txt").write_text("".join(f"d{i}\n" for i in range(len(vectors))))
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": "x y", "label": label}) + "\n"
                            for i, label in enumerate(labels)))
    main(["figures", "--run", str(tmp_path / "run"), "--embeddings", str(embedded), "--input", str(docs)])
    assert_png(tmp_path / "run" / "figures" / "training_curves.png")
    assert_png(tmp_path / "run" / "figures" / "embeddings-tsne.png")
    with pytest.raises(FileNotFoundError, match="metrics.csv"):
        read_run_metrics(embedded)


def test_callback_logs_the_map_to_an_offline_wandb_run(tiny_encoder_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    corpus = tmp_path / "labelled.jsonl"
    corpus.write_text("".join(json.dumps({"id": name, "text": " ".join(text.split()[:60]), "label": name[0]}) + "\n"
                              for name, text in _topic_texts()[:24]))
    data = JSONLDataModule([str(corpus)], batch_size=4, num_workers=0, val_fraction=0.4)
    logger = WandbLogger(save_dir=str(tmp_path), offline=True, project="figures-test")
    figures = EmbeddingFigures(max_documents=50)
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=1, limit_val_batches=1,
                        num_sanity_val_steps=0, logger=logger, callbacks=[figures], enable_progress_bar=False,
                        enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.0), datamodule=data)
    logger.experiment.finish()
    assert len(figures.paths) == 1
    assert_png(figures.paths[0])
    run_files = next((tmp_path / "wandb").glob("offline-run-*")) / "files"
    images = list((run_files / "media" / "images").rglob("*.png"))
    assert len(images) == 1 and images[0].read_bytes() == figures.paths[0].read_bytes()
    tables = list((run_files / "media" / "table").rglob("*.table.json"))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    assert table["columns"] == ["id", "label", "x", "y"] and len(table["data"]) == len(data.val_set)


def test_training_curves_from_an_offline_wandb_run(tmp_path, monkeypatch):
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    logger = WandbLogger(save_dir=str(tmp_path), offline=True, project="curves-test")
    for step in range(5):
        logger.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step)
    logger.experiment.finish()
    wandb.teardown()  # the service flushes and closes the run file
    curves = read_run_metrics(tmp_path)
    assert curves["train/loss"] == [(s, pytest.approx(1.0 / (s + 1))) for s in range(5)]
    assert_png(training_curves(curves, tmp_path / "curves.png"))


def test_figures_command_draws_colde_similarities_and_graph_attention(tiny_encoder_dir, tmp_path):
    texts = [t for _, t in _topic_texts()[:3]]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(Document(f"d/{i}", "", [Section("", t[:300]), Section("h", t[300:600])]).to_json() + "\n"
                            for i, t in enumerate(texts)))
    colde_args = {"encoder": {"name": tiny_encoder_dir}, "chunk_tokens": 24, "num_heads": 2, "lstm_output_size": 16,
                  "projection_size": 8, "chunk_embeddings": 32}
    colde = save_run(CoLDE(**colde_args), tmp_path / "colde", colde_args)
    graph_args = {"encoder": {"name": tiny_encoder_dir}, "node_dim": 16,
                  "passages": {"words_per_passage": 20, "max_passage_tokens": 32}, "cache_passages": False}
    graph = save_run(GraphRoBERTa(**graph_args), tmp_path / "graph", graph_args)

    def figures(run: tuple[Path, Path], *extra: str) -> list[Path]:
        return figures_main(["--config", str(run[0]), "--ckpt_path", str(run[1]), "--output", str(tmp_path / "figs"),
                             *extra])

    assert figures(colde, "--similarities", str(docs)) == [tmp_path / "figs" / "similarities.png"]
    assert_png(tmp_path / "figs" / "similarities.png")
    written = figures(graph, "--attention", str(docs))
    assert [p.name for p in written] == ["attention-d_0.png", "attention-d_1.png", "attention-d_2.png"]
    for path in written:
        assert_png(path)
    with pytest.raises(ValueError, match="CoLDE.*GraphRoBERTa"):
        figures(graph, "--similarities", str(docs))
    with pytest.raises(SystemExit):  # a model figure without the run's checkpoint
        main(["figures", "--similarities", str(docs)])
