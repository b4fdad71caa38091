"""The error of a configuration that cannot run.

Raised before training starts (a DataModule's ``prepare_data``, a method's ``setup``) when a config names a
missing file or combines options that cannot work together. Its message names the config key and the fix, in
one line; ``python -m lit_docemb`` prints it as ``error: <message>`` and exits with status 2, as jsonargparse does
for an unknown key or a wrong type, instead of a traceback.
"""

from __future__ import annotations


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
