"""LightningCLI's ``--help`` for ``fit``/``validate``/``test``/``predict``, kept after its first answer.

Building that help imports Lightning (about 5 s of CPU: Lightning imports torch, torch._dynamo and all of
torchmetrics), so ``python -m lit_docemb fit --help`` is slow the first time. Its text depends only on the installed
packages and on lit_docemb's own code, so the dispatcher keeps it in a cache keyed by both and prints it from there
afterwards without importing torch. Only a bare ``<command> --help`` is cached: with ``--config`` or other arguments
the help is built as usual. The cache folder is ``$LIT_DOCEMB_CACHE``, else ``$XDG_CACHE_HOME/lit_docemb``, else
``~/.cache/lit_docemb``; a folder that cannot be written only means the help is built each time.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

#: The distributions whose versions change LightningCLI's help.
HELP_DISTRIBUTIONS = ("lightning", "jsonargparse", "torch", "transformers", "docstring-parser", "typeshed-client")


def cache_folder() -> Path:
    configured = os.environ.get("LIT_DOCEMB_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lit_docemb"


def help_key(command: str) -> str:
    """A digest of the command, the Python and package versions, and the bytes of lit_docemb's source files."""
    digest = hashlib.sha256(f"{command}\n{sys.version}\n".encode())
    for name in HELP_DISTRIBUTIONS:
        try:
            digest.update(f"{name}={metadata.version(name)}\n".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=absent\n".encode())
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def help_path(command: str) -> Path:
    return cache_folder() / f"help-{command}-{help_key(command)}.txt"


def print_help(command: str, build: Callable[[], object]) -> None:
    """Prints ``command``'s help from the cache, or runs ``build`` (which prints it and exits 0) and keeps what it
    printed. Exits like ``--help`` does."""
    path = help_path(command)
    if path.is_file():
        sys.stdout.write(path.read_text(encoding="utf-8"))
        raise SystemExit(0)
    printed, stdout = io.StringIO(), sys.stdout
    sys.stdout = printed
    try:
        build()
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    finally:
        sys.stdout = stdout
    text = printed.getvalue()
    sys.stdout.write(text)
    with contextlib.suppress(OSError):  # a cache folder that cannot be written: the help is built each time
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(text, encoding="utf-8")
        staged.replace(path)
    raise SystemExit(0)
