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

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from lit_docemb.commands.arguments import run_command
from lit_docemb.data.retrieval.trec import Qrels, Run, read_qrels, read_run, write_run
from lit_docemb.errors import ConfigError
from lit_docemb.eval.evaluation import markdown_table
from lit_docemb.eval.ranking import retrieval_metrics, trec_measure

#: Graph-RoBERTa's Table 3 measures.
DEFAULT_MEASURES = ("ndcg@20", "P@20")


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


def pool_folds(runs: list[str], qrels: str, measures: Sequence[str] = DEFAULT_MEASURES,
               output: str | None = None) -> dict[str, dict[str, float]]:
    """Pool the TREC runs of a cross-validation's folds (each ranking its fold's test queries) into one run and
    score it: the table of the whole cross-validation. Prints the table; returns the results.

    Args:
        runs: One TREC run file per fold (.gz accepted).
        qrels: The qrels of every fold's queries (TREC format).
        measures: mrr@k, ndcg@k, P@k, recall@k, map@k, map, ndcg, bpref (Graph-RoBERTa's Table 3: ndcg@20 P@20).
        output: Folder for pooled.run, pooled.md and pooled.json (default: print only).
    """
    for measure in measures:
        try:
            trec_measure(measure)
        except ValueError as err:
            raise ConfigError(f"--measures: {err}") from None
    for path in [*runs, qrels]:
        if not Path(path).is_file():
            raise ConfigError(f"{'--qrels' if path == qrels else '--runs'}: {path!r} is not a file")
    if len(set(runs)) != len(runs):
        raise ConfigError(f"--runs: a file is given twice: {sorted(p for p, n in Counter(runs).items() if n > 1)}")
    pooled, results = pooled_metrics([read_run(path) for path in runs], runs, read_qrels(qrels), list(measures))
    table = markdown_table({"folds pooled": {f"{row}/{measure}": value for row, metrics in results.items()
                                             for measure, value in metrics.items()}})
    if output:
        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        write_run(pooled, folder / "pooled.run", run_name="pooled")
        header = f"# {len(runs)} folds pooled\n\nRuns: {', '.join(runs)}\n\nQrels: {qrels}\n\n"
        (folder / "pooled.md").write_text(header + table, encoding="utf-8")
        record = {"runs": runs, "qrels": qrels, "results": results}
        (folder / "pooled.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        table += f"\nwritten to {folder}/pooled.run, pooled.md and pooled.json"
    print(table)
    return results


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Runs :func:`pool_folds` on the command line (see the module docstring)."""
    return run_command(pool_folds, argv, "python -m lit_docemb pool-folds")
