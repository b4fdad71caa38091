"""docs/reproduce.md cannot rot: every ``python -m lit_docemb`` command in its ```bash fences, whatever section, is
parsed against the code.

* ``fit``/``validate``/``test``/``predict``: the whole command line with ``--print_config`` (configs, overrides and
  class switches parsed as a run parses them; data paths need not exist).
* every other command: its options must be among those its ``--help`` lists (a ``grid`` file must read, and its
  ``--rows`` / ``--columns`` name its rows and columns); what is left must be config overrides
  of a command that takes them, parsed with the command's ``--config`` files through ``fit --print_config``; each
  ``--evaluation`` spec is built.

Shell loops are followed: a ``$variable`` takes each value its ``for`` line lists (the first one for the full
parse, every one for the config files named). Commands outside a fence are refused.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
from pathlib import Path

import pytest
import yaml
from benchmark_scripts import benchmark_module

from lit_docemb.commands import main as run_command
from lit_docemb.commands import main as cli_main
from lit_docemb.commands.evaluate import build_evaluation
from lit_docemb.commands.grid import read_grid, select
from lit_docemb.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "reproduce.md"
PREFIX = ("python", "-m", "lit_docemb")
LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")
#: Commands whose unknown options are config overrides (they parse with ``parse_known_args`` and hand the rest on).
TAKES_OVERRIDES = ("evaluate", "dense-search", "embed", "export", "word-vectors")
FENCE = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
LOOP = re.compile(r"^\s*for (\w+) in (.+?); do\s*$")
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def doc_commands(text: str) -> list[tuple[list[str], dict[str, list[str]]]]:
    """(argv after ``python -m lit_docemb``, the loop variables in scope) of every fenced command, in order."""
    commands = []
    for block in FENCE.findall(text):
        loops: list[tuple[str, list[str]]] = []
        for line in block.replace("\\\n", " ").splitlines():
            if match := LOOP.match(line):
                loops.append((match.group(1), match.group(2).split()))
            elif line.strip() == "done":
                loops.pop()
            elif "python -m lit_docemb" in line:
                tokens = shlex.split(line)
                assert tuple(tokens[:3]) == PREFIX, f"a command must start its line: {line.strip()!r}"
                commands.append((tokens[3:], dict(loops)))
    return commands


def expansions(argv: list[str], variables: dict[str, list[str]]) -> list[list[str]]:
    """``argv`` with its ``$variables`` replaced, once per combination of their loop values (the first first)."""
    used = sorted({a or b for token in argv for a, b in VARIABLE.findall(token)})
    missing = [name for name in used if name not in variables]
    assert not missing, f"${missing[0]} in {shlex.join(argv)!r} is set by no enclosing for loop"
    return [[VARIABLE.sub(lambda m, values=dict(zip(used, combination)): values[m.group(1) or m.group(2)], token)
             for token in argv] for combination in itertools.product(*(variables[name] for name in used))]


def exits_cleanly(call, argv: list[str]) -> str:
    """stdout of ``call(argv)``, which must end with status 0 (``--help``, ``--print_config``)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        call(argv)
    assert exit_info.value.code in (0, None), f"{shlex.join(argv)!r} exited with {exit_info.value.code}"
    return out.getvalue()


_help_options: dict[str, set[str]] = {}


def known_options(command: str) -> set[str]:
    if command not in _help_options:
        _help_options[command] = set(re.findall(r"(?<![\w.-])(--[A-Za-z][\w-]*)", exits_cleanly(
            run_command, [command, "--help"])))
    return _help_options[command]


def split_options(argv: list[str], known: set[str]) -> tuple[dict[str, list[str]], list[str]]:
    """({known option: its values}, the other options with their values) of a command line."""
    options: dict[str, list[str]] = {}
    rest: list[str] = []
    current: list[str] | None = None
    for token in argv:
        if token.startswith("--"):
            name, equals, value = token.partition("=")
            if name in known:
                current = options.setdefault(name, [])
                current += [value] if equals else []
            else:
                rest.append(token)
                current = rest
        else:
            assert current is not None, f"a value before any option: {shlex.join(argv)!r}"
            current.append(token)
    return options, rest


def check_command(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command in LIGHTNING_COMMANDS:
        exits_cleanly(cli_main, [command, *args, "--print_config"])
        return
    known = known_options(command)
    options, overrides = split_options(args, known)
    assert not overrides or command in TAKES_OVERRIDES, f"{command} has no options {overrides}"
    for spec in options.get("--evaluation", []):
        build_evaluation(spec)
    if command == "grid":  # the grid file reads, and --rows / --columns name its rows and columns
        select(read_grid(ROOT / options["--input"][0]), options.get("--rows"), options.get("--columns"))
    configs = [arg for path in options.get("--config", []) for arg in ("--config", path)]
    if "--run_dir" in options and not configs:  # the run's config.yaml, written by its fit, is not in the repository
        return
    if configs or overrides:
        exits_cleanly(cli_main, ["fit", *configs, *overrides, "--print_config"])


TEXT = DOCUMENT.read_text(encoding="utf-8")
COMMANDS = doc_commands(TEXT)


def test_the_document_has_both_papers_and_leaves_the_other_headings_to_part_two():
    headings = re.findall(r"^## (.+)$", TEXT, re.MULTILINE)
    assert headings[:2] == ["Graph-RoBERTa", "DocSplit"]
    assert len(COMMANDS) >= 20


def test_commands_are_in_bash_fences():
    outside = FENCE.sub("", TEXT)
    stray = re.findall(r"python -m lit_docemb (?!\.\.\.)\S+", outside)
    assert not stray, f"commands outside a ```bash fence: {stray[:3]}"


def test_every_documented_reproduce_deca_command_parses():
    """The fenced ``python benchmarks/reproduce_deca.py`` commands keep to the script's options."""
    commands = [shlex.split(line)[2:] for block in FENCE.findall(TEXT) for line in block.splitlines()
                if line.startswith("python benchmarks/reproduce_deca.py ")]
    assert len(commands) >= 10
    with benchmark_module("reproduce_deca") as bench:
        parser = bench.build_parser()
        for argv in commands:
            parser.parse_args(argv)  # an unknown option or a bad choice exits 2


@pytest.mark.parametrize("argv, variables", COMMANDS, ids=[f"{i}-{c[0][0]}" for i, c in enumerate(COMMANDS)])
def test_every_documented_command_parses(argv, variables):
    first, *others = expansions(argv, variables)
    check_command(first)
    for expanded in others:  # the other loop values: the files they name exist
        options, _ = split_options(expanded[1:], {"--config"})
        for path in options.get("--config", []):
            assert (ROOT / path).is_file(), f"{path} (in {shlex.join(expanded)!r}) does not exist"


def test_a_wrong_option_or_config_key_is_caught():
    """The checks can fail: a misspelt override, an unknown evaluation and an option a command lacks."""
    with pytest.raises(AssertionError):
        check_command(["fit", "--config", "configs/graph_roberta/classify_arxiv.yaml", "--data.init_args.sourse", "x"])
    with pytest.raises(TypeError):
        check_command(["evaluate", "--config", "configs/graph_roberta/retrieval_wikir.yaml", "--evaluation", "retreival"])
    with pytest.raises(AssertionError):
        check_command(["pool-folds", "--runs", "a.run", "--qrels", "q", "--measure", "P@20"])
    with pytest.raises(ConfigError, match="--rows: 'Table9'"):
        check_command(["grid", "--input", "grids/docsplit_table2_few_shot.yaml", "--rows", "Table9"])
    with pytest.raises(AssertionError, match="set by no enclosing for loop"):
        expansions(["fit", "--config", "configs/$nothing.yaml"], {})


def resolved_model(argv: list[str]) -> dict:
    """The model section (encoder, max_length, ...) that a documented command runs with, as ``--print_config`` gives it."""
    command, args = argv[0], argv[1:]
    if command in LIGHTNING_COMMANDS:
        return yaml.safe_load(exits_cleanly(cli_main, [command, *args, "--print_config"]))["model"]
    options, overrides = split_options(args, known_options(command))
    configs = [arg for path in options.get("--config", []) for arg in ("--config", path)]
    return yaml.safe_load(exits_cleanly(cli_main, ["fit", *configs, *overrides, "--print_config"]))["model"]


def long_encoder_commands(first_heading: str, next_heading: str) -> list[list[str]]:
    """Every expansion of the commands between two headings that names a Longformer or BigBird checkpoint."""
    section = TEXT[TEXT.index(first_heading):TEXT.index(next_heading)]
    return [expanded for argv, variables in doc_commands(section) for expanded in expansions(argv, variables)
            if re.search(r"longformer|bigbird", " ".join(expanded))]


@pytest.mark.parametrize("first_heading, next_heading, tokens", [
    ("### Table 1: classification (accuracy, macro-F1) and Table 2", "### §4.4", 512),  # DocSplit Appendix A.1
    ("### Table 1: clustering", "### Table 3: Robust04", 4096),  # Graph-RoBERTa §3.2
], ids=["docsplit_tables_1_2", "graph_roberta_tables_1_2"])
def test_longformer_and_bigbird_rows_read_the_length_their_paper_gives(first_heading, next_heading, tokens):
    """DocSplit's classification and few-shot rows read 512 tokens for every model ("the maximum sequence length is
    512 tokens", Appendix A.1, the same for Table 2), DocSplit_long, Longformer and BigBird included; Graph-RoBERTa's
    baselines read 4,096 ("Longformer and BigBird's maximum input length is 4,096", §3.2)."""
    checked = 0
    for argv in long_encoder_commands(first_heading, next_heading):
        model = resolved_model(argv)["init_args"]
        method = model["backbone"]["init_args"] if "backbone" in model else model
        encoder = method["encoder"]["init_args"]
        if re.search(r"longformer|bigbird", encoder["name"]):
            assert encoder["max_length"] == tokens, f"{shlex.join(argv)!r} reads {encoder['max_length']} tokens"
            checked += 1
    assert checked >= 10


#: Every spelling of a key that ``--run_dir`` sets: trainer.default_root_dir and a logger's folder keys, with or
#: without ``init_args`` (jsonargparse reads ``--trainer.logger.save_dir`` as the init_args key), of one logger or
#: of one in a list (``--trainer.logger[0]...``).
LONG_KEYS = re.compile(r"--trainer\.(?:default_root_dir|logger(?:\[\d+\])?\.(?:init_args\.)?(?:save_dir|name|version))\b")
#: A command that reads a run given by its folder's files (``--config runs/x/config.yaml``) or by figures' older
#: ``--run``. (A checkpoint scored under another task's config keeps ``--config configs/... --ckpt_path``.)
RUN_SPELT_OUT = re.compile(r"lit_docemb (?:evaluate|embed|export|figures|interpolate|dense-search|matching|candidates)"
                           r"\b.*(?:--config runs/\S*config\.yaml|--run )")
TEXTS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", *sorted((ROOT / "configs").rglob("*.yaml"))]


def found_in_texts(pattern: re.Pattern) -> list[str]:
    """``path:line`` of each line of the docs, README and configs (a command's continued lines joined) matching."""
    found = []
    for path in TEXTS:
        text = re.sub(r"\\\n#?\s*", " ", path.read_text(encoding="utf-8"))  # a command continued with \\
        found += [f"{path.relative_to(ROOT)}:{number}" for number, line in enumerate(text.splitlines(), 1)
                  if pattern.search(line)]
    return found


def test_documented_runs_name_their_folder_with_run_dir():
    """A documented run that is not a config's default names its folder once, ``--run_dir runs/x``, never with the
    long keys it sets (trainer.default_root_dir, the logger's save_dir, name and version, however spelt)."""
    found = found_in_texts(LONG_KEYS)
    assert not found, f"use --run_dir instead of the long keys: {found[:5]}"
    assert any("--run_dir runs/" in argv for argv in (shlex.join(a) for a, _ in COMMANDS))


@pytest.mark.parametrize("spelling", ["--trainer.default_root_dir runs/x", "--trainer.logger.save_dir runs/x",
                                      "--trainer.logger.init_args.save_dir=runs/x", "--trainer.logger.name x",
                                      "--trainer.logger[1].init_args.version 3", "--trainer.logger.version 3"])
def test_every_spelling_of_a_logger_folder_is_caught(spelling):
    assert LONG_KEYS.search(f"python -m lit_docemb fit --config A.yaml {spelling}")


def test_documented_commands_read_a_run_with_run_dir():
    """A command that reads a trained run names it once, ``--run_dir runs/x`` (its config.yaml and
    checkpoints/last.ckpt), not as ``--config runs/x/config.yaml --ckpt_path runs/x/checkpoints/last.ckpt``."""
    found = found_in_texts(RUN_SPELT_OUT)
    assert not found, f"use --run_dir runs/<run>: {found[:5]}"
    assert RUN_SPELT_OUT.search("python -m lit_docemb evaluate --config runs/x/config.yaml --ckpt_path k")
    assert RUN_SPELT_OUT.search("python -m lit_docemb interpolate --config runs/x/config.yaml")
    assert RUN_SPELT_OUT.search("python -m lit_docemb figures --run runs/x")
    assert not RUN_SPELT_OUT.search("python -m lit_docemb evaluate --run_dir runs/x --before_after")
