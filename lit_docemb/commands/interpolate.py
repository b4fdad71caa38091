"""Weight-space interpolation with the starting weights (WiSE-FT, Wortsman et al. 2022): ``python -m lit_docemb
interpolate``, which chooses its α on validation (the mixing itself: :func:`lit_docemb.commands.loading.
interpolate_method`, shared by the commands that load a method).

``embed``, ``export`` and ``evaluate`` take ``--interpolate_alpha α`` with ``--ckpt_path``: the method they use
has the weights ``θ = (1 − α)·θ₀ + α·θ_trained``, where ``θ₀`` is the method as the run's config builds it (the
baseline those commands use without ``--ckpt_path``: the config's pretrained encoder), drawn under the config's
``seed_everything``. Every floating-point weight interpolates, heads included: for DocSplit and DECA with an
encoder backbone θ₀ is exactly the pretrained encoder (their masked-LM head does not embed); Graph-RoBERTa's and
CoLDE's heads start at their initialisation, which with ``head_init: identity`` makes α = 0 the encoder's mean of
passages, and with the paper's random init is a draw under the seed (the start of training when the run used
that config and seed). α = 0 gives the baseline's vectors exactly, α = 1 the checkpoint's.

::

    python -m lit_docemb interpolate --run_dir runs/x
    python -m lit_docemb embed --run_dir runs/x --interpolate_alpha 0.6 --input docs.jsonl

``interpolate`` scores α on a grid (0, 0.1, ..., 1) with validation evaluations: the config's evaluation
callbacks that read no test split, else what the corpus supports on its validation split (held-out retrieval, clustering and the linear
probe with ``evaluate_on: val``, retrieval of the validation queries); an evaluation that reads a test split is
refused. It writes every α's metrics and the best α to ``<run_dir>/interpolation.json`` (with ``--config``:
``<default_root_dir>/interpolation.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.evaluate import build_evaluation
from lit_docemb.commands.loading import load_run_cli, restore_run, run_of, torch_device
from lit_docemb.errors import ConfigError, require
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext
from lit_docemb.eval.runner import run_evaluations, validation_evaluations
from lit_docemb.methods.retention import ALPHA_GRID, choose_alpha, interpolated_state


def reads_test(evaluation) -> bool:
    """Whether an evaluation scores a test split (``evaluate_on: test``, ``split: test``)."""
    return getattr(evaluation, "evaluate_on", None) == "test" or getattr(evaluation, "split", None) == "test"


def refuse_test_splits(evaluations: list) -> None:
    """α is chosen on validation: an evaluation that reads a test split is a :class:`ConfigError`."""
    for evaluation in evaluations:
        if reads_test(evaluation):
            raise ConfigError(f"interpolate: {type(evaluation).__name__} reads the test split; α must be chosen on "
                              f"validation: pass --evaluation with init_args evaluate_on: val (or split: val)")


#: Measures ``interpolate`` maximises when no ``--metric`` is given, in order of preference (higher is better).
PREFERRED_MEASURES = ("mrr", "ndcg", "map", "accuracy", "nmi", "f1")


def pick_metric(results: dict[str, dict[str, float]], metric: str | None) -> str:
    """``metric`` (``<evaluation>/<key>``) when given and present; else the first of :data:`PREFERRED_MEASURES`
    found, the least nested key first (``heldout/heldout/mrr@10`` before ``heldout/heldout/summary/mrr@10``)."""
    names = [f"{name}/{key}" for name, metrics in results.items() for key in metrics]
    if metric is not None:
        if metric not in names:
            raise ConfigError(f"--metric {metric}: not among the evaluations' metrics: {', '.join(names)}")
        return metric
    for prefix in PREFERRED_MEASURES:
        found = [n for n in sorted(names, key=lambda n: n.count("/")) if n.rpartition("/")[2].startswith(prefix)]
        if found:
            return found[0]
    raise ConfigError(f"interpolate: no MRR, nDCG, MAP, accuracy, NMI or F1 among {', '.join(names)}: pass --metric")


def interpolate(config: list[str] | None = None, ckpt_path: str | None = None, evaluation: list[str] | None = None,
                metric: str | None = None, alphas: list[str] | None = None, output: str | None = None,
                batch_size: int = 64, accelerator: str = "auto", run_dir: str | None = None,
                overrides: list[str] | None = None) -> dict:
    """Choose the WiSE-FT interpolation α (θ = (1−α)·θ₀ + α·θ_trained) on validation: score each α of a grid and
    write every score and the best α to interpolation.json in the run folder.

    Args:
        config: The run's config (``runs/x/config.yaml``); repeat to merge, later files win.
        ckpt_path: The trained checkpoint (default with --run_dir: its checkpoints/last.ckpt).
        evaluation: A validation evaluation by name or ``{class_path, init_args}`` (as ``evaluate`` takes it);
            repeatable. Default: the config's evaluation callbacks that read no test split, else what the corpus
            supports on validation.
        metric: The metric to maximise, ``<evaluation>/<key>`` (``heldout/heldout/mrr@10``); default: the first
            MRR, else nDCG, MAP, accuracy, NMI or F1 the evaluations report.
        alphas: The α values tried (default: 0, 0.1, ..., 1).
        output: Folder of interpolation.json (default: the run folder, else ``trainer.default_root_dir``).
        batch_size: Documents embedded per forward pass.
        accelerator: ``auto``, ``cpu``, ``cuda`` (or ``gpu``), or a torch device such as ``cuda:1``.
        run_dir: The run folder (``runs/x``): its config.yaml and checkpoints/last.ckpt, in place of --config and
            --ckpt_path.
        overrides: Config overrides (``--data.init_args.root DIR``).
    """
    grid = ALPHA_GRID if not alphas else tuple(float(a) for a in alphas)
    for alpha in grid:
        require(0.0 <= alpha <= 1.0, "--alphas", "values in [0, 1]", alpha)
    run = run_of(run_dir, config, ckpt_path, needs_checkpoint=True)
    config, ckpt_path = run.configs, run.ckpt_path
    specs = [build_evaluation(spec) for spec in evaluation or []]
    cli = load_run_cli(run, overrides or ())
    method, data = cli.model, cli.datamodule
    starting = {k: v.detach().clone() for k, v in method.state_dict().items()}  # the config's build, seeded
    restore_run(method, run)
    trained = {k: v.detach().clone() for k, v in method.state_dict().items()}
    method.to(torch_device(accelerator)).eval()
    data.setup_evaluation()
    refuse_test_splits(specs)
    evaluations = specs or [c for c in cli.trainer.callbacks if isinstance(c, Evaluation) and not reads_test(c)] \
        or validation_evaluations(data)
    every: dict[float, dict] = {}
    chosen: list[str] = []

    def score(alpha: float) -> float:
        method.load_state_dict(interpolated_state(trained, starting, alpha))
        every[alpha] = run_evaluations(evaluations, EvaluationContext(method, data, None, batch_size))
        chosen[:] = chosen or [pick_metric(every[alpha], metric)]
        name, _, measure = chosen[0].partition("/")
        print(f"interpolate: alpha {alpha:.2f}  {chosen[0]} {every[alpha][name][measure]:.4f}")
        return every[alpha][name][measure]

    best, scores = choose_alpha(score, grid)
    record = {"checkpoint": ckpt_path, "config": config, "metric": chosen[0], "best_alpha": best,
              "scores": {str(a): s for a, s in scores.items()}, "results": {str(a): r for a, r in every.items()}}
    folder = Path(output or run.output("", cli.trainer.default_root_dir))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "interpolation.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"interpolate: best alpha {best} ({chosen[0]} {scores[best]:.4f}; alpha 0 {scores.get(0.0, float('nan')):.4f},"
          f" alpha 1 {scores.get(1.0, float('nan')):.4f}); written to {folder}/interpolation.json; use it with "
          f"--interpolate_alpha {best}")
    return record


def main(argv: list[str] | None = None) -> dict:
    return run_command(interpolate, sys.argv[1:] if argv is None else argv, "python -m lit_docemb interpolate")
