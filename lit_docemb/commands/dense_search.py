"""``python -m lit_docemb dense-search --run_dir runs/x``: rank a split exactly with a checkpoint and write a TREC
run (``<run_dir>/dense-search/<split>.run`` unless ``--output`` names another file)."""

from __future__ import annotations

import logging
from typing import Literal

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.loading import default_output, load_run_cli, restore_run, run_of, torch_device
from lit_docemb.data.retrieval.trec import write_run
from lit_docemb.eval.search import rank

log = logging.getLogger(__name__)


def dense_search(config: list[str] | None = None, ckpt_path: str | None = None, output: str | None = None,
                 split: Literal["train", "val", "test"] = "test", depth: int = 100, batch_size: int = 64,
                 accelerator: str = "auto", run_dir: str | None = None, overrides: list[str] | None = None) -> None:
    """Rank a ranking corpus's queries with a trained method (exact search) and write a TREC run.

    Args:
        config: The run's config (method and ranking DataModule); repeat to merge, later files win.
        ckpt_path: A checkpoint of the config's method (default with --run_dir: its checkpoints/last.ckpt).
        output: TREC run file to write (.gz compresses; default: ``<run_dir>/dense-search/<split>.run``).
        split: The query split ranked.
        depth: Documents kept per query.
        batch_size: Documents embedded per forward pass.
        accelerator: ``auto``, ``cpu``, ``cuda`` (or ``gpu``), or a torch device such as ``cuda:1``.
        run_dir: The run folder (``runs/x``): its config.yaml and checkpoints/last.ckpt, in place of --config and
            --ckpt_path.
        overrides: Config overrides (``--data.init_args.root DIR``).
    """
    run = run_of(run_dir, config, ckpt_path, needs_checkpoint=True)
    output = output or default_output(run, f"dense-search/{split}.run", "dense-search")
    cli = load_run_cli(run, [*(overrides or []), "--data.init_args.mode", "retrieval"])
    method, data = cli.model, cli.datamodule
    restore_run(method, run)
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
