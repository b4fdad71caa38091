"""Old import paths of moved modules and names still work, with a DeprecationWarning naming the new place."""

from __future__ import annotations

import importlib
import warnings

import pytest

from lit_docemb._moved import MOVED_MODULES, MOVED_NAMES


def _public_names(module) -> list[str]:
    return [n for n in getattr(module, "__all__", dir(module)) if not n.startswith("_")
            and getattr(getattr(module, n), "__module__", None) == module.__name__][:3]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_moved_module_imports_and_warns(old):
    new = importlib.import_module(MOVED_MODULES[old])
    names = [n for n in _public_names(new) if n not in MOVED_NAMES.get(old, {})] or sorted(MOVED_NAMES[old])[:1]
    module = importlib.import_module(old)
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to"):
            value = getattr(module, name)
        home, _, new_name = MOVED_NAMES.get(old, {}).get(name, MOVED_MODULES[old]).partition(":")
        assert value is getattr(importlib.import_module(home), new_name or name)


@pytest.mark.parametrize("old,name", sorted((m, n) for m, names in MOVED_NAMES.items() for n in names))
def test_a_moved_name_resolves_to_its_new_home(old, name):
    module = importlib.import_module(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(module, name)
    home, _, new_name = MOVED_NAMES[old][name].partition(":")
    assert value is getattr(importlib.import_module(home), new_name or name)
    # a module that still imports the name for its own use gives it without a warning
    assert name in vars(module) or any("moved to" in str(w.message) for w in caught)


def test_unknown_names_still_raise_attribute_error():
    module = importlib.import_module("lit_docemb.callbacks")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            module.NoSuchThing  # noqa: B018
        with pytest.raises(AttributeError):
            module.__path__  # noqa: B018  (not a package: the import system must not be told otherwise)


def test_an_old_class_path_in_a_config_still_builds(tmp_path):
    """A run folder's config.yaml written before the move names ``lit_docemb.callbacks.RunCheckpoint``."""
    from jsonargparse import ArgumentParser
    from lightning.pytorch.callbacks import Callback

    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--callback", type=Callback)
    with pytest.warns(DeprecationWarning):
        config = parser.parse_args(["--callback", '{"class_path": "lit_docemb.callbacks.RunCheckpoint", '
                                    '"init_args": {"monitor": "val/loss"}}'])
        built = parser.instantiate_classes(config).callback
    from lit_docemb.methods.callbacks import RunCheckpoint

    assert type(built) is RunCheckpoint and built.monitor == "val/loss"
