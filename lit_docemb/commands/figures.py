"""``python -m lit_docemb figures``: a finished run's training curves, the map of its document embeddings, CoLDE's
similarity levels and Graph-RoBERTa's attention, as PNG files (the drawing: :mod:`lit_docemb.eval.figures`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.loading import load_method, read_documents, run_of
from lit_docemb.errors import ConfigError
from lit_docemb.eval import figures as drawing


def output_folder(output: str | None, run: str | None, embeddings: str | None) -> Path:
    """``output``, else ``<run>/figures``, else ``<embeddings' folder>/figures``, else ``figures``."""
    if output:
        return Path(output)
    if run:
        return Path(run) / "figures"
    if embeddings:
        folder = Path(embeddings)
        return (folder if folder.is_dir() else folder.parent) / "figures"
    return Path("figures")


def check_figure_arguments(run: str | None, embeddings: str | None, input: str | None, config: list[str] | None,
                           ckpt_path: str | None, drawn_by_model: bool) -> None:
    """A :class:`ConfigError` naming what is missing for the figures asked for (or that nothing was asked for)."""
    if not run and not embeddings and not drawn_by_model:
        raise ConfigError("figures: give --run_dir (training curves), --embeddings with --input (embedding map), or "
                          "--run_dir (or --config and --ckpt_path) with --similarities / --attention")
    if embeddings and not input:
        raise ConfigError("figures: --embeddings needs --input, the JSONL whose labels colour the map")
    if drawn_by_model and not run and not (config and ckpt_path):
        raise ConfigError("figures: --similarities and --attention need the run: --run_dir runs/<run> (or its "
                          "--config and --ckpt_path)")
    if (config or ckpt_path) and not drawn_by_model:
        raise ConfigError("figures: --config and --ckpt_path are read only with --similarities / --attention")


def figures(run_dir: str | None = None, metrics: list[str] | None = None, embeddings: str | None = None,
            input: str | None = None, method: Literal["tsne", "umap"] = "tsne", config: list[str] | None = None,
            ckpt_path: str | None = None, similarities: str | None = None, attention: str | None = None,
            output: str | None = None, seed: int = 0, run: str | None = None) -> list[Path]:
    """Training curves of a run, maps of its document embeddings, CoLDE similarity levels and Graph-RoBERTa
    attention, as PNG files.

    Args:
        run_dir: Run folder (``runs/x``): training curves from its CSV/TensorBoard/wandb logs, and its
            config.yaml and checkpoints/last.ckpt for --similarities / --attention.
        metrics: Metrics to draw (default: losses and val/*).
        embeddings: An embed output (folder, .parquet or .npy) to map.
        input: The documents embedded (JSONL with labels): colours of the map.
        method: 2-D projection of the map.
        config: A trained run's config (for --similarities / --attention, in place of --run_dir); repeat to merge.
        ckpt_path: That run's checkpoint (default with --run_dir: its checkpoints/last.ckpt).
        similarities: Documents (JSONL/TSV) whose CoLDE similarity levels to draw.
        attention: Documents (JSONL/TSV) whose Graph-RoBERTa attention to draw.
        output: Folder of the PNGs (default: <run_dir>/figures, else <embeddings>/figures, else figures).
        seed: Seed of the projection.
        run: The older name of --run_dir.
    """
    if run and run_dir and Path(run) != Path(run_dir):
        raise ConfigError(f"figures: --run {run} and --run_dir {run_dir} name two runs: give --run_dir alone")
    run = run_dir or run
    drawn_by_model = bool(similarities or attention)
    check_figure_arguments(run, embeddings, input, config, ckpt_path, drawn_by_model)
    # the run a model figure needs, named before anything is drawn: one line if it is not one
    model_run = run_of(run if not config else None, config, ckpt_path, needs_checkpoint=True) if drawn_by_model \
        else None
    folder = output_folder(output, run, embeddings)
    written = []
    if run:
        try:
            curves = drawing.read_run_metrics(run)
        except FileNotFoundError as err:  # a run without a logger (logger: false) has no curves to draw
            if not drawn_by_model:
                raise ConfigError(str(err)) from None
            curves = None
            print(f"figures: no training curves ({err})", file=sys.stderr)
        if curves is not None:
            written.append(drawing.training_curves(curves, folder / "training_curves.png", metrics,
                                                   title=Path(run).name))
    if embeddings:
        ids, vectors = drawing.read_embeddings(embeddings)
        labels = {d.id: d.label for d in read_documents(input)}
        path, _ = drawing.embedding_map(vectors, [labels.get(i) for i in ids], folder / f"embeddings-{method}.png",
                                      method, seed=seed)
        written.append(path)
    if drawn_by_model:
        method = load_method(model_run)
        written += drawing.model_figures(method, folder, read_documents(similarities) if similarities else (),
                                       read_documents(attention) if attention else ())
    for path in written:
        print(f"figures: wrote {path}")
    return written


def main(argv: list[str] | None = None) -> list[Path]:
    return run_command(figures, sys.argv[1:] if argv is None else argv, "python -m lit_docemb figures")
