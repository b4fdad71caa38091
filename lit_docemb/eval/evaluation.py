"""The common interface of evaluations: an :class:`Evaluation` maps a trained method and its DataModule to a
flat ``{"<group>/<measure>": value}`` dict, and is also a Lightning callback that runs it during ``fit``.

One interface, two entry points:

* during ``fit``: configured under ``trainer.callbacks``, an evaluation runs every ``every_n_epochs`` epochs (and/or
  once when training ends), logs its metrics through the LightningModule (``val/ndcg@10``, ``cluster/nmi``: usable
  as a ``ModelCheckpoint`` monitor) and writes its files under ``<default_root_dir>/evaluation/epoch=<n>/``;
* on a checkpoint: ``python -m lit_docemb evaluate`` (:mod:`lit_docemb.commands.evaluate`) runs the same objects once
  and writes a Markdown table and a JSON file of every metric.

Every rank runs an evaluation (collections are embedded in shards, one per rank, then gathered), so all ranks
compute the same metrics; only global rank 0 writes files. Embeddings are shared between the evaluations of
one :class:`EvaluationContext` (the CLI's single pass), so the clustering, the probes and the few-shot draws
embed each document once. What scikit-learn reads (the probes, k-means) comes from :meth:`EvaluationContext.features`:
the embeddings, or the matrix of a method that gives its documents as one (:class:`EmbedsAsMatrix`: a classical
baseline's TF-IDF, kept sparse).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import lightning as L
import numpy as np
from scipy import sparse
from torch import Tensor

from lit_docemb.data.core.contract import EvaluationData
from lit_docemb.data.core.document import Document
from lit_docemb.eval.embedding import embed_sharded
from lit_docemb import distributed as dist


@runtime_checkable
class EmbedsAsMatrix(Protocol):
    """A method that gives documents' representations as one (N, D) matrix, dense or SciPy sparse (a classical
    baseline: TF-IDF's rows stay sparse), besides its batched ``embed``."""

    def document_matrix(self, documents: Sequence[Document]) -> np.ndarray | sparse.csr_matrix: ...


class EvaluationContext:
    """What an evaluation works on: the method (already on its device), the DataModule (set up), where files go,
    and embeddings already computed in this pass.

    Args:
        method: The trained method.
        data: Its DataModule, set up (what evaluations ask of it:
            :class:`~lit_docemb.data.core.contract.EvaluationData`).
        output_dir: Folder for run files and tables (None: write nothing).
        batch_size: Documents embedded per forward pass.
    """

    def __init__(self, method: L.LightningModule, data: EvaluationData, output_dir: str | Path | None = None,
                 batch_size: int = 64) -> None:
        self.method, self.data, self.batch_size = method, data, batch_size
        self.output_dir = None if output_dir is None else Path(output_dir)
        self._embeddings: dict[str, Tensor] = {}
        self._matrices: dict[str, np.ndarray | sparse.csr_matrix] = {}

    def embed(self, key: str, documents: Sequence[Document]) -> Tensor:
        """(N, D) embeddings of ``documents`` in order, computed once per ``key`` (sharded across ranks)."""
        if key not in self._embeddings:
            self._embeddings[key] = embed_sharded(self.method, documents, self.batch_size).cpu()
        return self._embeddings[key]

    def features(self, key: str, documents: Sequence[Document]) -> Tensor | np.ndarray | sparse.csr_matrix:
        """(N, D) rows of ``documents`` in order for scikit-learn (probes, k-means), computed once per ``key``: the
        method's :class:`EmbedsAsMatrix` matrix when it gives one (every rank computes it whole), else
        :meth:`embed`'s embeddings."""
        if not isinstance(self.method, EmbedsAsMatrix):
            return self.embed(key, documents)
        if key not in self._matrices:
            self._matrices[key] = self.method.document_matrix(documents)
        return self._matrices[key]

    def writes(self) -> bool:
        """Whether this process writes files: an output folder is set and it is global rank 0."""
        return self.output_dir is not None and dist.rank() == 0


class Evaluation(L.Callback, ABC):
    """Base of the evaluations: :meth:`evaluate` returns the metrics; as a callback it runs them during ``fit``.

    Args:
        every_n_epochs: Run after every n-th training epoch (logged through the LightningModule, so a
            ``ModelCheckpoint`` can monitor them); None: never per epoch.
        at_train_end: Also run once when training ends (logged to the loggers at the last step).
        batch_size: Documents embedded per forward pass.
    """

    #: Short name, used by ``evaluate --evaluation <name>`` and as the section of the results table.
    name: str = "evaluation"

    def __init__(self, every_n_epochs: int | None = 1, at_train_end: bool = False, batch_size: int = 64) -> None:
        if (every_n_epochs is not None and every_n_epochs < 1) or batch_size < 1:
            raise ValueError(f"need every_n_epochs >= 1 or null and batch_size >= 1, got {every_n_epochs}, "
                             f"{batch_size}")
        self.every_n_epochs, self.at_train_end, self.batch_size = every_n_epochs, at_train_end, batch_size
        self.metrics: dict[str, float] | None = None

    @abstractmethod
    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        """The metrics of ``context.method`` on ``context.data``, named ``<group>/<measure>``."""

    def _run(self, trainer: L.Trainer, module: L.LightningModule, label: str) -> dict[str, float]:
        root = getattr(trainer, "default_root_dir", None)
        context = EvaluationContext(module, trainer.datamodule, None if root is None else Path(root) / "evaluation"
                                    / label, self.batch_size)
        self.metrics = self.evaluate(context)
        return self.metrics

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.every_n_epochs is None or (trainer.current_epoch + 1) % self.every_n_epochs:
            return
        metrics = self._run(trainer, pl_module, f"epoch={trainer.current_epoch}")
        pl_module.log_dict(metrics, on_step=False, on_epoch=True, sync_dist=False)  # identical on every rank

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.at_train_end:
            return
        metrics = self._run(trainer, pl_module, "end")
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)
        if dist.rank() == 0:
            print(markdown_table({self.name: metrics}))


COUNTS = ("queries", "candidates", "documents", "skipped")
"""Measures that are counts, printed as integers."""


def _format(measure: str, value: float) -> str:
    return str(int(value)) if measure.startswith(COUNTS) and float(value).is_integer() else f"{value:.4f}"


def markdown_table(results: dict[str, dict[str, float]]) -> str:
    """Markdown tables of ``{evaluation name: metrics}``: per evaluation, one row per metric group (the name up to
    its last ``/``) and one column per measure."""
    blocks = []
    for name, metrics in results.items():
        rows: dict[str, dict[str, float]] = {}
        for key, value in metrics.items():
            group, _, measure = key.rpartition("/")
            rows.setdefault(group or name, {})[measure] = value
        columns = list(dict.fromkeys(m for row in rows.values() for m in row))
        lines = [f"### {name}", "", "| | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
        for group, row in rows.items():
            lines.append(f"| {group} | " + " | ".join(_format(c, row[c]) if c in row else "—" for c in columns) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
