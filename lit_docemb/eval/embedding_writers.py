"""Embeddings written to files, on one device or several: the path of :mod:`lit_docemb.eval.embedding` that
``python -m lit_docemb embed`` (:mod:`lit_docemb.commands.embed`) and ``predict`` take. Length-bucketed predict
batches are dealt out to the ranks, each rank writes one parquet shard as predictions come, and rank 0 merges the
shards in input order (:func:`write_embeddings`); :class:`PredictionWriter` is ``predict``'s writer of the same
rows. Vectors are the method's ``predict_step`` fields, as :func:`~lit_docemb.eval.embedding.embed_rows` gives
the ``embed`` field in memory."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import lightning as L
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from lightning.pytorch.callbacks import BasePredictionWriter
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from lit_docemb.data.core.contract import MethodBatches
from lit_docemb.data.core.document import Document
from lit_docemb.data.caches.token_cache import TokenCache
from lit_docemb.errors import ConfigError, DiskFull, is_disk_full, staged_write, write_whole_text
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.progress import rate_progress_bars


# --- length-bucketed, sharded batches ---------------------------------------------------------------------
class PositionedDocuments(Dataset):
    """Documents whose ids are replaced by their input positions ("0", "1", ...), so that every prediction row
    finds its input line again whatever the method drops and whatever ids repeat."""

    def __init__(self, documents: Sequence[Document]) -> None:
        self.documents = documents

    def __len__(self) -> int:
        return len(self.documents)

    def __getitem__(self, index: int) -> Document:
        return replace(self.documents[index], id=str(index))


class LengthBuckets(Sampler[list[int]]):
    """Batches of documents of similar length (characters), shortest first, batch ``b`` on rank ``b % W``.

    Args:
        lengths: Length of each document.
        batch_size: Documents per batch.
        rank: This process's rank.
        world_size: Number of processes W.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, rank: int = 0, world_size: int = 1) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
        batches = [order[i:i + batch_size].tolist() for i in range(0, len(order), batch_size)]
        self.batches = batches[rank::world_size]

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


class EmbedDataModule(L.LightningDataModule, MethodBatches):
    """Predict batches of a fixed document list, length-bucketed and dealt out to the ranks.

    Args:
        documents: The documents to embed, in input order.
        batch_size: Documents per batch and device.
        num_workers: Dataloader worker processes (the method's collator runs there).
    """

    def __init__(self, documents: Sequence[Document], batch_size: int = 64, num_workers: int = 0) -> None:
        super().__init__()
        self.documents = documents
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.collator_factory: Callable[[str], Callable] | None = None

    def connect(self, collator: Callable[[str], Callable], token_cache: TokenCache | None = None) -> None:
        """Takes the method's collator factory (called by the method's ``setup``, as for a corpus DataModule).

        Args:
            collator: The method's ``collator(stage)``; its ``"predict"`` collator batches the documents.
            token_cache: A token-reading method's cache, deliberately not opened: ``embed`` reads each
                document once, so its collator splits and tokenizes the documents itself (same ids as the cache
                gives) rather than writing a cache that nothing would read again.
        """
        self.collator_factory = collator

    def predict_dataloader(self) -> DataLoader:
        if self.collator_factory is None:
            raise RuntimeError("EmbedDataModule needs a collator: call datamodule.connect(method.collator) (a "
                               "lit_docemb method does it in its setup when a Trainer runs it)")
        trainer = self.trainer
        sampler = LengthBuckets([len(d.text) + len(d.title) for d in self.documents], self.batch_size,
                                trainer.global_rank, trainer.world_size)
        return DataLoader(PositionedDocuments(self.documents), batch_sampler=sampler, num_workers=self.num_workers,
                          collate_fn=self.collator_factory("predict"))


# --- writing ----------------------------------------------------------------------------------------------
def vector_fields(prediction: dict, names: Sequence[str], method: str = "the method") -> dict[str, Tensor]:
    """The per-document vectors of a ``predict_step`` output: the fields ``names`` (the method's
    :attr:`~lit_docemb.methods.base.EmbeddingMethod.vector_outputs`), each a 2-D tensor with one row per returned
    id. Other outputs (a batch's similarity matrix, whose width is the batch's size) are not written.

    Args:
        prediction: One batch's ``predict_step`` output, with its ``ids``.
        names: The fields to take.
        method: The method's name, for the error naming a missing or misshapen field.
    """
    rows = len(prediction["ids"])
    fields = {name: prediction.get(name) for name in names}
    for name, values in fields.items():
        if not (isinstance(values, Tensor) and values.ndim == 2 and values.shape[0] == rows):
            shape = tuple(values.shape) if isinstance(values, Tensor) else type(values).__name__
            raise ValueError(f"{method}.predict_step's {name!r} is not ({rows}, width) vectors, one per returned "
                             f"id: got {shape} (vector_outputs names what embed writes)")
    return fields


def method_vector_fields(pl_module, prediction: dict) -> dict[str, Tensor]:
    """:func:`vector_fields` of the fields ``pl_module`` declares in ``vector_outputs``."""
    names = getattr(pl_module, "vector_outputs", EmbeddingMethod.vector_outputs)
    return vector_fields(prediction, names, type(pl_module).__name__)


def vector_table(pl_module, prediction: dict, key: str, keys: pa.Array) -> pa.Table:
    """One batch's rows: the ``key`` column, then a fixed-size-list column per vector field the method declares."""
    fields = method_vector_fields(pl_module, prediction)
    return pa.table({key: keys, **{name: _vector_column(values.float().numpy()) for name, values in fields.items()}})


def append_rows(writer: pq.ParquetWriter | None, path: Path, table: pa.Table) -> pq.ParquetWriter:
    """Writes ``table`` to ``path`` through ``writer``, opened with the first table's schema; returns the writer."""
    writer = writer or pq.ParquetWriter(path, table.schema)
    writer.write_table(table)
    return writer


def _vector_column(vectors: np.ndarray) -> pa.Array:
    """(N, D) float32 as a fixed-size-list column."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])


def _column_vectors(column: pa.ChunkedArray) -> np.ndarray:
    """A fixed-size-list column back to (N, D) float32."""
    column = column.combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), column.type.list_size)


class ShardWriter(BasePredictionWriter):
    """Writes each rank's predictions as they come to ``<output>/shards/rank-<r>.parquet`` (``position`` and
    one column per vector field), so no rank holds its embeddings in memory.

    Args:
        output_dir: The output folder.
    """

    def __init__(self, output_dir: str | Path) -> None:
        super().__init__(write_interval="batch")
        self.shard_dir = Path(output_dir) / "shards"
        self._writer: pq.ParquetWriter | None = None
        self.documents_in = self.empty_documents = 0

    def on_predict_start(self, trainer, pl_module) -> None:
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.shard_dir / f"rank-{trainer.global_rank:05d}.parquet"
        self.path.unlink(missing_ok=True)
        if trainer.is_global_zero:  # a crashed earlier run with more ranks may have left shards
            for stale in self.shard_dir.glob("rank-*"):
                if int(stale.name[5:10]) >= trainer.world_size:
                    stale.unlink()
        self._writer, self.documents_in, self.empty_documents = None, 0, 0

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx,
                           dataloader_idx) -> None:
        self.documents_in += len(batch) + int(getattr(batch, "skipped", 0))
        self.empty_documents += int(prediction.get("empty_documents", 0))
        positions = pa.array([int(i) for i in prediction["ids"]], pa.int64())
        table = vector_table(pl_module, prediction, "position", positions)
        with self._reporting_full_disk():
            self._writer = append_rows(self._writer, self.path, table)

    def on_predict_end(self, trainer, pl_module) -> None:
        if self._writer is not None:
            with self._reporting_full_disk():
                self._writer.close()
        (self.shard_dir / f"rank-{trainer.global_rank:05d}.json").write_text(
            json.dumps({"documents_in": self.documents_in, "empty_documents": self.empty_documents}))


    @contextlib.contextmanager
    def _reporting_full_disk(self) -> Iterator[None]:
        """A full disk while writing the shard ends the run with :class:`DiskFull`, the shard removed."""
        try:
            yield
        except OSError as err:
            if not is_disk_full(err):
                raise
            if self._writer is not None:
                with contextlib.suppress(OSError):  # its footer cannot be written either
                    self._writer.close()
                self._writer = None
            self.path.unlink(missing_ok=True)
            raise DiskFull(self.path, f"the shard is removed; the outputs in {self.shard_dir.parent} are as they "
                           "were") from err


def merge_shards(output_dir: str | Path, documents: Sequence[Document], output_format: str) -> dict:
    """One output in input order from the ranks' shards (then removed); returns the counts written."""
    output_dir, shard_dir = Path(output_dir), Path(output_dir) / "shards"
    tables = [pq.read_table(p) for p in sorted(shard_dir.glob("rank-*.parquet"))]
    if not sum(len(t) for t in tables):  # every batch came back without a row (CTPE's unsplittable documents)
        raise ConfigError(f"--input: none of the {len(documents)} documents was embedded: the method left every one "
                          "out (CTPE: no split position in them, e.g. no section its pos 'before:<heading>' names; "
                          "Doc2VecC: no word of its vocabulary); give documents the method can represent")
    table = pa.concat_tables(tables)
    positions = table.column("position").to_numpy()
    order = np.argsort(positions, kind="stable")
    positions = positions[order]
    if len(np.unique(positions)) != len(positions) or positions[-1] >= len(documents):
        raise RuntimeError("the shards do not hold each input document at most once: were they mixed with "
                           "another run's?")
    ids = [documents[p].id for p in positions.tolist()]
    fields = [name for name in table.column_names if name != "position"]
    try:
        if output_format == "parquet":
            columns = {"id": pa.array(ids, pa.string())} | {n: table.column(n).take(pa.array(order)) for n in fields}
            with staged_write(output_dir / "embeddings.parquet") as staged:
                pq.write_table(pa.table(columns), staged)
        else:
            for name in fields:
                with staged_write(output_dir / f"{name}.npy") as staged, open(staged, "wb") as f:
                    np.save(f, _column_vectors(table.column(name))[order])
            write_whole_text(output_dir / "ids.txt", "".join(f"{i}\n" for i in ids))
    except DiskFull:
        remove_shards(shard_dir)  # the space they hold
        raise
    counts = [json.loads(p.read_text()) for p in shard_dir.glob("rank-*.json")]
    received = sum(c["documents_in"] for c in counts)
    remove_shards(shard_dir)
    return {"embedded": len(ids), "skipped_by_method": received - len(ids),
            "empty_documents": sum(c.get("empty_documents", 0) for c in counts),
            "dimensions": {n: table.schema.field(n).type.list_size for n in fields}}


def remove_shards(shard_dir: Path) -> None:
    for path in shard_dir.iterdir():
        path.unlink()
    shard_dir.rmdir()


# --- the run ----------------------------------------------------------------------------------------------
def write_embeddings(method: EmbeddingMethod, documents: Sequence[Document], output_dir: str | Path,
                     output_format: str = "parquet", batch_size: int = 64, num_workers: int = 0,
                     ckpt_path: str | None = None, progress_bar: bool = True, **trainer_kwargs) -> dict | None:
    """Embeds ``documents`` with ``method`` (weights from ``ckpt_path`` when given) into ``output_dir``; returns the
    counts written on rank 0 (``None`` on the other ranks). ``trainer_kwargs`` go to the Trainer (accelerator,
    devices, strategy, precision)."""
    if output_format not in ("parquet", "npy"):
        raise ValueError(f"--format must be 'parquet' or 'npy', got {output_format!r}")
    trainer = L.Trainer(logger=False, use_distributed_sampler=False, enable_progress_bar=progress_bar,
                        enable_model_summary=False, default_root_dir=output_dir,
                        callbacks=[ShardWriter(output_dir), *(rate_progress_bars() if progress_bar else [])],
                        **trainer_kwargs)
    with warnings.catch_warnings():  # LengthBuckets returns every index: no drop_last for Lightning to set
        warnings.filterwarnings("ignore", message="You are using a custom batch sampler `LengthBuckets`")
        trainer.predict(method, datamodule=EmbedDataModule(documents, batch_size, num_workers),
                        ckpt_path=ckpt_path, return_predictions=False)
    trainer.strategy.barrier("embed-shards-written")
    if not trainer.is_global_zero:
        return None
    return {**merge_shards(output_dir, documents, output_format), "devices": trainer.world_size}


# --- predict ----------------------------------------------------------------------------------------------
class PredictionWriter(BasePredictionWriter):
    """What ``python -m lit_docemb predict`` writes (:class:`~lit_docemb.commands.cli.DocEmbCLI` adds it to a
    predict run whose config has no prediction writer): each rank's ``predict_step`` rows as they come to
    ``<output_dir>/rank-<r>.parquet`` (an ``id`` column, the document ids, and one list-of-float32 column per
    vector field, as ``embed`` writes), then one line on rank 0 with the folder and the row count.

    Args:
        output_dir: The folder of the parquet files (``<default_root_dir>/predictions`` by default).
    """

    def __init__(self, output_dir: str | Path) -> None:
        super().__init__(write_interval="batch")
        self.output_dir = Path(output_dir)
        self._writer: pq.ParquetWriter | None = None
        self.rows = 0

    def on_predict_start(self, trainer, pl_module) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.output_dir / f"rank-{trainer.global_rank:05d}.parquet"
        self.path.unlink(missing_ok=True)
        self._writer, self.rows = None, 0

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx,
                           dataloader_idx) -> None:
        table = vector_table(pl_module, prediction, "id", pa.array([str(i) for i in prediction["ids"]], pa.string()))
        self._writer = append_rows(self._writer, self.path, table)
        self.rows += table.num_rows

    def on_predict_end(self, trainer, pl_module) -> None:
        if self._writer is not None:
            self._writer.close()
        rows = trainer.strategy.reduce(torch.tensor(float(self.rows)), reduce_op="sum")
        if trainer.is_global_zero:
            print(f"predict: wrote {int(rows)} rows to {self.output_dir}/rank-*.parquet")
