"""``python -m lit_docemb``: one entry point that lists every command and loads a command's code only to run it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lit_docemb.commands import COMMANDS, main


def test_help_lists_every_command_with_a_description(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in ("fit", "validate", "test", "predict", "evaluate", "embed", "export", "figures", "slurm",
                 "dense-search", "candidates", "ctpe-release", "grid", "matching"):
        assert any(line.split()[:1] == [name] and len(line.split()) > 2 for line in out.splitlines()), name
    assert set(COMMANDS) == {line.split()[0] for line in out.splitlines() if line.startswith("  ")}


def test_unknown_command_is_one_line_and_status_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fitt"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown command 'fitt'" in err and "fit" in err


def test_help_imports_neither_torch_nor_lightning():
    code = ("import sys\nfrom lit_docemb.commands import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'lightning', 'transformers') if m in sys.modules]\nprint(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_every_command_module_has_its_entry_point():
    """A command module's ``main(argv)``, LightningCLI's ``run(argv)`` (``fit``...): what :func:`main` hands a
    command to, once; ``cli`` hands nothing back (it has no ``main`` of its own)."""
    import importlib

    for name, (module_name, _) in COMMANDS.items():
        module = importlib.import_module(f"lit_docemb.commands.{module_name}")
        assert callable(getattr(module, "run" if module_name == "cli" else "main")), name
    assert not hasattr(importlib.import_module("lit_docemb.commands.cli"), "main")


def test_a_commands_imports_are_frozen_out_of_the_collections_and_the_runs_garbage_collected_before_the_exit():
    """``import_command`` freezes the objects its imports made (torch's, Lightning's: no full collection walks them
    again) with the collector enabled after it; ``release_before_exit`` collects the garbage left (a cycle's
    finalizer runs) before it freezes the rest."""
    code = """
import gc, weakref
from lit_docemb.commands import import_command, release_before_exit
import_command("cli")
print(gc.isenabled(), gc.get_freeze_count() > 100_000)
class Node: pass
cycle = Node(); cycle.self = cycle
weakref.finalize(cycle, print, "collected")
del cycle
release_before_exit()
print(gc.get_count()[2] == 0 and gc.get_freeze_count() > 100_000)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "collected", "True"], out
