"""``python -m lit_docemb candidates``: rank CTPE-style candidate sets with a checkpoint."""

from __future__ import annotations

import importlib
import json

from lit_docemb.commands.arguments import run_command
from lit_docemb.eval.candidates import evaluate_candidates, read_candidate_task


def evaluate_checkpoint(checkpoint: str, root: str, method: str = "lit_docemb.methods.CTPE", k: int = 20,
                        batch_size: int = 256) -> dict[str, float]:
    """Loads a checkpoint of ``method`` (a class path) and ranks the task folder ``root`` with it."""
    module_name, _, class_name = method.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    model = cls.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)  # no pickled code
    return evaluate_candidates(model, read_candidate_task(root), k, batch_size)


def candidates(ckpt_path: str, input: str, method: str = "lit_docemb.methods.CTPE", k: int = 20,
               batch_size: int = 256) -> dict[str, float]:
    """Rank a candidate/test task folder (CTPE's tasks) with a checkpoint; prints the metrics as JSON.

    Args:
        ckpt_path: A checkpoint of ``method``.
        input: The task folder: ``candidates/`` and ``test/`` sets (layout: lit_docemb.eval.candidates.LAYOUT).
        method: Class path of the checkpoint's method.
        k: Candidates ranked per test document (metrics at k).
        batch_size: Documents embedded per forward pass.
    """
    results = evaluate_checkpoint(ckpt_path, input, method, k, batch_size)
    print(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Runs :func:`candidates`."""
    return run_command(candidates, argv, "python -m lit_docemb candidates")
