"""Figures: the papers' plots drawn from lit_docemb outputs (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: works on clusters and in CI without a display
import matplotlib.pyplot as plt  # noqa: E402
from torch import Tensor  # noqa: E402


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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
