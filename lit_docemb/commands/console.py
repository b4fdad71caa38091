"""The one place where third-party messages that tell a lit_docemb user nothing are filtered out of the console.

:func:`quiet_third_parties` runs when a command starts (:func:`lit_docemb.commands.main`). It hides:

* Lightning's "💡 Tip: ... litlogger" advertisement, printed by every Trainer;
* Lightning's "The `srun` command is available on your system but is not used" hint, printed on any machine with
  Slurm installed (``python -m lit_docemb slurm`` writes the ``srun`` line of a job itself), and its "Be aware that
  when using `ckpt_path`, callbacks used to create the checkpoint need to be provided" warning, printed whenever
  ``embed`` restores a fit's checkpoint without the fit's callbacks, as it means to;
* deprecation warnings raised inside our dependencies about their own use of another dependency, which a user
  cannot act on (:data:`DEPENDENCY_DEPRECATIONS`);
* wandb's "Tracking run with wandb version" line, by setting ``WANDB_QUIET=true`` when the environment does not
  set it; wandb's warnings, errors, where the run is saved and how to sync it still show;
* wandb's "The anonymous setting has no effect" warning, caused by Lightning's WandbLogger always passing
  ``anonymous`` (:func:`tidy_loggers` drops that unset argument);
* transformers' weight-loading bar and report (:class:`lit_docemb.models.encoder.HFEncoder` prints one line of its
  own instead, e.g. "MLM head initialised fresh: 6 weights"; it reads ``LIT_DOCEMB_VERBOSE`` itself, as a library
  call outside any command loads encoders too).

It also prints lit_docemb's own warnings as one line (``UserWarning: <message>``), without the path of the file
that raised them and the source line that Python's warning format repeats after it.

``LIT_DOCEMB_VERBOSE=1`` in the environment turns every filter off, to see the messages again. docs/usage.md lists
the same.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterable, MutableMapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # lit_docemb/

VERBOSE_VARIABLE = "LIT_DOCEMB_VERBOSE"

#: Messages (regular expressions matched from the start) of deprecation warnings that a dependency raises about
#: its own use of another one.
DEPENDENCY_DEPRECATIONS = (
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # Lightning's pytree helper on torch >= 2.10
)

#: Start of Lightning's informational messages that advertise products rather than describe the run.
LIGHTNING_ADVERTS = ("💡 Tip:",)

#: Start of Lightning's warnings that do not apply to how lit_docemb runs.
LIGHTNING_HINTS = (r"The `srun` command is available on your system but is not used",
                   # embed/evaluate restore a fit's checkpoint on purpose, without its training callbacks:
                   r"Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be provided")


class DropMessages(logging.Filter):
    """A logging filter dropping records whose message starts with one of ``prefixes``.

    Args:
        prefixes: Starts of the messages to drop.
    """

    def __init__(self, prefixes: Iterable[str] = ()) -> None:
        super().__init__()
        self.prefixes = tuple(prefixes)

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefixes)


def verbose(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Whether ``LIT_DOCEMB_VERBOSE`` asks to see every third-party message (any value but ``""`` and ``0``)."""
    return environ.get(VERBOSE_VARIABLE, "").strip() not in ("", "0")


def quiet_third_parties(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Installs the filters of this module's docstring, unless ``LIT_DOCEMB_VERBOSE`` is set; returns whether it
    did. Safe to call more than once.

    Args:
        environ: The process environment (``WANDB_QUIET`` is set in it when unset).
    """
    if verbose(environ):
        return False
    for message in DEPENDENCY_DEPRECATIONS:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)
        warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
    for message in LIGHTNING_HINTS:
        warnings.filterwarnings("ignore", message=message)
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        log = logging.getLogger(name)
        if not any(isinstance(f, DropMessages) for f in log.filters):
            log.addFilter(DropMessages(LIGHTNING_ADVERTS))
    if not getattr(warnings.formatwarning, "one_line_for_ours", False):
        warnings.formatwarning = one_line_for_ours(warnings.formatwarning)
    environ.setdefault("WANDB_QUIET", "true")
    return True


def one_line_for_ours(format_warning):
    """Wraps Python's warning format so that a warning raised in lit_docemb's own files prints as
    ``<category>: <message>`` on one line; any other keeps ``format_warning``'s form."""

    def formatted(message, category, filename, lineno, line=None) -> str:
        if Path(filename).resolve().is_relative_to(PACKAGE):
            return f"{category.__name__}: {message}\n"
        return format_warning(message, category, filename, lineno, line)

    formatted.one_line_for_ours = True
    return formatted


def tidy_loggers(loggers: Iterable[object], environ: MutableMapping[str, str] = os.environ) -> None:
    """Drops ``anonymous=None`` from the ``wandb.init`` arguments of Lightning's WandbLoggers (wandb warns that the
    setting has no effect whenever it is passed, even unset), unless ``LIT_DOCEMB_VERBOSE`` is set.

    Args:
        loggers: A trainer's loggers; those that are no WandbLogger are left alone.
        environ: The process environment.
    """
    if verbose(environ):
        return
    for logger in loggers:
        init = getattr(logger, "_wandb_init", None)
        if type(logger).__name__ == "WandbLogger" and isinstance(init, dict) and init.get("anonymous") is None:
            init.pop("anonymous", None)

