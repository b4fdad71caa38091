"""``python -m lit_docemb matching``: document matching on labelled pairs with a checkpoint."""

from __future__ import annotations

import json
from typing import Literal

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.commands.loading import torch_device
from lit_docemb.eval.matching import evaluate_pairs
from lit_docemb.methods.checkpoints import load_method_checkpoint


def matching(config: list[str], ckpt_path: str | None = None, classifier: Literal["logistic", "mlp"] = "logistic",
             criterion: Literal["f1", "accuracy"] = "f1", batch_size: int = 32, accelerator: str = "auto",
             overrides: list[str] | None = None) -> dict[str, float]:
    """Document matching (threshold and pair classifier) of a method on labelled pairs; prints the metrics.

    Args:
        config: The run's config (method and a pairs DataModule); repeat to merge, later files win.
        ckpt_path: A checkpoint of the config's method (default: the method as its config builds it).
        classifier: The pair classifier trained on the pair embeddings.
        criterion: What the threshold is chosen to maximise.
        batch_size: Documents embedded per forward pass.
        accelerator: ``auto``, ``cpu``, ``cuda`` (or ``gpu``), or a torch device such as ``cuda:1``.
        overrides: Config overrides (``--data.init_args.root DIR``).
    """
    configs = [arg for path in config for arg in ("--config", path)]
    cli = DocEmbCLI(args=[*configs, *(overrides or [])], run=False)
    method, data = cli.model, cli.datamodule
    if ckpt_path:
        load_method_checkpoint(method, ckpt_path, "--ckpt_path")
    method.to(torch_device(accelerator)).eval()
    data.setup("fit")
    metrics = evaluate_pairs(method, data, batch_size, classifier, criterion)
    print(json.dumps(metrics, indent=2))
    return metrics


def main(argv: list[str] | None = None) -> dict[str, float]:
    return run_command(matching, argv, "python -m lit_docemb matching")
