"""``python -m lit_docemb ctpe-release --input FILE --output FOLDER``: a CTPE released subset (github.com/opendata-ai/tr) as the task
folder that ``fit --config configs/ctpe/*.yaml`` and ``candidates`` read (see :mod:`lit_docemb.data.corpora.ctpe_release`)."""

from __future__ import annotations

import json
from pathlib import Path

from lit_docemb.commands.arguments import run_command
from lit_docemb.data.corpora.ctpe_release import convert_ctpe_release
from lit_docemb.errors import ConfigError


def ctpe_release(input: str, output: str) -> dict[str, int]:
    """Convert a CTPE released subset to a candidates/test/qrels task folder; prints the counts written.

    Args:
        input: The released file: a ground-truth dict line, then id<TAB>title<TAB>abstract lines.
        output: The task folder to write (e.g. data/ctpe/arxiv).
    """
    if not Path(input).expanduser().is_file():
        raise ConfigError(f"--input: no file at {input!r}; download a subset from github.com/opendata-ai/tr")
    try:
        counts = convert_ctpe_release(input, output)
    except ValueError as err:
        raise ConfigError(f"--input: {err}") from err
    print("ctpe-release " + json.dumps(counts))
    return counts


def main(argv: list[str] | None = None) -> dict[str, int]:
    """Runs :func:`ctpe_release`."""
    return run_command(ctpe_release, argv, "python -m lit_docemb ctpe-release")
