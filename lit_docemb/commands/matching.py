"""``python -m lit_docemb matching --run_dir runs/x``: document matching on labelled pairs with a checkpoint."""

from __future__ import annotations

import json
from typing import Literal

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.loading import load_run_cli, restore_run, run_of, torch_device
from lit_docemb.eval.matching import evaluate_pairs


def matching(config: list[str] | None = None, ckpt_path: str | None = None,
             classifier: Literal["logistic", "mlp"] = "logistic", criterion: Literal["f1", "accuracy"] = "f1",
             batch_size: int = 32, accelerator: str = "auto", run_dir: str | None = None,
             overrides: list[str] | None = None) -> dict[str, float]:
    """Document matching (threshold and pair classifier) of a method on labelled pairs; prints the metrics.

    Args:
        config: The run's config (method and a pairs DataModule); repeat to merge, later files win.
        ckpt_path: A checkpoint of the config's method (default: the run's checkpoints/last.ckpt with --run_dir,
            else the method as its config builds it).
        classifier: The pair classifier trained on the pair embeddings.
        criterion: What the threshold is chosen to maximise.
        batch_size: Documents embedded per forward pass.
        accelerator: ``auto``, ``cpu``, ``cuda`` (or ``gpu``), or a torch device such as ``cuda:1``.
        run_dir: The run folder (``runs/x``): its config.yaml and checkpoints/last.ckpt, in place of --config and
            --ckpt_path.
        overrides: Config overrides (``--data.init_args.root DIR``).
    """
    run = run_of(run_dir, config, ckpt_path)
    cli = load_run_cli(run, overrides or ())
    method, data = cli.model, cli.datamodule
    restore_run(method, run)
    method.to(torch_device(accelerator)).eval()
    data.setup("fit")
    metrics = evaluate_pairs(method, data, batch_size, classifier, criterion)
    print(json.dumps(metrics, indent=2))
    return metrics


def main(argv: list[str] | None = None) -> dict[str, float]:
    return run_command(matching, argv, "python -m lit_docemb matching")
