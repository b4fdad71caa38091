"""A bad value of a class that a config section builds, named by its full key: :class:`SectionNaming` wraps the
instantiators of ``fit`` (:class:`~lit_docemb.commands.cli.DocEmbCLI`) and of the commands that build a run's method
(:func:`~lit_docemb.commands.loading.build_method`), so that a :class:`~lit_docemb.errors.BadArgument`, which names
an argument relative to its class, reaches the user as one line under the key the config gives it
(``model.init_args.backbone.init_args.temperature: must be > 0, got -1``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from lit_docemb.config_block import ConfigBlock
from lit_docemb.errors import BadArgument, ConfigError


def owner_key(section: dict, section_key: str, class_type: type) -> str:
    """The key of the config node that an error of building ``class_type`` is relative to, in ``section`` (a parsed
    config section, ``class_path`` / ``init_args`` dicts, under ``section_key``): the node that names the class (a
    method nested as another's ``backbone``: ``model.init_args.backbone``), or for a :class:`ConfigBlock` the node
    that holds it (its errors already start with the block's key). ``section_key`` itself when the class is the
    section's or is named at more than one place."""
    found, todo = [], [("", section)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, dict):
            if str(node.get("class_path", "")).rpartition(".")[2] == class_type.__name__:
                found.append(path)
            todo += [(f"{path}.{key}", value) for key, value in node.items()]
        elif isinstance(node, list):
            todo += [(f"{path}.{index}", value) for index, value in enumerate(node)]
    if len(found) != 1:
        return section_key
    path = found[0].rpartition(".init_args.")[0] if issubclass(class_type, ConfigBlock) else found[0]
    return section_key + path


def build_plainly(class_type, *args, applied_instantiation_links: dict | None = None, **kwargs):
    """jsonargparse's default instantiation (``class_type(*args, **kwargs)``), for :class:`SectionNaming`."""
    return class_type(*args, **kwargs)


class SectionNaming:
    """Builds a class of one config section (``model``, ``data``) with ``instantiator``, turning a
    :class:`~lit_docemb.errors.BadArgument` of its ``__init__`` (or of a loss or encoder it builds from that
    argument) into a :class:`ConfigError` under the section's key: ``model.init_args.temperature: ...``; with
    ``parsed`` (what gives the parsed section), a class nested in the section is named where it is
    (``model.init_args.backbone.init_args.temperature``, :func:`owner_key`)."""

    def __init__(self, instantiator, section: str, parsed: Callable[[], object] | None = None) -> None:
        self.instantiator, self.section, self.parsed = instantiator, section, parsed

    def __call__(self, class_type, *args, applied_instantiation_links: dict | None = None, **kwargs):
        try:
            return self.instantiator(class_type, *args, applied_instantiation_links=applied_instantiation_links,
                                     **kwargs)
        except BadArgument as err:
            section = self.parsed() if self.parsed else None
            section = section.as_dict() if hasattr(section, "as_dict") else {}
            raise err.under(owner_key(section, self.section, class_type)) from None


@contextlib.contextmanager
def unwrapped_config_errors() -> Iterator[None]:
    """Around an instantiation: a :class:`ConfigError` that jsonargparse wrapped in its own report (a ``ValueError``
    or ``TypeError``, :func:`config_error_in`) is raised as itself; any other error as it was."""
    try:
        yield
    except (ValueError, TypeError) as err:
        found = config_error_in(err)
        if found is None:
            raise
        raise found from None


def config_error_in(err: BaseException) -> ConfigError | None:
    """The :class:`ConfigError` that ``err`` is, or that caused it (jsonargparse re-raises an error of a class's
    ``__init__`` as "Does not validate against any of the Union subtypes"), else None."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, ConfigError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None
