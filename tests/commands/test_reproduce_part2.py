"""docs/reproduce.md's DECA, CoLDE and CTPE sections: every ``python -m lit_docemb`` line names a command, its config
/ grid files exist, and ``fit`` / ``test`` lines resolve to a config (their overrides are keys the config has, with
valid values). tests/system/test_reproduce_doc.py parses every command of the whole document against its parser."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from lit_docemb.commands import COMMANDS
from lit_docemb.commands.slurm import resolve_fit_config

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reproduce.md"


def part_two() -> str:
    """The document from its DECA section on."""
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("\n## DECA"):]


def commands() -> list[list[str]]:
    text = part_two()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("python benchmarks/")]  # test_benchmark_commands
    assert all(line.startswith("python -m lit_docemb ") for line in lines), "one lit_docemb command per line"
    return [shlex.split(line)[3:] for line in lines]


def test_the_document_has_the_three_sections_and_rows_with_an_ours_column():
    text = part_two()
    assert [h for h in re.findall(r"^## (.+)$", text, flags=re.M)] == ["DECA", "CoLDE", "CTPE"]
    assert text.count("not run (no data offline)") >= 20
    assert "python -m lit_docemb grid --input grids/deca_table5.yaml" in text  # Table 5 as one command


@pytest.mark.parametrize("argv", commands(), ids=lambda argv: " ".join(argv)[:90])
def test_every_command_parses(argv, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert argv[0] in COMMANDS, argv[0]
    for flag, value in zip(argv, argv[1:]):
        if flag == "--config":
            assert (ROOT / value).is_file(), value
    if argv[0] == "grid":
        assert (ROOT / argv[argv.index("--input") + 1]).is_file()
    if argv[0] in ("fit", "test"):
        args = argv[1:]
        if "--ckpt_path" in args:  # the checkpoint comes from the fit before it
            at = args.index("--ckpt_path")
            args = args[:at] + args[at + 2:]
        printed = resolve_fit_config(args)
        assert printed["model"]["class_path"].startswith("lit_docemb.methods.")


def test_benchmark_commands_name_scripts_that_exist_and_their_options():
    """The benchmark lines of the DECA section (``python benchmarks/<script>.py ...``): the script exists and names
    each flag the line gives."""
    lines = [line.strip() for block in re.findall(r"```bash\n(.*?)```", part_two(), flags=re.S)
             for line in block.splitlines() if line.strip().startswith("python benchmarks/")]
    assert lines
    for line in lines:
        script = ROOT / shlex.split(line)[1]
        source = script.read_text(encoding="utf-8")
        for flag in (a for a in shlex.split(line)[2:] if a.startswith("--")):
            assert f'"{flag}"' in source, (line, flag)
