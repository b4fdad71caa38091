"""``python -m lit_docemb dense-search``: rank a split exactly with a checkpoint and write a TREC run."""

from __future__ import annotations

import logging
from typing import Literal

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.commands.loading import torch_device
from lit_docemb.data.retrieval.trec import write_run
from lit_docemb.eval.search import rank
from lit_docemb.methods.checkpoints import load_method_checkpoint

log = logging.getLogger(__name__)


def dense_search(config: list[str], ckpt_path: str, output: str, split: Literal["train", "val", "test"] = "test",
                 depth: int = 100, batch_size: int = 64, accelerator: str = "auto",
                 overrides: list[str] | None = None) -> None:
    """Rank a ranking corpus's queries with a trained method (exact search) and write a TREC run.

    Args:
        config: The run's config (method and ranking DataModule); repeat to merge, later files win.
        ckpt_path: A checkpoint of the config's method.
        output: TREC run file to write (.gz compresses).
        split: The query split ranked.
        depth: Documents kept per query.
        batch_size: Documents embedded per forward pass.
        accelerator: ``auto``, ``cpu``, ``cuda`` (or ``gpu``), or a torch device such as ``cuda:1``.
        overrides: Config overrides (``--data.init_args.root DIR``).
    """
    configs = [arg for path in config for arg in ("--config", path)]
    cli = DocEmbCLI(args=[*configs, *(overrides or []), "--data.init_args.mode", "retrieval"], run=False)
    method, data = cli.model, cli.datamodule
    load_method_checkpoint(method, ckpt_path)
    method.to(torch_device(accelerator)).eval()
    data.setup("fit")
    queries = data.query_split(split)
    if queries is None:
        raise SystemExit(f"{type(data).__name__} has no {split} split")
    run = rank(method, data.corpus, {q: query.text for q, query in queries.queries.items()}, depth, batch_size)
    write_run(run, output, run_name=type(method).__name__)
    log.info("wrote %d queries x %d documents to %s", len(run), depth, output)


def main(argv: list[str] | None = None) -> None:
    return run_command(dense_search, argv, "python -m lit_docemb dense-search")
