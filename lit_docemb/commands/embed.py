"""``python -m lit_docemb embed``: embeddings of a JSONL or TSV file of documents, written to disk in input order.

::

    python -m lit_docemb embed --config runs/x/config.yaml --ckpt_path runs/x/checkpoints/last.ckpt \\
        --input docs.jsonl --output runs/x/embeddings [--format parquet|npy] [--batch_size 64] [--devices 2]

* **Input**: lit_docemb JSONL (:mod:`lit_docemb.data.jsonl`) or TSV (``id<TAB>text`` or ``id<TAB>title<TAB>text``
  per line, an optional header line ``id<TAB>text`` / ``id<TAB>title<TAB>text``). Bad lines and empty documents
  are skipped, counted and reported; they never stop the run.
* **Method**: the ``model`` section of the run's config (``<default_root_dir>/config.yaml``) with the checkpoint's
  weights, restored by Lightning (so a method's own checkpoint state, e.g. DECA's or CTPE's vocabulary, comes back).
* **Run**: Lightning ``predict`` through the method's predict collator and ``predict_step``. Documents are sorted
  by length and cut into batches of similar length (less padding); under several devices the batches are dealt
  out to the ranks in turn, and each rank writes its own shard (:class:`ShardWriter`). Rank 0 then merges the
  shards into one output in input order (:func:`merge_shards`).
* **Output**: every per-document vector field of the method's ``predict_step`` (``embeddings``; CTPE's
  ``former`` and ``latter``): ``embeddings.parquet`` with an ``id`` column and one list-of-float32 column per
  field, or ``<field>.npy`` (N, D) per field plus ``ids.txt``; ``embed_stats.json`` holds the counts. Documents
  a method cannot embed (CTPE's unsplittable ones; DECA-Doc2VecC's documents without a known word, unless its
  backbone's ``keep_empty`` is set) are left out and counted (``skipped_by_method``; ``empty_documents`` for
  Doc2VecC's, kept or not).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import lightning as L
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from lightning.pytorch.callbacks import BasePredictionWriter
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from lit_docemb.commands.trust import load_yaml, refuse_untrusted
from lit_docemb.data.document import Document, Section
from lit_docemb.data.jsonl import read_jsonl
from lit_docemb.data.passage_cache import PassageCache
from lit_docemb.data.reading import (
    ReadContext,
    read_lines,
    reading_summary,
    require_path,
)
from lit_docemb.errors import ConfigError, require
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.checkpoints import read_checkpoint

log = logging.getLogger(__name__)

TSV_EXPECTED = "id<TAB>text or id<TAB>title<TAB>text per line (an optional header line of those names)"
TSV_HEADERS = (["id", "text"], ["id", "title", "text"])


# --- input ------------------------------------------------------------------------------------------------
def read_tsv(path: str | Path, context: ReadContext | None = None) -> list[Document]:
    """Documents of a TSV file: ``id<TAB>text`` or ``id<TAB>title<TAB>text`` (one untitled section). A line with
    another number of fields or an empty id is skipped and counted as ``"malformed_record"``."""
    context = ReadContext() if context is None else context
    path = require_path(path, "TSV documents", TSV_EXPECTED)
    documents = []
    for line_no, line in read_lines(path, context):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if line_no == 1 and [f.strip().lower() for f in fields] in TSV_HEADERS:
            continue
        if len(fields) not in (2, 3) or not fields[0].strip():
            context.malformed(f"{path}:{line_no}", f"{len(fields)} tab-separated fields", TSV_EXPECTED)
            continue
        title = fields[1] if len(fields) == 3 else ""
        documents.append(Document(fields[0].strip(), title=title, sections=[Section("", fields[-1])]))
    return documents


def read_documents(path: str | Path, stats: Counter | None = None) -> list[Document]:
    """The non-empty documents of a ``.jsonl``/``.tsv`` file (optionally ``.gz``/``.bz2``/``.xz``), in file order;
    bad lines and empty documents are counted into ``stats``."""
    context = ReadContext(stats=Counter() if stats is None else stats)
    suffixes = [s.lower() for s in Path(path).suffixes if s.lower() not in (".gz", ".bz2", ".xz")]
    if suffixes[-1:] in ([".tsv"], [".tab"]):
        documents = read_tsv(path, context)
    elif suffixes[-1:] in ([".jsonl"], [".json"]):
        documents = read_jsonl(path, context)
    else:
        raise ValueError(f"--input {path}: name it .jsonl (lit_docemb JSONL) or .tsv ({TSV_EXPECTED})")
    kept = [d for d in documents if not d.is_empty()]
    if len(kept) < len(documents):
        context.stats["empty_document"] += len(documents) - len(kept)
    return kept


# --- the method -------------------------------------------------------------------------------------------
def _merge(base: dict, update: dict) -> dict:
    """``update`` over ``base``, dicts merged key by key; a new ``class_path`` replaces the old init_args."""
    if "class_path" in update and update.get("class_path") != base.get("class_path"):
        return dict(update)
    merged = dict(base)
    for key, value in update.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) \
            else value
    return merged


def build_method(configs: Sequence[str | Path]) -> EmbeddingMethod:
    """The method of a run's config(s) (the ``model`` section; later files win), built without its weights."""
    from lightning.pytorch.cli import LightningArgumentParser

    import lit_docemb.methods  # noqa: F401  (registers the methods)

    model: dict = {}
    for path in configs:
        config = load_yaml(path) or {}  # safe YAML, class paths checked before jsonargparse imports any
        if not isinstance(config, dict) or "model" not in config:
            raise ValueError(f"{path} has no 'model' section: pass the run's config.yaml (or the fit config)")
        model = _merge(model, config["model"])
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(EmbeddingMethod, "model", required=True, fail_untyped=False)  # as LightningCLI
    parsed = parser.parse_object({"model": model})
    refuse_untrusted(parsed)  # callables resolved from strings, before anything is built
    instantiate = getattr(parser, "instantiate", None) or parser.instantiate_classes
    return instantiate(parsed).model


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


class EmbedDataModule(L.LightningDataModule):
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

    def connect(self, collator: Callable[[str], Callable], passage_cache: PassageCache | None = None) -> None:
        """Takes the method's collator factory (called by the method's ``setup``, as for a corpus DataModule).

        Args:
            collator: The method's ``collator(stage)``; its ``"predict"`` collator batches the documents.
            passage_cache: A passage-reading method's cache, deliberately not opened: ``embed`` reads each
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
        names = getattr(pl_module, "vector_outputs", EmbeddingMethod.vector_outputs)
        fields = vector_fields(prediction, names, type(pl_module).__name__)
        columns = {"position": pa.array([int(i) for i in prediction["ids"]], pa.int64())}
        columns |= {name: _vector_column(values.float().numpy()) for name, values in fields.items()}
        table = pa.table(columns)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema)
        self._writer.write_table(table)

    def on_predict_end(self, trainer, pl_module) -> None:
        if self._writer is not None:
            self._writer.close()
        (self.shard_dir / f"rank-{trainer.global_rank:05d}.json").write_text(
            json.dumps({"documents_in": self.documents_in, "empty_documents": self.empty_documents}))


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
    if output_format == "parquet":
        columns = {"id": pa.array(ids, pa.string())} | {n: table.column(n).take(pa.array(order)) for n in fields}
        pq.write_table(pa.table(columns), output_dir / "embeddings.parquet")
    else:
        for name in fields:
            np.save(output_dir / f"{name}.npy", _column_vectors(table.column(name))[order])
        (output_dir / "ids.txt").write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
    counts = [json.loads(p.read_text()) for p in shard_dir.glob("rank-*.json")]
    received = sum(c["documents_in"] for c in counts)
    for path in shard_dir.iterdir():
        path.unlink()
    shard_dir.rmdir()
    return {"embedded": len(ids), "skipped_by_method": received - len(ids),
            "empty_documents": sum(c.get("empty_documents", 0) for c in counts),
            "dimensions": {n: table.schema.field(n).type.list_size for n in fields}}


# --- the command ------------------------------------------------------------------------------------------
def write_embeddings(method: EmbeddingMethod, documents: Sequence[Document], output_dir: str | Path,
                     output_format: str = "parquet", batch_size: int = 64, num_workers: int = 0,
                     ckpt_path: str | None = None, progress_bar: bool = True, **trainer_kwargs) -> dict | None:
    """Embeds ``documents`` with ``method`` (weights from ``ckpt_path`` when given) into ``output_dir``; returns the
    counts written on rank 0 (``None`` on the other ranks). ``trainer_kwargs`` go to the Trainer (accelerator,
    devices, strategy, precision)."""
    if output_format not in ("parquet", "npy"):
        raise ValueError(f"--format must be 'parquet' or 'npy', got {output_format!r}")
    trainer = L.Trainer(logger=False, use_distributed_sampler=False, enable_progress_bar=progress_bar,
                        enable_model_summary=False, callbacks=[ShardWriter(output_dir)], default_root_dir=output_dir,
                        **trainer_kwargs)
    with warnings.catch_warnings():  # LengthBuckets returns every index: no drop_last for Lightning to set
        warnings.filterwarnings("ignore", message="You are using a custom batch sampler `LengthBuckets`")
        trainer.predict(method, datamodule=EmbedDataModule(documents, batch_size, num_workers),
                        ckpt_path=ckpt_path, return_predictions=False)
    trainer.strategy.barrier("embed-shards-written")
    if not trainer.is_global_zero:
        return None
    return {**merge_shards(output_dir, documents, output_format), "devices": trainer.world_size}


def embed(configs: Sequence[str | Path], ckpt_path: str, input_path: str, output_dir: str,
          output_format: str = "parquet", batch_size: int = 64, num_workers: int = 0, accelerator: str = "auto",
          devices: str | int = "auto", strategy: str = "auto", precision: str | None = None,
          progress_bar: bool = True) -> dict | None:
    """Embeds ``input_path`` with the run's method and checkpoint into ``output_dir`` and writes
    ``embed_stats.json``; returns the stats on rank 0 (``None`` on the other ranks)."""
    read_checkpoint(ckpt_path, mmap=True)  # a missing or unreadable file stops here, before reading the input
    stats: Counter = Counter()
    documents = read_documents(input_path, stats)
    log.warning(reading_summary(f"embed --input {input_path}", len(documents), {}, stats))
    if not documents:
        raise ValueError(f"{input_path}: no document to embed (skipped: {dict(stats) or 'none'})")
    written = write_embeddings(build_method(configs), documents, output_dir, output_format, batch_size, num_workers,
                               ckpt_path, progress_bar, accelerator=accelerator, devices=devices, strategy=strategy,
                               precision=precision)
    if written is None:
        return None
    result = {**written, "input": str(input_path), "format": output_format, "skipped_on_read": dict(stats)}
    (Path(output_dir) / "embed_stats.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(args: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(prog="python -m lit_docemb embed", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", action="append", required=True,
                        help="the run's config (its model section is used); repeat to merge, later files win")
    parser.add_argument("--ckpt_path", required=True, help="a checkpoint of that method")
    parser.add_argument("--input", required=True, help="documents: .jsonl (lit_docemb records) or .tsv")
    parser.add_argument("--output", required=True, help="output folder")
    parser.add_argument("--format", choices=["parquet", "npy"], default="parquet")
    parser.add_argument("--batch_size", type=int, default=64, help="documents per batch and device")
    parser.add_argument("--num_workers", type=int, default=0, help="dataloader workers per device")
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--devices", default="auto", help="'auto', a count, or a list such as '0,1'")
    parser.add_argument("--strategy", default="auto", help="e.g. ddp for several devices")
    parser.add_argument("--precision", default=None, help="e.g. bf16-mixed (default: fp32)")
    parser.add_argument("--no_progress_bar", action="store_true")
    options = parser.parse_args(args)
    require(options.batch_size >= 1, "--batch_size", ">= 1 (documents per batch and device)", options.batch_size)
    require(options.num_workers >= 0, "--num_workers", ">= 0 (0 reads in the main process)", options.num_workers)
    devices = int(options.devices) if options.devices.isdigit() else options.devices
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = embed(options.config, options.ckpt_path, options.input, options.output, options.format,
                   options.batch_size, options.num_workers, options.accelerator, devices, options.strategy,
                   options.precision, not options.no_progress_bar)
    if result is not None:
        skipped = {**result["skipped_on_read"], "skipped_by_method": result["skipped_by_method"]}
        print(f"embed: wrote {result['embedded']} documents {result['dimensions']} to {options.output} "
              f"({options.format}); skipped {skipped}")
    return result
