"""Floor 5: every entry point of ``python -m lit_docemb`` (and the ``lit-docemb`` script).

:func:`main` is the one entry point: it reads the command name and imports that command's module only then, so
``python -m lit_docemb --help`` answers without loading torch or Lightning, and it reports a config or argument that
cannot run in one line (status 2) for every command. ``fit``, ``validate``, ``test`` and ``predict`` are LightningCLI's
(:func:`lit_docemb.commands.cli.run`); every other command is a module here with a ``main(argv)`` that
parses ``argv`` into the arguments of the module's function of the same name (``dense-search``:
:func:`lit_docemb.commands.dense_search.dense_search`). A command module imports what it runs at its top: its
``--help`` is built from that function's signature read from the source (:mod:`lit_docemb.commands.arguments`;
``slurm``'s options are :mod:`lit_docemb.commands.sbatch`'s), without importing it.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

from lit_docemb.commands import arguments, sbatch
from lit_docemb.commands.console import quiet_third_parties
from lit_docemb.commands.help_cache import print_help
from lit_docemb.errors import ONE_LINE_ERRORS

#: Command -> (module of ``lit_docemb.commands`` that runs it, one-line description).
COMMANDS: dict[str, tuple[str, str]] = {
    "fit": ("cli", "train a method on a corpus (a config from configs/, LightningCLI)"),
    "validate": ("cli", "run a method's validation loop on a checkpoint"),
    "test": ("cli", "run a method's test loop on a checkpoint"),
    "predict": ("cli", "write a method's embeddings of its corpus to <run>/predictions (embed: any JSONL/TSV file)"),
    "evaluate": ("evaluate", "score a checkpoint with the paper evaluations (retrieval, clustering, probes, ...)"),
    "embed": ("embed", "write a checkpoint's document embeddings of a JSONL/TSV file"),
    "export": ("export", "save a checkpoint as a Hugging Face or sentence-transformers model"),
    "interpolate": ("interpolate", "choose on validation the α that mixes a checkpoint with its starting weights (WiSE-FT)"),
    "figures": ("figures", "draw a run's training curves, embedding maps, similarity and attention heatmaps"),
    "slurm": ("slurm", "write and submit a SLURM job for a fit"),
    "dense-search": ("dense_search", "rank a retrieval split with a checkpoint and write a TREC run"),
    "candidates": ("candidates", "rank candidate/test task folders (CTPE's tasks) with a checkpoint"),
    "ctpe-release": ("ctpe_release", "convert a CTPE released subset (opendata-ai/tr) to a candidates/test folder"),
    "word-vectors": ("word_vectors", "train word2vec or GloVe vectors on a corpus, as a file CTPE's init: "
                                     "pretrained reads"),
    "grid": ("grid", "fit every cell of a paper table (a grid file of rows and columns) and print the table"),
    "matching": ("matching", "document matching on labelled pairs (threshold and pair classifier)"),
    "pool-folds": ("pool_folds", "pool the TREC runs of a cross-validation's folds into one table (Robust04)"),
    "build-wikir": ("build_wikir", "build a WIKIR collection with sections kept from a Wikipedia dump (wikIR's way)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {description}" for name, (_, description) in COMMANDS.items()]
    return ("usage: python -m lit_docemb <command> [options]   (<command> --help for its options)\n\ncommands:\n"
            + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None):
    """Runs ``argv``'s command (``sys.argv[1:]`` by default)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        raise SystemExit(0 if argv else 2)
    if argv[0] not in COMMANDS:
        sys.stderr.write(f"error: unknown command {argv[0]!r}; commands: {', '.join(COMMANDS)} "
                         "(python -m lit_docemb --help)\n")
        raise SystemExit(2)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # tokenisation runs in dataloader workers
    quiet_third_parties()  # third-party messages that say nothing to a user (LIT_DOCEMB_VERBOSE=1 shows them)
    module_name, _ = COMMANDS[argv[0]]
    print_help_of(module_name, argv)
    module = import_command(module_name)
    try:  # LightningCLI reads the subcommand itself; another command's main its options
        return module.run(argv) if module_name == "cli" else module.main(argv[1:])
    except ONE_LINE_ERRORS as err:  # a config found bad before training, a full disk: one line, as for a bad key
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from err


def import_command(module_name: str):
    """Imports the command's module; the first time, with the garbage collector paused and then frozen
    (``gc.freeze``) on what the import made: torch, Lightning and what they load are over half a million objects that
    live until the process ends, which the full collections the import set off walked again and again (0.8 CPU s of
    a DECA fit on MR), as would every full collection after it (:class:`~lit_docemb.methods.frozen_heap.FrozenHeap`
    then freezes what a run adds). A cycle already garbage at the import stays uncollected."""
    name = f"lit_docemb.commands.{module_name}"
    if name in sys.modules:
        return sys.modules[name]
    collecting = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(name)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def release_before_exit() -> None:
    """What ``python -m lit_docemb`` runs once its command has returned: collects the run's garbage (finalizers run as
    they would at the exit), then freezes what is left, all of which lives until the process ends: the exit still
    runs the ``atexit`` handlers and frees those objects by their reference counts, but its collections no longer
    walk them again (a DECA fit on MR spent 1.9 CPU s exiting, 1.3 of them there)."""
    gc.collect()
    gc.freeze()


def print_help_of(module_name: str, argv: list[str]) -> None:
    """Prints ``argv``'s command's help and exits when ``argv`` asks for it, without importing the command where
    its help can be read otherwise: LightningCLI's (``fit --help``) is kept after its first answer, a command
    module's is read from its source."""
    if module_name == "cli":
        if argv[1:] in (["--help"], ["-h"]):
            print_help(argv[0], lambda: importlib.import_module("lit_docemb.commands.cli").run(argv))
        return
    options = argv[1:argv.index("--")] if "--" in argv else argv[1:]  # after --: grid's and slurm's fit arguments
    if "--help" in options or "-h" in options:
        if module_name == "slurm":
            sbatch.parser().print_help()
            raise SystemExit(0)
        arguments.print_help(f"lit_docemb.commands.{module_name}", module_name, f"python -m lit_docemb {argv[0]}")
