"""Configs are data: what a config may instantiate, checked before anything is built.

Every config lit_docemb reads (``fit``/``validate``/``test``/``predict``, ``evaluate``, ``embed``, ``export``,
``figures``, ``dense-search``, ``matching``, a run folder's ``config.yaml``) names classes and callables by import
path. :func:`refuse_untrusted` walks a config, raw or parsed, and accepts only paths under :data:`TRUSTED` plus the
prefixes a user adds with ``LIT_DOCEMB_ALLOW=mypkg.callbacks,other.mod``: every ``class_path`` at any depth (also
inside loosely typed ``dict``/``Any`` arguments such as ``RichProgressBar(console_kwargs=...)``) and every class
or function jsonargparse already resolved from a string (a ``Callable`` argument, ``--trainer.callbacks+=X``). A
refused path stops the command with :class:`~lit_docemb.errors.ConfigError` naming the key and the path. YAML is
read with the safe loader only (:func:`load_yaml`): ``!!python/...`` tags are refused with the file's name.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import Namespace
from jsonargparse._util import import_object

from lit_docemb.errors import ConfigError

#: Module prefixes whose classes and callables a config may name.
TRUSTED = ("lit_docemb", "torch.optim", "lightning.pytorch.loggers", "lightning.pytorch.callbacks",
           "lightning.pytorch.strategies", "lightning.pytorch.plugins", "lightning.pytorch.profilers",
           "lightning.fabric.plugins")
ALLOW_ENV = "LIT_DOCEMB_ALLOW"


def allowed_prefixes() -> tuple[str, ...]:
    """:data:`TRUSTED` plus the comma-separated module prefixes in ``$LIT_DOCEMB_ALLOW``."""
    extra = [p.strip() for p in os.environ.get(ALLOW_ENV, "").split(",") if p.strip()]
    return TRUSTED + tuple(extra)


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _refuse(key: str, path: str) -> ConfigError:
    return ConfigError(f"{key}: {path} is not allowed in a config (allowed: {', '.join(TRUSTED)}); "
                       f"to trust it, set {ALLOW_ENV}={path.rsplit('.', 1)[0] if '.' in path else path}")


def check_class_path(key: str, path: str) -> None:
    """Refuses ``path`` (an import path from a config at ``key``) unless it and what it resolves to lie under the
    allowed prefixes. A bare name (``ModelCheckpoint``) is left to jsonargparse, which resolves it only among the
    subclasses of the argument's declared type; a re-export (``lit_docemb.x.os.system``) is refused by the module
    of the object it names."""
    if not isinstance(path, str):
        raise ConfigError(f"{key}: a class_path must be an import path string, got {type(path).__name__}")
    if "." not in path:
        return
    prefixes = allowed_prefixes()
    if not _under(path, prefixes):
        raise _refuse(key, path)
    try:  # imports only modules under an allowed prefix
        target = import_object(path)
    except (ImportError, AttributeError, ValueError):
        return  # jsonargparse reports the unknown path itself, in one line
    _check_object(key, target, prefixes)


def _check_object(key: str, target: Any, prefixes: tuple[str, ...]) -> None:
    module = getattr(target, "__module__", None)
    name = f"{module}.{getattr(target, '__qualname__', type(target).__name__)}"
    if not isinstance(module, str) or not _under(module, prefixes):
        raise _refuse(key, name)


def _is_code(value: Any) -> bool:
    """A class or a function/method/partial: something a config may have had resolved from an import string."""
    return isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                              functools.partial))


def refuse_untrusted(config: Any, key: str = "") -> None:
    """Walks a config (dicts, lists, jsonargparse Namespaces) and raises :class:`ConfigError` at the first
    ``class_path`` or resolved class/function not allowed (see the module docstring); ``key`` prefixes the
    dotted key named in the message."""
    if isinstance(config, Namespace):
        config = config.as_dict()
    if isinstance(config, Mapping):
        for name, value in config.items():
            child = f"{key}.{name}" if key else str(name)
            if name == "class_path":
                check_class_path(child, value)
            else:
                refuse_untrusted(value, child)
    elif isinstance(config, (list, tuple)):
        for i, value in enumerate(config):
            refuse_untrusted(value, f"{key}[{i}]")
    elif _is_code(config):
        if isinstance(config, __import__("functools").partial):
            config = config.func
        _check_object(key or "config", config, allowed_prefixes())


def load_yaml(path: str | Path) -> Any:
    """The YAML file at ``path`` read with the safe loader (no ``!!python`` tags), its class paths checked by
    :func:`refuse_untrusted`; an unreadable or unsafe file is a :class:`ConfigError` naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config ({err.strerror or err}); check the path") from err
    config = parse_yaml(text, str(path))
    refuse_untrusted(config)
    return config


def parse_yaml(text: str, source: str) -> Any:
    """``text`` parsed with the safe loader; a ``!!python`` tag or broken YAML is a one-line ConfigError."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        tag = " (a YAML tag that builds Python objects is never read)" if "python/" in str(err) else ""
        raise ConfigError(f"{source}{line}: not a plain YAML config: {problem}{tag}") from err
