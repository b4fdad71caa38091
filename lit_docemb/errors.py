"""The errors ``python -m lit_docemb`` reports in one line, ``error: <message>``, with exit status 2, instead of a
traceback (as jsonargparse reports an unknown key or a wrong type).

:class:`ConfigError`: a configuration that cannot run, raised before training starts (a DataModule's
``prepare_data``, a method's ``setup``) when a config names a missing file or combines options that cannot work
together; its message names the config key and the fix. :class:`DiskFull`: a checkpoint or an output that found no
space left on its device, raised by :func:`staged_write` once the partial file is gone; its message names the file
and what was kept.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path


class ConfigError(ValueError):
    """A config that cannot run: the message names the key (``data.init_args.root``) and how to fix it."""


class BadArgument(ConfigError):
    """A bad value of one ``__init__`` argument, named relative to its class (``temperature: must be > 0, got -1``).

    A class cannot know where a config put it; the CLI re-raises this under the section that was building the class
    (:meth:`under`: ``model.init_args.temperature: ...``). A loss built by a method from the method's own argument
    of the same name is reported under the method's key.
    """

    def __init__(self, argument: str, problem: str) -> None:
        self.argument, self.problem = argument, problem
        super().__init__(f"{argument}: {problem}")

    def under(self, section: str) -> ConfigError:
        """The same error under ``<section>.init_args.<argument>`` (``section``: ``model``, ``data``)."""
        return ConfigError(f"{section}.init_args.{self.argument}: {self.problem}")


def require(ok: bool, argument: str, requirement: str, value) -> None:
    """Raises :class:`BadArgument` ``<argument>: must be <requirement>, got <value>`` unless ``ok``."""
    if not ok:
        raise BadArgument(argument, f"must be {requirement}, got {value!r}")


class DiskFull(OSError):
    """No space left on the device (errno 28, ``ENOSPC``) while writing ``path``; nothing partial is left under
    that name, and ``kept`` says what is there instead (the previous file, the last complete checkpoint)."""

    def __init__(self, path: str | os.PathLike, kept: str) -> None:
        super().__init__(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
        self.kept = kept

    def __str__(self) -> str:
        return f"{self.filename}: no space left on device while writing it; {self.kept}"


#: The errors the command line prints as one line with exit status 2.
ONE_LINE_ERRORS = (ConfigError, DiskFull)


def is_disk_full(error: BaseException | None) -> bool:
    """Whether ``error`` or an error it was raised from or while handling is a full disk: an ``OSError`` 28, or
    its message from a writer that wraps it (torch's zip writer, safetensors, Arrow)."""
    pending, seen = [error], set()
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno == errno.ENOSPC or "No space left on device" in str(error):
            return True
        pending += [error.__cause__, error.__context__]
    return False


@contextlib.contextmanager
def staged_write(path: str | os.PathLike, kept: str | Callable[[], str] | None = None) -> Iterator[Path]:
    """Yields a temporary name in ``path``'s folder (``.<name>.<8 hex digits>.tmp``) to write a file or a folder
    under; when the block ends it is renamed to ``path`` (``os.replace``: a reader finds the previous file or the
    whole new one, never a part), and when the block raises it is removed. A folder that ``path`` already names
    keeps the entries the new one does not have (as writing into it would). A full disk (:func:`is_disk_full`)
    becomes :class:`DiskFull`, naming ``path`` and ``kept`` (called then, when it is a function; by default the
    previous file, or that nothing was written under that name).
    """
    path = Path(path)
    staged = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        yield staged
        if staged.is_dir() and path.is_dir() and not path.is_symlink():
            _replace_entries(staged, path)
        else:
            os.replace(staged, path)
    except BaseException as err:
        _remove(staged)
        if not is_disk_full(err) or isinstance(err, DiskFull):
            raise
        if callable(kept):
            kept = kept()
        previous = f"the previous {path.name} is kept" if os.path.lexists(path) else "nothing is written under it"
        raise DiskFull(path, kept or previous) from err


def write_whole_text(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` (UTF-8) to ``path`` through :func:`staged_write`: the previous file or the whole new one."""
    with staged_write(path) as staged:
        staged.write_text(text, encoding="utf-8")


def _replace_entries(staged: Path, folder: Path) -> None:
    """Moves each entry of the folder ``staged`` over the one of the same name in ``folder``, then removes it."""
    for entry in sorted(staged.iterdir()):
        target = folder / entry.name
        if entry.is_dir() and target.is_dir() and not target.is_symlink():
            _replace_entries(entry, target)
        else:
            if os.path.lexists(target) and (entry.is_dir() or target.is_dir() and not target.is_symlink()):
                _remove(target)  # os.replace puts a file over a file, a folder only over an empty folder
            os.replace(entry, target)
    staged.rmdir()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink()
