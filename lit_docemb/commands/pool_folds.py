"""``python -m lit_docemb pool-folds --runs <fold runs> --qrels <qrels> [--measures ...] [--output DIR]``: one table
from the TREC runs of a cross-validation's folds (Graph-RoBERTa's Table 3, Robust04's five folds).

Each fold's run ranks that fold's test queries only (``evaluate`` writes ``<run folder>/evaluation/test.dense.run``,
``test.bm25.run``, ``test.hybrid.run``); the folds' query sets are disjoint, so together the runs rank every query
once. The pooled run is scored as one run, with ``trec_eval -c``'s semantics: the mean over every query of the qrels
that has a relevant document, a query no run ranks scoring 0 (:func:`~lit_docemb.eval.ranking.retrieval_metrics`).
That is the table of a five-fold cross-validation; the mean of the per-fold means, which differs when folds hold
different numbers of queries, is printed beside it (``fold_mean``). Written to ``--output``: ``pooled.run`` (the
concatenated run), ``pooled.md`` and ``pooled.json``.

Example::

    python -m lit_docemb pool-folds --qrels data/robust04/qrels.robust04.txt --measures ndcg@20 P@20 \\
        --runs runs/graph_roberta_retrieval_robust04/fold*/evaluation/test.dense.run \\
        --output runs/graph_roberta_retrieval_robust04/pooled
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from lit_docemb.data.trec import Qrels, Run, read_qrels, read_run, write_run
from lit_docemb.errors import ConfigError
from lit_docemb.eval.evaluation import markdown_table
from lit_docemb.eval.ranking import retrieval_metrics, trec_measure

#: Graph-RoBERTa's Table 3 measures.
DEFAULT_MEASURES = ("ndcg@20", "P@20")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lit_docemb pool-folds", allow_abbrev=False,
        description="Pool the TREC runs of a cross-validation's folds (each ranking its fold's test queries) into "
                    "one run and score it: the table of the whole cross-validation.")
    parser.add_argument("--runs", nargs="+", required=True, help="one TREC run file per fold (.gz accepted)")
    parser.add_argument("--qrels", required=True, help="the qrels of every fold's queries (TREC format)")
    parser.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES),
                        help="mrr@k, ndcg@k, P@k, recall@k, map@k, map, ndcg, bpref (default: ndcg@20 P@20)")
    parser.add_argument("--output", help="folder for pooled.run, pooled.md and pooled.json (default: print only)")
    return parser


def pool_runs(runs: list[Run], names: list[str]) -> Run:
    """The runs' queries together; a query ranked by two runs (folds that are not disjoint) is a ConfigError."""
    pooled: Run = {}
    owner: dict[str, str] = {}
    for run, name in zip(runs, names, strict=True):
        for qid, scores in run.items():
            if qid in owner:
                raise ConfigError(f"--runs: query {qid} is ranked by both {owner[qid]} and {name}; each fold's run "
                                  f"must rank only its test queries (evaluate's test.*.run)")
            owner[qid] = name
            pooled[qid] = scores
    return pooled


def pooled_metrics(runs: list[Run], names: list[str], qrels: Qrels,
                   measures: list[str]) -> tuple[Run, dict[str, dict[str, float]]]:
    """(pooled run, {"pooled": metrics over all judged queries, "fold_mean": mean of the per-fold means,
    "fold<i>": each fold's metrics over its own queries})."""
    pooled = pool_runs(runs, names)
    results = {"pooled": retrieval_metrics(pooled, qrels, measures)}
    per_fold = {}
    for index, run in enumerate(runs, 1):
        fold_qrels = {qid: rels for qid, rels in qrels.items() if qid in run}
        if not any(r > 0 for rels in fold_qrels.values() for r in rels.values()):
            raise ConfigError(f"--runs: {names[index - 1]} ranks no query of --qrels with a relevant document")
        per_fold[f"fold{index}"] = retrieval_metrics(run, fold_qrels, measures)
    results["fold_mean"] = {m: sum(f[m] for f in per_fold.values()) / len(per_fold) for m in measures}
    results["fold_mean"]["queries"] = float(sum(f["queries"] for f in per_fold.values()))
    return pooled, {**results, **per_fold}


def main(args: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Parses the command line (see the module docstring), pools, scores, writes and prints; returns the results."""
    options = build_parser().parse_args(args)
    for measure in options.measures:
        try:
            trec_measure(measure)
        except ValueError as err:
            raise ConfigError(f"--measures: {err}") from None
    for path in [*options.runs, options.qrels]:
        if not Path(path).is_file():
            raise ConfigError(f"{'--qrels' if path == options.qrels else '--runs'}: {path!r} is not a file")
    if len(set(options.runs)) != len(options.runs):
        raise ConfigError(f"--runs: a file is given twice: {sorted(p for p, n in Counter(options.runs).items() if n > 1)}")
    qrels = read_qrels(options.qrels)
    runs = [read_run(path) for path in options.runs]
    pooled, results = pooled_metrics(runs, options.runs, qrels, options.measures)
    table = markdown_table({"folds pooled": {f"{row}/{measure}": value for row, metrics in results.items()
                                             for measure, value in metrics.items()}})
    if options.output:
        output = Path(options.output)
        output.mkdir(parents=True, exist_ok=True)
        write_run(pooled, output / "pooled.run", run_name="pooled")
        header = f"# {len(runs)} folds pooled\n\nRuns: {', '.join(options.runs)}\n\nQrels: {options.qrels}\n\n"
        (output / "pooled.md").write_text(header + table, encoding="utf-8")
        record = {"runs": options.runs, "qrels": options.qrels, "results": results}
        (output / "pooled.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        table += f"\nwritten to {output}/pooled.run, pooled.md and pooled.json"
    print(table)
    return results
