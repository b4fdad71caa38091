"""``python -m lit_docemb candidates``: rank CTPE-style candidate sets with a checkpoint."""

from __future__ import annotations

import argparse
import importlib
import json

from lit_docemb.eval.candidates import LAYOUT, evaluate_candidates, read_candidate_task


def evaluate_checkpoint(checkpoint: str, root: str, method: str = "lit_docemb.methods.CTPE", k: int = 20,
                        batch_size: int = 256) -> dict[str, float]:
    """Loads a checkpoint of ``method`` (a class path) and ranks the task folder ``root`` with it."""
    module_name, _, class_name = method.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    model = cls.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)  # no pickled code
    return evaluate_candidates(model, read_candidate_task(root), k, batch_size)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description="Rank a candidate/test task folder with a checkpoint.")
    parser.add_argument("checkpoint")
    parser.add_argument("root", help=LAYOUT)
    parser.add_argument("--method", default="lit_docemb.methods.CTPE")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args(argv)
    results = evaluate_checkpoint(args.checkpoint, args.root, args.method, args.k, args.batch_size)
    print(json.dumps(results, indent=1))
    return results
