"""``python -m lit_docemb candidates``: rank CTPE-style candidate sets with a checkpoint."""

from __future__ import annotations

import json

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.loading import Run, build_method, checked_checkpoint, load_method, restore_run, run_of
from lit_docemb.errors import ConfigError
from lit_docemb.eval.candidates import evaluate_candidates, read_candidate_task
from lit_docemb.methods.checkpoints import read_checkpoint


def method_of_checkpoint(checkpoint: str, method: str = "lit_docemb.methods.CTPE"):
    """The method ``method`` (a class path) as a checkpoint's stored hyper-parameters build it, restored from that
    checkpoint (:func:`~lit_docemb.commands.loading.restore_run`); for a checkpoint without its run folder."""
    stored = read_checkpoint(checkpoint, mmap=True).get("hyper_parameters") or {}
    init_args = {key: value for key, value in stored.items() if not key.startswith("_")}
    built = build_method([], (), "candidates", model={"class_path": method, "init_args": init_args})
    return restore_run(built, Run([], checked_checkpoint(checkpoint))).eval()


def evaluate_checkpoint(checkpoint: str, root: str, method: str = "lit_docemb.methods.CTPE", k: int = 20,
                        batch_size: int = 256) -> dict[str, float]:
    """Loads a checkpoint of ``method`` (a class path) and ranks the task folder ``root`` with it."""
    return evaluate_candidates(method_of_checkpoint(checkpoint, method), read_candidate_task(root), k, batch_size)


def candidates(input: str, ckpt_path: str | None = None, method: str = "lit_docemb.methods.CTPE", k: int = 20,
               batch_size: int = 256, run_dir: str | None = None, config: list[str] | None = None) -> dict[str, float]:
    """Rank a candidate/test task folder (CTPE's tasks) with a checkpoint; prints the metrics as JSON.

    Args:
        input: The task folder: ``candidates/`` and ``test/`` sets (layout: lit_docemb.eval.candidates.LAYOUT).
        ckpt_path: A checkpoint of ``method`` (default with --run_dir: its checkpoints/last.ckpt).
        method: Class path of the checkpoint's method, built from the checkpoint's stored hyper-parameters (without
            --run_dir or --config).
        k: Candidates ranked per test document (metrics at k).
        batch_size: Documents embedded per forward pass.
        run_dir: The run folder (``runs/x``): its config.yaml builds the method, its checkpoints/last.ckpt restores it.
        config: The run's config, in place of --run_dir (with --ckpt_path); repeat to merge, later files win.
    """
    if run_dir is None and not config:
        if ckpt_path is None:
            raise ConfigError("candidates: give --run_dir runs/<run>, or --ckpt_path <a checkpoint of --method>")
        model = method_of_checkpoint(ckpt_path, method)
    else:
        model = load_method(run_of(run_dir, config, ckpt_path, needs_checkpoint=True), (), None, "candidates")
    results = evaluate_candidates(model, read_candidate_task(input), k, batch_size)
    print(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Runs :func:`candidates`."""
    return run_command(candidates, argv, "python -m lit_docemb candidates")
