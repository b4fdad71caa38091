"""A typed block of options that a method takes as one argument (``model.init_args.<key>``) and saves as plain data.

:class:`~lit_docemb.models.EncoderSpec` (``encoder:``) and :class:`~lit_docemb.data.PassageSpec` (``passages:``) are
such blocks: plain classes whose typed, defaulted ``__init__`` arguments are the block's keys, so jsonargparse reads
the block as the class's arguments and a command line overrides one of them (``--model.init_args.passages.
words_per_passage 6``). A method saves a block in its hyperparameters as :meth:`ConfigBlock.hyperparameters`, the
``class_path`` / ``init_args`` form LightningCLI writes, never as the object, so checkpoints stay weights-only;
:meth:`ConfigBlock.of` rebuilds the block from that data.
"""

from __future__ import annotations

import inspect
import typing
from typing import ClassVar, TypeVar

from lit_docemb.errors import BadArgument

Block = TypeVar("Block", bound="ConfigBlock")


class ConfigBlock:
    """Base of a config block: its subclass sets :attr:`key` and :attr:`class_path` and takes its keys as
    ``__init__`` arguments, each kept as the attribute of the same name."""

    #: The block's config key under ``model.init_args``: its errors name ``<key>.<argument>``.
    key: ClassVar[str]
    #: The import path of the class that configs and saved hyperparameters name.
    class_path: ClassVar[str]

    @classmethod
    def of(cls: type[Block], value: Block | dict) -> Block:
        """The block itself, or the block that plain data describes: its :meth:`hyperparameters` (a checkpoint's
        ``class_path`` / ``init_args`` form) or its arguments as a dict."""
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return cls(**value.get("init_args", value))
        names = ", ".join(inspect.signature(cls).parameters)
        raise BadArgument(cls.key, f"expected a block of {names}, got {value!r}")

    @classmethod
    def key_of(cls, argument: str) -> str:
        """The name errors give one of the block's arguments: ``<key>.<argument>``."""
        return f"{cls.key}.{argument}"

    def arguments(self) -> dict:
        """The block's arguments, as plain values."""
        return {name: getattr(self, name) for name in inspect.signature(type(self)).parameters}

    def hyperparameters(self) -> dict:
        """The block as plain data, in the ``class_path`` / ``init_args`` form LightningCLI saves."""
        return {"class_path": self.class_path, "init_args": self.arguments()}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.arguments() == self.arguments()

    def __hash__(self) -> int:
        return hash(tuple(self.arguments().items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.arguments().items())})"


def block_option(cls, option: str) -> str | None:
    """``<argument>.<option>`` when ``option``, not an argument of the class ``cls``, is one of a config block that
    ``cls`` takes as ``argument`` (``passages.words_per_passage`` written flat under Graph-RoBERTa, as before it took
    the block), else None: what an error about the unknown option can point to."""
    try:
        hints = typing.get_type_hints(cls.__init__) if isinstance(cls, type) else {}
    except (NameError, TypeError):
        return None
    for argument, hint in hints.items():
        blocks = [t for t in (hint, *typing.get_args(hint)) if isinstance(t, type) and issubclass(t, ConfigBlock)]
        if any(option in inspect.signature(block).parameters for block in blocks):
            return f"{argument}.{option}"
    return None
