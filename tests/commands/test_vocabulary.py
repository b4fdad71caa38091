"""One flag vocabulary: every command's ``--help`` comes from its signature, names the vocabulary flags it takes,
loads no torch for the commands that are not LightningCLI's, and refuses the old spellings."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys

import pytest

from lit_docemb.commands import COMMANDS
from lit_docemb.commands.arguments import Signature, build_parser, docstring_arguments, parse_command
from lit_docemb.commands.candidates import candidates
from lit_docemb.commands.candidates import main as candidates_main
from lit_docemb.commands.embed import embed
from lit_docemb.commands.embed import main as embed_main
from lit_docemb.commands.grid import main as grid_main
from lit_docemb.eval.runner import EVALUATIONS
from lit_docemb.methods.checkpoints import class_at

#: Command -> the vocabulary flags it takes (docs/usage.md).
VOCABULARY_FLAGS = {
    "evaluate": {"--config", "--ckpt_path", "--output", "--batch_size", "--accelerator", "--interpolate_alpha"},
    "embed": {"--config", "--ckpt_path", "--input", "--output", "--batch_size", "--num_workers", "--accelerator",
              "--devices", "--precision", "--interpolate_alpha"},
    "export": {"--config", "--ckpt_path", "--output", "--interpolate_alpha"},
    "interpolate": {"--config", "--ckpt_path", "--output", "--batch_size", "--accelerator"},
    "figures": {"--config", "--ckpt_path", "--input", "--output"},
    "slurm": {"--config"},
    "dense-search": {"--config", "--ckpt_path", "--output", "--batch_size", "--accelerator"},
    "candidates": {"--ckpt_path", "--input", "--batch_size"},
    "matching": {"--config", "--ckpt_path", "--batch_size", "--accelerator"},
    "pool-folds": {"--output"},
    "ctpe-release": {"--input", "--output"},
    "word-vectors": {"--input", "--output", "--config"},
    "grid": {"--input", "--output"},
    "build-wikir": {"--input", "--output"},
}
OLD_SPELLINGS = ("--ckpt ", "--batch-size", "--device ", "--no_progress_bar")

HELP_OF_EVERY_COMMAND = """
import io, json, sys, time
from lit_docemb.commands import main
report = {}
for command in sys.argv[1:]:
    saved, sys.stdout = sys.stdout, io.StringIO()
    start = time.perf_counter()
    try:
        main([command, '--help'])
        code = None
    except SystemExit as stop:
        code = stop.code
    text, sys.stdout = sys.stdout.getvalue(), saved
    heavy = [m for m in ('torch', 'lightning', 'transformers') if m in sys.modules]
    report[command] = {'code': code, 'help': text, 'heavy': heavy, 'seconds': time.perf_counter() - start}
print(json.dumps(report))
"""


def test_every_command_but_lightnings_answers_help_from_its_signature_without_torch():
    commands = [c for c, (module, _) in COMMANDS.items() if module != "cli"]
    assert set(commands) == set(VOCABULARY_FLAGS)
    out = subprocess.run([sys.executable, "-c", HELP_OF_EVERY_COMMAND, *commands], capture_output=True, text=True,
                         check=True).stdout
    report = json.loads(out.splitlines()[-1])
    for command in commands:
        result = report[command]
        assert result["code"] in (0, None), (command, result)
        assert result["heavy"] == [], (command, result["heavy"])  # each checked after its own help
        options = {word.strip(",[]") for word in result["help"].split() if word.startswith(("--", "[--"))}
        assert VOCABULARY_FLAGS[command] <= options, (command, VOCABULARY_FLAGS[command] - options)
        assert not any(old in result["help"] for old in OLD_SPELLINGS), command


@pytest.mark.parametrize("command", [c for c, (module, _) in COMMANDS.items() if module not in ("cli", "slurm")])
def test_the_help_read_from_the_source_is_the_help_of_the_imported_function(command):
    module = COMMANDS[command][0]
    read = Signature.read(f"lit_docemb.commands.{module}", module)
    imported = Signature.of(getattr(importlib.import_module(f"lit_docemb.commands.{module}"), module))
    assert read == imported
    assert build_parser(read, command).format_help() == build_parser(imported, command).format_help()


def test_a_signature_the_source_reader_cannot_read_is_named(tmp_path, monkeypatch):
    (tmp_path / "probe_command.py").write_text(
        "import collections\n\n\ndef probe_command(a: collections.OrderedDict = None):\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="annotation 'collections.OrderedDict'"):
        Signature.read("probe_command", "probe_command")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["fit", "predict"])
def test_lightning_commands_help_names_config_and_ckpt_path(command):
    result = subprocess.run([sys.executable, "-m", "lit_docemb", command, "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--config" in result.stdout and "--ckpt_path" in result.stdout


def test_help_text_is_the_docstring():
    helps = docstring_arguments(inspect.getdoc(embed))
    assert helps["batch_size"] == "Documents per batch and device."
    assert helps["ckpt_path"].startswith("A checkpoint of that method; without it")
    assert "overrides" in helps and set(helps) == set(embed.__code__.co_varnames[:embed.__code__.co_argcount])


def test_evaluation_names_are_the_classes_names():
    assert {name: class_at(path).name for name, path in EVALUATIONS.items()} == {n: n for n in EVALUATIONS}


@pytest.mark.parametrize("old, new", [(["--ckpt", "k.ckpt"], "--ckpt_path"), (["--batch-size", "7"], "--batch_size")])
def test_old_spellings_are_refused_naming_the_new_one(old, new, capsys):
    with pytest.raises(SystemExit) as stop:
        parse_command(candidates, ["--ckpt_path", "k", "--input", "t", *old], "candidates")
    assert stop.value.code == 2
    assert capsys.readouterr().err == (f"error: {old[0]}: unknown option of candidates; did you mean {new}? "
                                       "(candidates --help lists them)\n")


@pytest.mark.parametrize("flag, hint", [
    ("--no_progress_bar", "did you mean --progress_bar false? (python -m lit_docemb embed --help lists them)"),
    ("--progress-bar=false", "did you mean --progress_bar? (python -m lit_docemb embed --help lists them)"),
    ("--outptu", "did you mean --output? (python -m lit_docemb embed --help lists them)"),
    ("--frobnicate", "its options: python -m lit_docemb embed --help"),
])
def test_an_unknown_flag_is_named_with_the_closest_one_before_anything_is_read(flag, hint, capsys):
    """It was read as a config override: ``--no_progress_bar: a config override needs a value``, after the input."""
    with pytest.raises(SystemExit) as stop:
        embed_main(["--config", "missing.yaml", "--input", "missing.jsonl", "--output", "out", flag,
                    "--model.init_args.encoder.name", "x"])
    assert stop.value.code == 2
    name = flag.partition("=")[0]
    assert capsys.readouterr().err == f"error: {name}: unknown option of python -m lit_docemb embed; {hint}\n"


def test_config_overrides_are_not_unknown_flags():
    parsed = parse_command(embed, ["--config", "c.yaml", "--input", "i", "--output", "o", "--model",
                                   "lit_docemb.methods.DocSplit", "--model.init_args.encoder.name=x"], "embed")
    assert parsed["overrides"] == ["--model", "lit_docemb.methods.DocSplit", "--model.init_args.encoder.name=x"]


@pytest.mark.parametrize("command, argv", [
    (candidates_main, ["k.ckpt", "tasks"]),
    (grid_main, ["grids/t5.yaml"]),
    (grid_main, ["--input", "grids/t5.yaml", "--root", "r"]),
])
def test_old_positionals_are_refused(command, argv, capsys):
    with pytest.raises(SystemExit) as stop:
        command(argv)
    assert stop.value.code == 2


def test_an_option_the_command_does_not_take_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        parse_command(candidates, ["--ckpt_path", "k", "--input", "t", "--model.init_args.x", "1"], "candidates")
    assert stop.value.code == 2 and capsys.readouterr().err == (
        "error: --model.init_args.x: unknown option of candidates; it takes no config overrides (candidates --help "
        "lists its options)\n")
