"""``python -m lit_docemb ctpe-release FILE OUT``: a CTPE released subset (github.com/opendata-ai/tr) as the task
folder that ``fit --config configs/ctpe/*.yaml`` and ``candidates`` read (see :mod:`lit_docemb.data.ctpe_release`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lit_docemb.data.ctpe_release import convert_ctpe_release
from lit_docemb.errors import ConfigError


def main(argv: list[str] | None = None) -> dict[str, int]:
    parser = argparse.ArgumentParser(description="Convert a CTPE released subset to a candidates/test/qrels folder.")
    parser.add_argument("release", help="the released file: a ground-truth dict line, then id<TAB>title<TAB>abstract")
    parser.add_argument("out", help="the task folder to write (e.g. data/ctpe/arxiv)")
    args = parser.parse_args(argv)
    if not Path(args.release).expanduser().is_file():
        raise ConfigError(f"release: no file at {args.release!r}; download a subset from github.com/opendata-ai/tr")
    try:
        counts = convert_ctpe_release(args.release, args.out)
    except ValueError as err:
        raise ConfigError(f"release: {err}") from err
    print("ctpe-release " + json.dumps(counts))
    return counts
