"""Configs name a class one way: by the shortest import path along the module that defines it, the path jsonargparse
itself writes for a class (``jsonargparse._util.get_import_path``). A folder's front names it when the folder's
``__init__`` exports it (``lit_docemb.methods.DocSplit``, ``lit_docemb.data.WikipediaDataModule``), else its module
does (``lit_docemb.methods.deca_components.SimCLR``, ``lit_docemb.models.ctpe.WordEmbeddings``); never another
folder's front (``lit_docemb.methods.WordEmbeddings`` for a ``models/`` class resolves, for old run folders, but is
not written). Every YAML under ``configs/`` and ``grids/`` and every doc under ``docs/`` is held to it."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
from jsonargparse._util import get_import_path

ROOT = Path(__file__).resolve().parents[2]
#: A dotted name in the package whose last part is capitalised: a class, as configs and commands name one.
CLASS_NAME = re.compile(r"\blit_docemb(?:\.[a-z_]\w*)*\.[A-Z]\w*")
#: Docs may name what an exported folder's ``modules.json`` holds: sentence-transformers writes a module's own path.
NOT_CONFIG = ("lit_docemb.export.modules.",)


def class_names(text: str) -> list[str]:
    return sorted(set(CLASS_NAME.findall(text)))


def misnamed(name: str) -> str | None:
    """Why ``name`` breaks the rule (it does not resolve to a class, or the rule spells it otherwise), or None."""
    module, _, attribute = name.rpartition(".")
    try:
        value = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        return f"{name} does not resolve ({error})"
    if not inspect.isclass(value):
        return f"{name} is not a class"
    wanted = get_import_path(value)
    return None if wanted == name else f"{name} is written {wanted}"


def shipped_files() -> list[Path]:
    files = [p for folder in ("configs", "grids") for p in (ROOT / folder).rglob("*.y*ml")]
    return sorted(files + list((ROOT / "docs").rglob("*.md")))


@pytest.mark.parametrize("path", [str(p.relative_to(ROOT)) for p in shipped_files()])
def test_every_class_path_is_written_as_the_rule_says_and_resolves(path):
    names = [n for n in class_names((ROOT / path).read_text(encoding="utf-8")) if not n.startswith(NOT_CONFIG)]
    assert [problem for problem in map(misnamed, names) if problem] == []


def test_configs_name_classes():
    """The check reads something: the shipped configs name the methods and DataModules they build."""
    names = {n for p in (ROOT / "configs").rglob("*.yaml") for n in class_names(p.read_text(encoding="utf-8"))}
    assert {"lit_docemb.methods.DocSplit", "lit_docemb.data.WikipediaDataModule",
            "lit_docemb.methods.deca_components.SimCLR", "lit_docemb.models.ctpe.WordEmbeddings"} <= names


def test_the_rule_refuses_another_folders_front_a_module_path_behind_a_front_and_a_typo():
    assert misnamed("lit_docemb.methods.DocSplit") is None
    assert misnamed("lit_docemb.methods.WordEmbeddings") == \
        "lit_docemb.methods.WordEmbeddings is written lit_docemb.models.ctpe.WordEmbeddings"
    assert misnamed("lit_docemb.methods.docsplit.DocSplit") == \
        "lit_docemb.methods.docsplit.DocSplit is written lit_docemb.methods.DocSplit"
    assert misnamed("lit_docemb.methods.DocSplitt").startswith("lit_docemb.methods.DocSplitt does not resolve")
    assert class_names("a: lit_docemb.data.Foo, b: lit_docemb.data.core.batches.token_counts") == \
        ["lit_docemb.data.Foo"]
