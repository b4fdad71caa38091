"""``python -m lit_docemb evaluate --config <run config> --ckpt_path <checkpoint> [--evaluation ...]``: the
evaluations of :mod:`lit_docemb.eval.evaluation` on a trained checkpoint, printed and written as
``evaluation.md`` (Markdown tables) and ``evaluation.json`` (every metric), with their TREC run files.

Which evaluations: those the config already runs during ``fit`` (its ``trainer.callbacks`` that are
:class:`~lit_docemb.eval.evaluation.Evaluation`\\ s), plus every ``--evaluation``, given by name (``clustering``,
``linear_probe``, ``few_shot``, ``retrieval``, ``labelled``, ``candidate_ranking``, ``matching``) or as a YAML/JSON mapping
``{class_path: ..., init_args: {...}}``. With neither, the DataModule decides: a ranking corpus gets retrieval
on its test queries (else its validation queries), labelled pairs matching, a labelled corpus clustering and the
linear probe, an unlabelled one held-out retrieval on its validation documents; with none of these, one line says
what the corpus lacks. Output folder: ``--output``, else
``<trainer.default_root_dir>/evaluation``. Other arguments are config overrides, as for ``fit``
(``--data.init_args.root ...``).

Examples::

    python -m lit_docemb evaluate --config runs/x/config.yaml --ckpt_path runs/x/checkpoints/last.ckpt
    python -m lit_docemb evaluate --config configs/graph_roberta/retrieval_robust04.yaml --ckpt_path K \\
        --evaluation '{class_path: retrieval, init_args: {split: test, bm25: true, hybrid: dev}}'
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
from pathlib import Path

import lightning as L
import torch
import yaml

from lit_docemb.commands.trust import check_class_path, load_yaml
from lit_docemb.data.retrieval import RetrievalDataModule
from lit_docemb.errors import ConfigError, require
from lit_docemb.eval.candidates import CandidateRanking
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext, markdown_table
from lit_docemb.eval.heldout import HeldOutRetrieval
from lit_docemb.eval.labelled import (
    Clustering,
    FewShot,
    LabelledEmbeddingEvaluation,
    LinearProbe,
)
from lit_docemb.eval.matching import DocumentMatching, ValidationMatching
from lit_docemb.eval.retrieval import RetrievalEvaluation
from lit_docemb.methods.checkpoints import load_method_checkpoint, read_checkpoint

log = logging.getLogger(__name__)

EVALUATIONS: dict[str, type[Evaluation]] = {cls.name: cls for cls in (
    Clustering, LinearProbe, FewShot, RetrievalEvaluation, LabelledEmbeddingEvaluation, CandidateRanking,
    DocumentMatching, ValidationMatching, HeldOutRetrieval)}
"""Evaluations by short name; a new one (e.g. document matching) registers here."""

SUBCOMMAND_KEYS = {"ckpt_path", "weights_only"}


def build_evaluation(spec: str) -> Evaluation:
    """An evaluation from a short name, or a YAML/JSON mapping ``{class_path, init_args}`` (class_path: a short
    name or an import path of an :class:`Evaluation` subclass)."""
    parsed = yaml.safe_load(spec) if spec.strip().startswith("{") else {"class_path": spec}
    if not isinstance(parsed, dict) or "class_path" not in parsed:
        raise ValueError(f"--evaluation: a name ({', '.join(EVALUATIONS)}) or {{class_path, init_args}}, got {spec!r}")
    path, init_args = parsed["class_path"], parsed.get("init_args") or {}
    if path in EVALUATIONS:
        cls = EVALUATIONS[path]
    elif "." in path:
        check_class_path("--evaluation", path)  # only allow-listed modules are imported
        module, _, name = path.rpartition(".")
        cls = getattr(importlib.import_module(module), name, None)
    else:
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, Evaluation)):
        raise TypeError(f"--evaluation: {path!r} is not an evaluation; known names: {', '.join(EVALUATIONS)}")
    return cls(**init_args)


def load_checkpoint(method: L.LightningModule, path: str) -> None:
    """The method's weights from a Lightning checkpoint (:func:`~lit_docemb.methods.checkpoints.load_method_checkpoint`),
    after the method's own ``on_load_checkpoint`` has read what it keeps beside them (DECA's and CTPE's
    vocabularies, which size their embedding tables)."""
    if type(method).on_load_checkpoint is not L.LightningModule.on_load_checkpoint:
        method.on_load_checkpoint(read_checkpoint(path))
    load_method_checkpoint(method, path)


def default_evaluations(data) -> list[Evaluation]:
    """Retrieval on the test queries for a ranking DataModule (its validation queries when it has no test split,
    as MSMARCO without the TREC DL topics); matching for one of labelled pairs; clustering and the linear probe for
    a labelled one; held-out retrieval on the validation split for an unlabelled corpus. With nothing suitable, a
    :class:`~lit_docemb.errors.ConfigError` saying what the corpus lacks and what would work."""
    name = type(data).__name__
    if isinstance(data, RetrievalDataModule):
        if data.test_split:
            return [RetrievalEvaluation(split="test")]
        if data.val_split or data.val_queries_from_train:  # the splits query_split("val") reads, not read here
            log.info("%s has no test queries: ranking its validation queries", name)
            return [RetrievalEvaluation(split="val")]
        raise ConfigError(f"evaluate: {name} has neither test nor validation queries to rank: give it test queries "
                          "(its test_* files) or a validation split (val_split, val_queries_from_train)")
    if getattr(data, "mode", None) == "pairs":  # labelled document pairs (AAN's LRA matching task)
        return [DocumentMatching()]
    if getattr(data, "test_set", None) is not None or hasattr(data, "labels"):
        evaluate_on = "test" if getattr(data, "test_set", None) is not None else "val"
        return [Clustering(evaluate_on=evaluate_on), LinearProbe(evaluate_on=evaluate_on)]
    if getattr(data, "val_set", None):
        return [HeldOutRetrieval()]
    raise ConfigError(f"evaluate: {name} has no labels, no queries and no held-out documents to evaluate on: set "
                      "data.init_args.val_fraction > 0 for held-out retrieval (heldout), or pass --evaluation NAME "
                      f"(one of {', '.join(sorted(EVALUATIONS))})")


def _without_subcommand_keys(path: str) -> str:
    """The config at ``path``, as YAML text without the keys only a subcommand takes (a run's saved config.yaml
    holds ``ckpt_path`` and ``weights_only``); the path itself when it has none."""
    config = load_yaml(path) or {}  # safe YAML, class paths checked (as DocEmbCLI checks them again)
    if not isinstance(config, dict) or not SUBCOMMAND_KEYS & config.keys():
        return path
    return yaml.safe_dump({k: v for k, v in config.items() if k not in SUBCOMMAND_KEYS}, sort_keys=False)


def run_evaluations(evaluations: list[Evaluation], context: EvaluationContext) -> dict[str, dict[str, float]]:
    """{name: metrics} of each evaluation on one context (embeddings shared); names repeated get a suffix."""
    results: dict[str, dict[str, float]] = {}
    for evaluation in evaluations:
        name, n = evaluation.name, 2
        while name in results:
            name, n = f"{evaluation.name}_{n}", n + 1
        log.info("running %s", name)
        results[name] = {k: float(v) for k, v in evaluation.evaluate(context).items()}  # numpy scalars: JSON-ready
    return results


def main(args: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Parses the command line (see the module docstring), evaluates, writes and prints; returns the results."""
    from lit_docemb.commands.cli import DocEmbCLI

    parser = argparse.ArgumentParser(
        prog="python -m lit_docemb evaluate",
        description="Evaluate a checkpoint: the evaluations under the config's trainer.callbacks plus every "
                    "--evaluation; writes evaluation.md, evaluation.json and TREC run files.",
        epilog="Other arguments are config overrides, as for fit (e.g. --data.init_args.root DIR).")
    parser.add_argument("--config", action="append", required=True, help="the run's config (repeatable)")
    parser.add_argument("--ckpt_path", required=True, help="a checkpoint of the config's method")
    parser.add_argument("--evaluation", action="append", default=[],
                        help=f"a name ({', '.join(EVALUATIONS)}) or {{class_path, init_args}} (repeatable)")
    parser.add_argument("--output", help="folder for evaluation.md/.json and run files")
    parser.add_argument("--batch_size", type=int, default=64, help="documents embedded per forward pass")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    options, overrides = parser.parse_known_args(args)
    require(options.batch_size >= 1, "--batch_size", ">= 1 (documents per forward pass)", options.batch_size)
    read_checkpoint(options.ckpt_path, mmap=True)  # a missing or unreadable checkpoint stops before any loading
    evaluations = [build_evaluation(spec) for spec in options.evaluation]  # bad specs fail before any loading
    configs = [arg for path in options.config for arg in ("--config", _without_subcommand_keys(path))]
    cli = DocEmbCLI(args=[*configs, *overrides], run=False)
    method, data = cli.model, cli.datamodule
    evaluations = [c for c in cli.trainer.callbacks if isinstance(c, Evaluation)] + evaluations
    load_checkpoint(method, options.ckpt_path)
    method.to(options.device).eval()
    if not isinstance(data, RetrievalDataModule):  # retrieval reads its corpus and query splits itself
        data.setup("fit")
    evaluations = evaluations or default_evaluations(data)
    output = Path(options.output or Path(cli.trainer.default_root_dir) / "evaluation")
    context = EvaluationContext(method, data, output, options.batch_size)
    results = run_evaluations(evaluations, context)
    if isinstance(data, RetrievalDataModule) and not data.data_stats and data.corpus is not None:
        data.report_reading("corpus", len(data.corpus), {}, data.stats)  # read by the evaluations, not by setup
    table = markdown_table(results)
    if context.writes():
        output.mkdir(parents=True, exist_ok=True)
        header = f"# Evaluation of `{options.ckpt_path}`\n\nConfig: {', '.join(options.config)}\n\n"
        (output / "evaluation.md").write_text(header + table, encoding="utf-8")
        record = {"checkpoint": options.ckpt_path, "config": options.config, "results": results,
                  "data_stats": {"corpus": type(data).__name__, **getattr(data, "data_stats", {})}}
        (output / "evaluation.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(table + f"\nwritten to {output}/evaluation.md and evaluation.json")
    return results
