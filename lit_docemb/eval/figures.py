"""Figures: the papers' plots drawn from lit_docemb outputs (matplotlib, no display needed), as PNG files and, when
a run logs to wandb, as wandb images and tables.

* :func:`embedding_map`: t-SNE (scikit-learn) or UMAP (``pip install umap-learn``) of document embeddings coloured
  by label (Graph-RoBERTa Fig. 3-4);
* :func:`attention_heatmap`: a document's graph attention (Fig. 6-7);
* :func:`training_curves`: a run's logged metrics over steps, read by :func:`read_run_metrics` from the run
  folder's CSV logs (``metrics.csv``), wandb run files (offline too) or TensorBoard event files;
* :class:`EmbeddingFigures`: a callback drawing the embedding map of labelled documents during ``fit`` and logging it;
* :func:`model_figures`: CoLDE's three levels of similarity between documents (Fig. 4) and Graph-RoBERTa's attention
  heatmap of each document (Fig. 6/7), drawn with a loaded method.

``python -m lit_docemb figures`` (:mod:`lit_docemb.commands.figures`) draws them for a finished run.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only: works on clusters and in CI without a display
import matplotlib.pyplot as plt
from torch import Tensor

from lit_docemb.data.core.datamodule import documents_at
from lit_docemb.data.core.document import Document
from lit_docemb.data.corpora.jsonl import read_jsonl
from lit_docemb.eval.embedding import embed_documents, predict_rows
from lit_docemb.methods import CoLDE, GraphRoBERTa
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.colde import similarity_matrices

log = logging.getLogger(__name__)


def attention_heatmap(attention: Tensor, path: str | Path, title: str = "", head: int | None = None) -> Path:
    """Graph-RoBERTa Fig. 6/7: a document's last-layer graph attention as a heatmap, written to ``path``.

    Args:
        attention: (heads, n+1, n+1) from ``GraphRoBERTa.predict_step``: row i, column j is how much node i
            attends to node j; node 0 is the document node ("D"), nodes 1..n the passages ("P1".."Pn").
        path: Output file (the suffix picks the format: .png, .pdf, .svg).
        title: Figure title.
        head: Draw this head; ``None`` averages the heads.
    """
    if attention.ndim != 3 or attention.shape[1] != attention.shape[2]:
        raise ValueError(f"need attention (heads, n+1, n+1), got {tuple(attention.shape)}")
    matrix = attention.mean(0) if head is None else attention[head]
    labels = ["D"] + [f"P{i}" for i in range(1, matrix.shape[0])]
    size = max(3.0, 0.35 * len(labels) + 1.5)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    image = ax.imshow(matrix.detach().float().cpu().numpy(), cmap="viridis", vmin=0.0)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_xlabel("attended node")
    ax.set_ylabel("attending node")
    ax.set_title(title or ("attention, mean over heads" if head is None else f"attention, head {head}"))
    fig.colorbar(image, ax=ax, fraction=0.046)
    return _save(fig, path)


def similarity_heatmap(matrix: Tensor, labels: list[str], path: str | Path, title: str = "") -> Path:
    """One similarity matrix (N, N) as a heatmap with its row/column labels (CoLDE Fig. 4, one panel)."""
    return similarity_heatmaps({title or "similarity": (matrix, labels)}, path)


def similarity_heatmaps(panels: dict[str, tuple[Tensor, list[str]]] | dict, path: str | Path) -> Path:
    """CoLDE Fig. 4: document-, section- and chunk-level cosine similarities side by side, written to ``path``.

    Args:
        panels: ``{title: (matrix (N, N), N labels)}``, or the dict that ``CoLDE.predict_step`` /
            :func:`lit_docemb.methods.colde.similarity_matrices` return (its three levels are drawn).
        path: Output file (the suffix picks the format).
    """
    if "document_similarity" in panels:
        panels = {"document level": (panels["document_similarity"], list(panels["ids"])),
                  "section level": (panels["section_similarity"], panels["section_labels"]),
                  "chunk level": (panels["chunk_similarity"], panels["chunk_labels"])}
    for title, (matrix, labels) in panels.items():
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or len(labels) != matrix.shape[0]:
            raise ValueError(f"{title}: need a square matrix with one label per row, got {tuple(matrix.shape)} "
                             f"and {len(labels)} labels")
    sizes = [max(3.0, 0.3 * len(labels) + 1.5) for _, labels in panels.values()]
    fig, axes = plt.subplots(1, len(panels), figsize=(sum(sizes) + len(panels), max(sizes)), squeeze=False)
    for ax, (title, (matrix, labels)) in zip(axes[0], panels.items()):
        image = ax.imshow(matrix.detach().float().cpu().numpy(), cmap="viridis", vmin=-1.0, vmax=1.0)
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
        ax.set_yticks(range(len(labels)), labels, fontsize=6)
        ax.set_title(title)
        fig.colorbar(image, ax=ax, fraction=0.046)
    return _save(fig, path)


# --- embedding maps ---------------------------------------------------------------------------------------
def project_2d(embeddings: np.ndarray, method: str = "tsne", seed: int = 0) -> np.ndarray:
    """(N, D) -> (N, 2) by t-SNE (cosine distances, perplexity min(30, (N - 1) / 3)) or UMAP (cosine)."""
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 2 or len(embeddings) < 3:
        raise ValueError(f"need (N >= 3, D) embeddings, got {embeddings.shape}")
    if method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = min(30.0, (len(embeddings) - 1) / 3)
        return TSNE(2, perplexity=perplexity, metric="cosine", init="pca", random_state=seed).fit_transform(embeddings)
    if method == "umap":
        try:
            import umap
        except ImportError as err:
            raise ImportError("UMAP needs the optional package umap-learn: pip install umap-learn (or pip install -e "
                              "'.[figures]'); t-SNE (method 'tsne') needs nothing extra") from err
        neighbours = min(15, len(embeddings) - 1)
        return umap.UMAP(n_neighbors=neighbours, metric="cosine", random_state=seed).fit_transform(embeddings)
    raise ValueError(f"method must be 'tsne' or 'umap', got {method!r}")


def embedding_map(embeddings: np.ndarray, labels: Sequence[str | None], path: str | Path, method: str = "tsne",
                  title: str = "", seed: int = 0) -> tuple[Path, np.ndarray]:
    """Graph-RoBERTa Fig. 3-4: documents in 2-D (t-SNE or UMAP), one colour per label; returns the file and the
    (N, 2) coordinates. A document without a label is drawn grey as "unlabelled"."""
    if len(labels) != len(embeddings):
        raise ValueError(f"{len(embeddings)} embeddings but {len(labels)} labels")
    points = project_2d(embeddings, method, seed)
    names = ["unlabelled" if label is None else str(label) for label in labels]
    classes = sorted(set(names))
    colours = plt.get_cmap("tab20" if len(classes) > 10 else "tab10")
    fig, ax = plt.subplots(figsize=(7, 6))
    for i, name in enumerate(classes):
        rows = [j for j, n in enumerate(names) if n == name]
        colour = "0.6" if name == "unlabelled" else colours(i % colours.N)
        ax.scatter(points[rows, 0], points[rows, 1], s=10, color=colour, label=name, alpha=0.8)
    if len(classes) <= 20:
        ax.legend(fontsize=7, markerscale=1.5, loc="best")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title or f"{'t-SNE' if method == 'tsne' else 'UMAP'} of {len(names)} documents")
    return _save(fig, path), points


# --- training curves --------------------------------------------------------------------------------------
Curves = dict[str, list[tuple[int, float]]]


def read_csv_metrics(path: str | Path) -> Curves:
    """Lightning CSVLogger's ``metrics.csv``: ``{metric: [(step, value), ...]}`` (empty cells skipped)."""
    curves: Curves = defaultdict(list)
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            step = int(float(row.get("step") or 0))
            for name, value in row.items():
                if name not in ("step", "epoch") and value not in ("", None):
                    curves[name].append((step, float(value)))
    return dict(curves)


def read_tensorboard_metrics(folder: str | Path) -> Curves:
    """The scalars of the TensorBoard event files under ``folder`` (needs ``tensorboard``)."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import (
            EventAccumulator,
        )
    except ImportError as err:
        raise ImportError("reading TensorBoard event files needs tensorboard: pip install tensorboard") from err
    curves: Curves = defaultdict(list)
    for events in sorted({p.parent for p in Path(folder).rglob("events.out.tfevents.*")}):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            curves[tag] += [(e.step, e.value) for e in accumulator.Scalars(tag)]
    return dict(curves)


WANDB_BLOCK_BYTES = 32768  # the .wandb transaction log: LevelDB log blocks of protobuf Records


def _wandb_records(path: Path):
    """The raw records of a ``.wandb`` file: a 7-byte header (``:W&B``, magic, version), then LevelDB-log blocks of
    records, each a 7-byte header (crc32, length, type: 1 full, 2 first, 3 middle, 4 last) and its bytes."""
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a wandb run file")
    position, pending = 7, b""
    while position + 7 <= len(data):
        left = WANDB_BLOCK_BYTES - position % WANDB_BLOCK_BYTES
        if left < 7:  # a block's tail too short for a header is padding
            position += left
            continue
        length, kind = int.from_bytes(data[position + 4:position + 6], "little"), data[position + 6]
        chunk = data[position + 7:position + 7 + length]
        position += 7 + length
        if kind == 1:
            yield chunk
        elif kind in (2, 3):
            pending = chunk if kind == 2 else pending + chunk
        elif kind == 4:
            yield pending + chunk


def read_wandb_metrics(path: str | Path) -> Curves:
    """The history of a wandb run file (``<save_dir>/wandb/offline-run-*/run-<id>.wandb``, offline or not):
    ``{metric: [(step, value)]}``, the step being Lightning's ``trainer/global_step`` where logged."""
    import json

    from wandb.proto import wandb_internal_pb2

    curves: Curves = defaultdict(list)
    for raw in _wandb_records(Path(path)):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") != "history":
            continue
        row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        step = int(row.get("trainer/global_step", row.get("_step", 0)))
        for name, value in row.items():
            if not name.startswith("_") and name != "trainer/global_step" and isinstance(value, int | float):
                curves[name].append((step, float(value)))
    return dict(curves)


def read_run_metrics(run_dir: str | Path) -> Curves:
    """Every metric a run folder's CSV logs (``**/metrics.csv``), wandb run files (``**/run-*.wandb``, one per start
    of the run) and TensorBoard event files hold."""
    run_dir = Path(run_dir)
    curves: Curves = defaultdict(list)
    for path in sorted(run_dir.rglob("metrics.csv")):
        for name, points in read_csv_metrics(path).items():
            curves[name] += points
    for path in sorted(run_dir.rglob("run-*.wandb")):
        for name, points in read_wandb_metrics(path).items():
            curves[name] += points
    if any(run_dir.rglob("events.out.tfevents.*")):
        for name, points in read_tensorboard_metrics(run_dir).items():
            curves[name] += points
    if not curves:
        raise FileNotFoundError(f"{run_dir}: no metrics.csv (CSVLogger), wandb run file or TensorBoard event file "
                                "with metrics")
    return {name: sorted(points) for name, points in curves.items()}


def training_curves(curves: Curves, path: str | Path, metrics: Sequence[str] | None = None,
                    title: str = "") -> Path:
    """One panel per metric (``metrics``: those names, by default every ``*loss*`` and ``val/*`` metric, else all),
    value against optimizer step."""
    names = list(metrics) if metrics else [n for n in sorted(curves) if "loss" in n or n.startswith("val/")]
    names = [n for n in names or sorted(curves) if curves.get(n)]
    if not names:
        raise ValueError(f"no points to draw for {list(metrics or curves)}")
    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        steps, values = zip(*curves[name])
        ax.plot(steps, values, marker="o" if len(steps) < 20 else None, markersize=3)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def _save(fig, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


# --- wandb ------------------------------------------------------------------------------------------------
def log_to_wandb(loggers: Sequence, images: dict[str, Path],
                 tables: dict[str, tuple[list[str], list[list]]] | None = None, step: int | None = None) -> int:
    """Logs PNGs (``{key: path}``) and tables (``{key: (columns, rows)}``) to every WandbLogger of ``loggers``;
    returns how many loggers received them."""
    from lightning.pytorch.loggers import WandbLogger

    received = 0
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            for key, path in images.items():
                logger.log_image(key=key, images=[str(path)], step=step)
            for key, (columns, rows) in (tables or {}).items():
                logger.log_table(key=key, columns=columns, data=rows, step=step)
            received += 1
    return received


class EmbeddingFigures(L.Callback):
    """During ``fit``, every ``every_n_epochs`` validation epochs: the embedding map of labelled documents, saved
    as ``<default_root_dir>/figures/embeddings-<method>-epoch<e>.png`` and logged to wandb as an image
    (``figures/embeddings``) and a table of the 2-D points (``figures/embedding_points``: id, label, x, y).

    Args:
        documents: lit_docemb JSONL of the documents to draw; ``None`` uses the DataModule's validation documents
            (they must be Document records, not cached passages).
        max_documents: Draw at most this many documents.
        method: ``"tsne"`` or ``"umap"`` (needs umap-learn).
        every_n_epochs: Draw after every this many validation epochs.
        batch_size: Documents embedded per forward pass.
    """

    def __init__(self, documents: str | None = None, max_documents: int = 2000, method: str = "tsne",
                 every_n_epochs: int = 1, batch_size: int = 64) -> None:
        if method not in ("tsne", "umap") or every_n_epochs < 1 or max_documents < 3:
            raise ValueError(f"need method 'tsne' or 'umap', every_n_epochs >= 1, max_documents >= 3; got "
                             f"{method!r}, {every_n_epochs}, {max_documents}")
        self.documents, self.max_documents, self.method = documents, max_documents, method
        self.every_n_epochs, self.batch_size = every_n_epochs, batch_size
        self.paths: list[Path] = []

    def _documents(self, trainer: L.Trainer) -> list:
        if self.documents is not None:
            return [d for d in read_jsonl(self.documents) if not d.is_empty()][:self.max_documents]
        val_set, corpus = trainer.datamodule.val_set, trainer.datamodule.documents
        docs = documents_at(val_set, range(min(len(val_set), self.max_documents)), corpus)
        if docs and not isinstance(docs[0], Document):
            raise ValueError("EmbeddingFigures: the validation set holds cached passages, not documents: set "
                             "`documents` to a labelled JSONL file")
        return docs

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero or trainer.current_epoch % self.every_n_epochs:
            return
        docs = self._documents(trainer)
        if len(docs) < 3:
            log.warning("EmbeddingFigures: %d documents, need >= 3 for a map", len(docs))
            return
        embeddings = embed_documents(pl_module, docs, self.batch_size)
        embeddings = embeddings.flatten(1).numpy()  # CTPE's (N, 2, D) pairs: former and latter side by side
        path = Path(trainer.default_root_dir) / "figures" / f"embeddings-{self.method}-epoch{trainer.current_epoch}.png"
        path, points = embedding_map(embeddings, [d.label for d in docs], path, self.method,
                                     title=f"{type(pl_module).__name__}, epoch {trainer.current_epoch}")
        self.paths.append(path)
        rows = [[d.id, d.label, float(x), float(y)] for d, (x, y) in zip(docs, points)]
        log_to_wandb(trainer.loggers, {"figures/embeddings": path},
                     {"figures/embedding_points": (["id", "label", "x", "y"], rows)})


# --- a run's outputs ------------------------------------------------------------------------------------------
def read_embeddings(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Ids and (N, D) vectors of an ``embed`` output: its folder, ``embeddings.parquet`` or ``embeddings.npy``
    (with ``ids.txt`` beside it). CTPE's pairs are concatenated (former, latter)."""
    path = Path(path)
    if path.is_dir():
        path = next((path / n for n in ("embeddings.parquet", "embeddings.npy", "former.npy") if (path / n).exists()),
                    path / "embeddings.parquet")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        vectors = [np.array(table.column(n).to_pylist(), dtype=np.float32) for n in table.column_names if n != "id"]
        return table.column("id").to_pylist(), np.concatenate(vectors, axis=1)
    if path.suffix == ".npy":
        ids = (path.parent / "ids.txt").read_text(encoding="utf-8").split("\n")[:-1]
        parts = [path] if path.name != "former.npy" else [path, path.parent / "latter.npy"]
        return ids, np.concatenate([np.load(p) for p in parts], axis=1)
    raise FileNotFoundError(f"{path}: not an embed output (embeddings.parquet, or embeddings.npy with ids.txt)")


def model_figures(method: EmbeddingMethod, output: Path, similarities: Sequence[Document] = (),
                  attention: Sequence[Document] = ()) -> list[Path]:
    """Figures of a trained method on given documents: CoLDE's three levels of similarity between the
    ``similarities`` documents, in one figure (``similarities.png``); Graph-RoBERTa's last-layer attention of each
    ``attention`` document (``attention-<id>.png``, mean over heads)."""
    written = []
    if similarities:
        if not isinstance(method, CoLDE):
            raise ValueError(f"--similarities draws CoLDE's similarity levels; the run's method is "
                             f"{type(method).__name__}")
        written.append(similarity_heatmaps(similarity_matrices(method, list(similarities)),
                                           output / "similarities.png"))
    if attention:
        if not isinstance(method, GraphRoBERTa):
            raise ValueError(f"--attention draws Graph-RoBERTa's graph attention; the run's method is "
                             f"{type(method).__name__}")
        documents = list(attention)
        maps = {row: matrix for rows, predicted in predict_rows(method, documents, max(1, len(documents)))
                for row, matrix in zip(rows, predicted["attention"], strict=True)}
        for row in sorted(maps):  # the documents in their order, each with its own map
            name = re.sub(r"[^\w.-]", "_", documents[row].id)
            written.append(attention_heatmap(maps[row], output / f"attention-{name}.png", title=documents[row].id))
    return written
