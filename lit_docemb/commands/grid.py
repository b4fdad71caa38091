"""``python -m lit_docemb grid --input GRID.yaml [--output ROOT] [--rows R ...] [--columns C ...] [-- FIT ARGS]``:
a paper table's cells as ``fit`` runs, one after the other, then the table of its metrics.

A grid file is data (read with the safe loader, every ``fit`` it starts checked like any config)::

  metric: probe/error_rate            # a metric the trainer or an evaluation callback logged, or a list of them
  rows:                               # row name -> fit arguments every cell of the row adds
    DECA: ["--config", "configs/deca/r8_dc_sc.yaml"]
    -Contrastive: ["--config", "configs/deca/r8_dc_append_wordnet.yaml"]
  columns:                            # column name -> fit arguments of the column's cells
    WordNet: ["--model.init_args.augmentation=lit_docemb.augment.specs.WordNet"]
  skip: [[-Contrastive, WordNet]]     # cells the paper leaves empty (optional)
  test: true                          # after each fit, the test loop on the fitted model (optional)
  repeats:                            # repeat name -> fit arguments: each cell runs once per repeat (optional)
    seed 0: ["--data.init_args.few_shot_seed=0"]

Cell (row, column) runs ``fit <row args> <column args> [<repeat args>] <extra args>
--trainer.default_root_dir=<root>/<row>/<column>[/<repeat>]`` (``--output``, default ``runs/grid``). With ``test:
true`` the test loop then runs on the model as the fit left it (its last weights: no checkpoint is reloaded), and
the metrics are read from what it logged (DocSplit Table 2: ``test/accuracy``). The table is printed as ``grid
{json}`` and written to ``<root>/grid.json``: with one ``metric`` and no ``repeats``, row -> column -> its value
(``null``: skipped); otherwise row -> column -> metric -> ``{"mean", "sd", "values"}`` over the repeats (``sd``:
the sample standard deviation, n - 1; ``null`` with one repeat), also printed as one markdown table of
``mean ± sd`` per metric.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

from lit_docemb.commands.arguments import parse_command
from lit_docemb.commands.cli import run as run_cli
from lit_docemb.commands.trust import load_yaml
from lit_docemb.errors import ConfigError

KEYS = ("metric", "rows", "columns", "skip", "test", "repeats")


def _is_arguments(cells) -> bool:
    return isinstance(cells, dict) and bool(cells) and all(
        isinstance(args, list) and all(isinstance(a, str) for a in args) for args in cells.values())


def read_grid(path: str | Path) -> dict:
    """The grid file, checked: ``metric`` a string or a list of strings, ``rows``, ``columns`` and ``repeats`` maps
    of name -> list of strings, ``skip`` pairs of a row and a column name, ``test`` true or false."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"grid: no file at {str(path)!r} (a YAML file with metric, rows and columns)")
    grid = load_yaml(path) or {}
    metric = grid.get("metric") if isinstance(grid, dict) else None
    if not (isinstance(metric, str) or (isinstance(metric, list) and metric
                                        and all(isinstance(m, str) for m in metric))):
        raise ConfigError(f"{path}: metric: give the metric to tabulate, e.g. probe/error_rate, or a list of them")
    for part in ("rows", "columns") + (("repeats",) if "repeats" in grid else ()):
        if not _is_arguments(grid.get(part)):
            raise ConfigError(f"{path}: {part}: a map of name -> list of fit arguments (strings)")
    skip = grid.get("skip") or []
    for pair in skip:
        if (not isinstance(pair, list) or len(pair) != 2 or pair[0] not in grid["rows"]
                or pair[1] not in grid["columns"]):
            raise ConfigError(f"{path}: skip: {pair!r} is not [<row name>, <column name>]")
    if not isinstance(grid.get("test", False), bool):
        raise ConfigError(f"{path}: test: true (run the test loop after each fit) or false, got {grid['test']!r}")
    unknown = set(grid) - set(KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)} ({', '.join(KEYS)})")
    return {**grid, "skip": [tuple(p) for p in skip], "test": grid.get("test", False),
            "repeats": grid.get("repeats") or {}}


def _folder(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name).strip("_") or "cell"


def metrics_of(grid: dict) -> list[str]:
    return [grid["metric"]] if isinstance(grid["metric"], str) else list(grid["metric"])


def run_cell(grid: dict, args: list[str], folder: Path, cell: str) -> dict[str, float]:
    """Fits one run (then its test loop, with ``test: true``): metric -> value."""
    cli = run_cli(["fit", *args, f"--trainer.default_root_dir={folder}"], end_process_group=False)
    logged = {k: float(v) for k, v in cli.trainer.callback_metrics.items()}
    if grid["test"]:
        for results in cli.trainer.test(cli.model, datamodule=cli.datamodule, verbose=False):
            logged |= {k: float(v) for k, v in results.items()}
    logged |= {k: v for c in cli.trainer.callbacks for k, v in (getattr(c, "metrics", None) or {}).items()}
    missing = [m for m in metrics_of(grid) if logged.get(m) is None]
    if missing:
        raise ConfigError(f"metric: {missing[0]!r} was not logged by cell {cell}; logged: {sorted(logged)}")
    return {m: float(logged[m]) for m in metrics_of(grid)}


def summary(values: dict[str, float]) -> dict:
    """``{"mean", "sd", "values"}`` of one metric over the repeats (``sd``: sample standard deviation)."""
    numbers = list(values.values())
    return {"mean": statistics.fmean(numbers), "sd": statistics.stdev(numbers) if len(numbers) > 1 else None,
            "values": values}


def run_grid(grid: dict, extra: list[str], root: str = "runs/grid") -> dict[str, dict]:
    """Fits every cell (see the module docstring); row -> column -> the metric (``None`` for a skipped cell), or
    with several metrics or ``repeats``, row -> column -> metric -> :func:`summary`."""
    plain = isinstance(grid["metric"], str) and not grid["repeats"]
    repeats = grid["repeats"] or {"": []}
    table: dict[str, dict] = {}
    for row, row_args in grid["rows"].items():
        table[row] = {}
        for column, column_args in grid["columns"].items():
            if (row, column) in grid["skip"]:
                table[row][column] = None
                continue
            runs = {}
            for repeat, repeat_args in repeats.items():
                folder = Path(root) / _folder(row) / _folder(column)
                folder = folder / _folder(repeat) if repeat else folder
                cell = f"({row}, {column}{', ' + repeat if repeat else ''})"
                runs[repeat] = run_cell(grid, [*row_args, *column_args, *repeat_args, *extra], folder, cell)
            if plain:
                table[row][column] = runs[""][grid["metric"]]
            else:
                table[row][column] = {m: summary({r: v[m] for r, v in runs.items()}) for m in metrics_of(grid)}
    return table


def markdown(table: dict[str, dict], metric: str) -> str:
    """One metric of a summarised table: rows x columns of ``mean ± sd`` (``—``: a skipped cell)."""
    columns = list(dict.fromkeys(c for cells in table.values() for c in cells))
    lines = [f"### {metric} (mean ± sd)", "", "| | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for row, cells in table.items():
        shown = []
        for column in columns:
            cell = (cells.get(column) or {}).get(metric)
            shown.append("—" if cell is None else f"{cell['mean']:.4f}" if cell["sd"] is None
                         else f"{cell['mean']:.4f} ± {cell['sd']:.4f}")
        lines.append(f"| {row} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def select(grid: dict, rows: list[str] | None, columns: list[str] | None) -> dict:
    """The grid cut to the named ``rows`` and ``columns`` (``None``: all), unknown names a ConfigError."""
    for flag, part, names in (("--rows", "rows", rows), ("--columns", "columns", columns)):
        unknown = [name for name in names or [] if name not in grid[part]]
        if unknown:
            raise ConfigError(f"{flag}: {unknown[0]!r} is not one of the grid's {part}: {list(grid[part])}")
        if names:
            grid = {**grid, part: {name: args for name, args in grid[part].items() if name in names}}
    return grid


def grid(input: str, output: str = "runs/grid", rows: list[str] | None = None,
         columns: list[str] | None = None) -> dict[str, dict]:
    """Fit every cell of a paper table and print the table; extra fit arguments for every cell go after `--`.

    Args:
        input: The grid YAML file (metric, rows, columns, skip, test, repeats).
        output: Root of the cells' run folders (<output>/<row>/<column>[/<repeat>]) and of grid.json.
        rows: Run only these rows (names of the grid file; default: all).
        columns: Run only these columns (default: all).
    """
    return run_grid_file(input, output, [], rows, columns)


def run_grid_file(input: str, output: str, extra: list[str], rows: list[str] | None = None,
                  columns: list[str] | None = None) -> dict[str, dict]:
    """Runs the grid file ``input`` (its ``rows`` and ``columns`` only, when named) with ``extra`` fit arguments,
    writes ``<output>/grid.json`` and prints it."""
    spec = select(read_grid(input), rows, columns)
    table = run_grid(spec, extra, output)
    Path(output).mkdir(parents=True, exist_ok=True)
    (Path(output) / "grid.json").write_text(json.dumps(table, indent=1) + "\n")
    print("grid " + json.dumps(table))
    if not (isinstance(spec["metric"], str) and not spec["repeats"]):
        print("\n".join(markdown(table, metric) for metric in metrics_of(spec)))
    return table


def main(argv: list[str] | None = None) -> dict[str, dict]:
    """Runs :func:`grid`; arguments after ``--`` go to every cell's ``fit``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    options = parse_command(grid, argv, "python -m lit_docemb grid")
    return run_grid_file(options["input"], options.get("output", "runs/grid"), extra, options.get("rows"),
                         options.get("columns"))
