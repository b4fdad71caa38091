"""``python -m lit_docemb matching``: document matching on labelled pairs with a checkpoint."""

from __future__ import annotations

import argparse
import json

import torch

from lit_docemb.eval.matching import evaluate_pairs


def main(args: list[str] | None = None) -> dict[str, float]:
    from lit_docemb.commands.cli import DocEmbCLI
    from lit_docemb.methods.checkpoints import load_method_checkpoint

    parser = argparse.ArgumentParser(description="Document matching (threshold and pair classifier) of a method.")
    parser.add_argument("--config", required=True, help="the run's config (method and a pairs DataModule)")
    parser.add_argument("--ckpt", help="a checkpoint of the config's method (default: its initial weights)")
    parser.add_argument("--classifier", choices=["logistic", "mlp"], default="logistic")
    parser.add_argument("--criterion", choices=["f1", "accuracy"], default="f1")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    options, overrides = parser.parse_known_args(args)  # the rest: config overrides
    cli = DocEmbCLI(args=["--config", options.config, *overrides], run=False)
    method, data = cli.model, cli.datamodule
    if options.ckpt:
        load_method_checkpoint(method, options.ckpt, "--ckpt")
    method.to(options.device).eval()
    data.setup("fit")
    metrics = evaluate_pairs(method, data, options.batch_size, options.classifier, options.criterion)
    print(json.dumps(metrics, indent=2))
    return metrics
