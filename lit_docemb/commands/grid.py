"""``python -m lit_docemb grid --input GRID.yaml [--output ROOT] [-- FIT ARGS]``: a paper table's cells as ``fit`` runs, one after the other,
then the table of one metric.

A grid file is data (read with the safe loader, every ``fit`` it starts checked like any config)::

  metric: probe/error_rate            # a metric the trainer or an evaluation callback logged
  rows:                               # row name -> fit arguments every cell of the row adds
    DECA: ["--config", "configs/deca/r8_dc_sc.yaml"]
    -Contrastive: ["--config", "configs/deca/r8_dc_append_wordnet.yaml"]
  columns:                            # column name -> fit arguments of the column's cells
    WordNet: ["--model.init_args.augmentation=lit_docemb.augment.specs.WordNet"]
  skip: [[-Contrastive, WordNet]]     # cells the paper leaves empty (optional)

Cell (row, column) runs ``fit <row args> <column args> <extra args> --trainer.default_root_dir=<root>/<row>/<column>``
(``--output``, default ``runs/grid``); the table is printed as ``grid {json}`` and written to ``<root>/grid.json``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from lit_docemb.commands.arguments import parse_command
from lit_docemb.commands.trust import load_yaml
from lit_docemb.errors import ConfigError


def read_grid(path: str | Path) -> dict:
    """The grid file, checked: ``metric`` a string, ``rows`` and ``columns`` maps of name -> list of strings,
    ``skip`` pairs of a row and a column name."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"grid: no file at {str(path)!r} (a YAML file with metric, rows and columns)")
    grid = load_yaml(path) or {}
    if not isinstance(grid, dict) or not isinstance(grid.get("metric"), str):
        raise ConfigError(f"{path}: metric: give the metric to tabulate, e.g. probe/error_rate")
    for part in ("rows", "columns"):
        cells = grid.get(part)
        if not isinstance(cells, dict) or not cells or not all(
                isinstance(args, list) and all(isinstance(a, str) for a in args) for args in cells.values()):
            raise ConfigError(f"{path}: {part}: a map of name -> list of fit arguments (strings)")
    skip = grid.get("skip") or []
    for pair in skip:
        if (not isinstance(pair, list) or len(pair) != 2 or pair[0] not in grid["rows"]
                or pair[1] not in grid["columns"]):
            raise ConfigError(f"{path}: skip: {pair!r} is not [<row name>, <column name>]")
    unknown = set(grid) - {"metric", "rows", "columns", "skip"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)} (metric, rows, columns, skip)")
    return {**grid, "skip": [tuple(p) for p in skip]}


def _folder(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name).strip("_") or "cell"


def run_grid(grid: dict, extra: list[str], root: str = "runs/grid") -> dict[str, dict[str, float | None]]:
    """Fits every cell (see the module docstring); row -> column -> the metric (``None`` for a skipped cell)."""
    from lit_docemb.commands.cli import main as fit_main

    table: dict[str, dict[str, float | None]] = {}
    for row, row_args in grid["rows"].items():
        table[row] = {}
        for column, column_args in grid["columns"].items():
            if (row, column) in grid["skip"]:
                table[row][column] = None
                continue
            folder = Path(root) / _folder(row) / _folder(column)
            cli = fit_main(["fit", *row_args, *column_args, *extra, f"--trainer.default_root_dir={folder}"])
            logged = {**{k: float(v) for k, v in cli.trainer.callback_metrics.items()},
                      **{k: v for c in cli.trainer.callbacks for k, v in (getattr(c, "metrics", None) or {}).items()}}
            value = logged.get(grid["metric"])
            if value is None:
                raise ConfigError(f"metric: {grid['metric']!r} was not logged by cell ({row}, {column}); logged: "
                                  f"{sorted(logged)}")
            table[row][column] = float(value)
    return table


def grid(input: str, output: str = "runs/grid") -> dict[str, dict[str, float | None]]:
    """Fit every cell of a paper table and print the table; extra fit arguments for every cell go after `--`.

    Args:
        input: The grid YAML file (metric, rows, columns, skip).
        output: Root of the cells' run folders (<output>/<row>/<column>) and of grid.json.
    """
    return run_grid_file(input, output, [])


def run_grid_file(input: str, output: str, extra: list[str]) -> dict[str, dict[str, float | None]]:
    """Runs the grid file ``input`` with ``extra`` fit arguments, writes ``<output>/grid.json`` and prints it."""
    table = run_grid(read_grid(input), extra, output)
    Path(output).mkdir(parents=True, exist_ok=True)
    (Path(output) / "grid.json").write_text(json.dumps(table, indent=1) + "\n")
    print("grid " + json.dumps(table))
    return table


def main(argv: list[str] | None = None) -> dict[str, dict[str, float | None]]:
    """Runs :func:`grid`; arguments after ``--`` go to every cell's ``fit``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    options = parse_command(grid, argv, "python -m lit_docemb grid")
    return run_grid_file(options["input"], options.get("output", "runs/grid"), extra)
