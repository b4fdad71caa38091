"""``python -m lit_docemb dense-search``: rank a split exactly with a checkpoint and write a TREC run."""

from __future__ import annotations

import argparse
import logging

import torch

from lit_docemb.data.trec import write_run
from lit_docemb.eval.search import rank
from lit_docemb.methods.checkpoints import load_method_checkpoint

log = logging.getLogger(__name__)


def main(args: list[str] | None = None) -> None:
    from lit_docemb.commands.cli import DocEmbCLI

    parser = argparse.ArgumentParser(description="Rank a ranking corpus's queries with a trained method.")
    parser.add_argument("--config", required=True, help="the run's config (method and ranking DataModule)")
    parser.add_argument("--ckpt", required=True, help="a checkpoint of the config's method")
    parser.add_argument("--split", choices=["train", "val", "test"], default="test")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--output", required=True, help="TREC run file to write (.gz compresses)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    options, overrides = parser.parse_known_args(args)  # the rest: config overrides, e.g. --data.init_args.root
    cli = DocEmbCLI(args=["--config", options.config, *overrides, "--data.init_args.mode", "retrieval"], run=False)
    method, data = cli.model, cli.datamodule
    load_method_checkpoint(method, options.ckpt)
    method.to(options.device).eval()
    data.setup("fit")
    split = data.query_split(options.split)
    if split is None:
        raise SystemExit(f"{type(data).__name__} has no {options.split} split")
    run = rank(method, data.corpus, {q: query.text for q, query in split.queries.items()}, options.depth,
               options.batch_size)
    write_run(run, options.output, run_name=type(method).__name__)
    log.info("wrote %d queries x %d documents to %s", len(run), options.depth, options.output)
