"""The package's floors (docs/architecture.md), kept by walking every import with ``ast``.

A module may import its own floor and the floors below it, never a higher one; only ``lit_docemb/distributed.py``
imports ``torch.distributed``; ``models/`` and ``losses/`` import no Lightning; no two modules import each other
(directly or through others) at import time. Imports inside functions count as much as those at the top.
``commands/`` (entry points only) defines no ``nn.Module`` and no Lightning ``Callback``; ``views/`` (CPU-only
collators) neither defines nor imports an ``nn.Module``. Above the data floor no code tests whether a DataModule is
a ``RetrievalDataModule``: it asks the DataModule instead. ``commands/`` imports the package's own modules at the top
only (a command's ``--help`` reads its signature from the source, not from an import). Every module of ``views/`` and
``export/`` has its own test file under ``tests/`` (``tests/views/test_colde_views.py`` for ``views/colde.py``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lit_docemb"

#: Top-level part of a module path -> floor. ``lit_docemb`` itself (its ``__init__``) is floor 0.
FLOORS = {"": 0, "distributed": 0, "errors": 0, "config_block": 0,
          "data": 1, "losses": 1, "models": 1, "augment": 1,
          "views": 2, "methods": 3, "eval": 4, "export": 4, "commands": 5, "__main__": 5}
NO_LIGHTNING = ("models", "losses")
DISTRIBUTED_HOME = "lit_docemb.distributed"


def module_name(path: Path, root: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def floor_of(module: str) -> int:
    part = module.split(".")[1] if module.count(".") else ""
    if part not in FLOORS:
        raise KeyError(f"{module}: no floor for '{part}' (add it to FLOORS and docs/architecture.md)")
    return FLOORS[part]


def imports_of(path: Path, module: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, at import time) for every import in ``path``; ``from a import b`` names
    ``a.b`` (a submodule or a name of ``a``, resolved by the caller)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = from_base(node, path, module)
            found += [(f"{base}.{alias.name}" if base else alias.name, node.lineno, id(node) in top)
                      for alias in node.names]
            found.append((base, node.lineno, id(node) in top))
    return found


def from_base(node: ast.ImportFrom, path: Path, module: str) -> str:
    """The absolute module a ``from ... import`` of ``module`` (at ``path``) imports from."""
    base = node.module or ""
    if node.level:  # relative import
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    return base


def known_module(target: str, modules) -> str | None:
    """``target`` or the nearest package above it that is one of ``modules`` (``a.b.name`` -> ``a.b``), if any."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def scan(root: Path) -> dict[str, list]:
    """The violations found in package ``root``: upward imports, torch.distributed importers, Lightning in
    models/losses and import-time cycles."""
    modules = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    name = root.name

    upward, distributed, lightning, graph = [], [], [], defaultdict(set)
    for module, path in modules.items():
        own = floor_of(module)
        found = imports_of(path, module)
        # ``from a import b`` also lists ``a``; ``a.b`` alone names what is imported (a submodule, or a name of ``a``)
        bases = {(t, n) for t, n, _ in found if any(o.startswith(t + ".") and m == n for o, m, _ in found)}
        for target, line, at_import in found:
            where = f"{path.relative_to(root.parent)}:{line}"
            if target == "torch.distributed" or target.startswith("torch.distributed."):
                if module != name + DISTRIBUTED_HOME[len("lit_docemb"):]:
                    distributed.append(f"{where} imports {target}")
            if target.split(".")[0] in ("lightning", "pytorch_lightning") and module.count(".") \
                    and module.split(".")[1] in NO_LIGHTNING:
                lightning.append(f"{where} imports {target}")
            if not target.startswith(name + ".") and target != name:
                continue
            resolved = known_module(target, modules)
            if resolved is None or resolved == module:
                continue
            if floor_of(resolved) > own and not any(v.startswith(f"{where}: ") and v.endswith(
                    f"imports {resolved} (floor {floor_of(resolved)})") for v in upward):
                upward.append(f"{where}: {module} (floor {own}) imports {resolved} (floor {floor_of(resolved)})")
            if at_import and (target, line) not in bases:  # a package's __init__.py included
                graph[module].add(resolved)
    return {"upward": upward, "distributed": distributed, "lightning": lightning, "cycles": cycles(graph)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def violations() -> dict[str, list]:
    return scan(PACKAGE)


def test_no_module_imports_a_higher_floor(violations):
    assert violations["upward"] == []


def test_only_distributed_py_imports_torch_distributed(violations):
    assert violations["distributed"] == []


def test_models_and_losses_import_no_lightning(violations):
    assert violations["lightning"] == []


def test_no_import_cycles(violations):
    assert violations["cycles"] == []


def library_classes_in_commands(root: Path = PACKAGE) -> list[str]:
    """The ``nn.Module``s and Lightning ``Callback``s defined in a module of ``commands/`` (imported to see each
    class's bases, inherited ones too): an exported folder or a config would name such a class by a path that a
    re-layout of the entry points breaks, so they live on a library floor (``export/``, ``eval/``, ``methods/``)."""
    from lightning.pytorch.callbacks import Callback
    from torch import nn

    found = []
    for path in sorted((root / "commands").rglob("*.py")):
        module = importlib.import_module(module_name(path, root))
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__ \
                    and issubclass(value, (nn.Module, Callback)):
                found.append(f"{module.__name__}.{name}")
    return found


def model_classes_in_views(root: Path = PACKAGE) -> list[str]:
    """The ``nn.Module``s that a module of ``views/`` defines or imports, as ``module.name (from where)`` (imported to
    see each class's bases, inherited ones too). A view runs in dataloader workers, CPU-only: documents in, a batch
    out, through tokenizers and plain functions. A model class there, defined or imported to be built (a token-vector
    table, a frozen encoder), is model-side code on the wrong floor: it belongs in ``models/``."""
    from torch import nn

    found = []
    for path in sorted((root / "views").rglob("*.py")):
        module = importlib.import_module(module_name(path, root))
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, nn.Module):
                found.append(f"{module.__name__}.{name} (from {value.__module__})")
    return found


def model_modules_imported_by_views(root: Path = PACKAGE) -> list[str]:
    """The package's modules that define an ``nn.Module`` and that a module of ``views/`` imports, as ``view imports
    module (line)``: importing one runs model code in every dataloader worker, so what a collator needs (an edge
    list, a tokenizer) lives in a module without models (``data/core/passage_graph.py``)."""
    from torch import nn

    modules = {module_name(p, root) for p in root.rglob("*.py")}
    found = []
    for path in sorted((root / "views").rglob("*.py")):
        module = module_name(path, root)
        for target, line, _ in imports_of(path, module):
            target = known_module(target, modules)
            if target is None or target == module:
                continue
            defined = vars(importlib.import_module(target)).values()
            if any(inspect.isclass(v) and issubclass(v, nn.Module) and v.__module__ == target for v in defined):
                found.append(f"{module} imports {target} ({path.relative_to(root.parent)}:{line})")
    return sorted(set(found))


def test_views_import_no_module_that_defines_a_model():
    assert model_modules_imported_by_views() == []


def command_cycles(root: Path = PACKAGE) -> list[list[str]]:
    """Import cycles among the modules of ``commands/``, counting the imports inside functions too: a command's
    module imports the modules it builds on, never one that imports it back."""
    modules = {module_name(p, root): p for p in sorted((root / "commands").rglob("*.py"))}
    graph = defaultdict(set)
    for module, path in modules.items():
        for target, _, _ in imports_of(path, module):
            target = known_module(target, modules)
            if target and target != module:
                graph[module].add(target)
    return cycles(graph)


def test_no_import_cycles_among_commands_even_inside_functions():
    assert command_cycles() == []


def test_commands_define_no_module_and_no_callback():
    assert library_classes_in_commands() == []


def test_views_define_and_import_no_module():
    assert model_classes_in_views() == []


def type_tests_above_data(root: Path = PACKAGE, name: str = "RetrievalDataModule") -> list[str]:
    """The ``isinstance``/``issubclass`` calls outside ``data/`` whose class argument names ``name``: a command or an
    evaluation asks the DataModule (``setup_evaluation``, ``report_evaluation_reading``, ``ranked_split``), and
    each kind of DataModule answers for itself."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "data":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
                continue
            named = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node.args[1])
                     if isinstance(n, ast.Name | ast.Attribute)}
            if name in named:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_no_type_test_of_retrieval_datamodules_above_the_data_floor():
    assert type_tests_above_data() == []


def test_the_type_test_checker_finds_every_form(tmp_path):
    root = _package(tmp_path, {
        "data/retrieval.py": "def f(d):\n    return isinstance(d, RetrievalDataModule)\n",  # its own floor: allowed
        "eval/a.py": "def f(d):\n    return isinstance(d, RetrievalDataModule)\n",
        "commands/b.py": "def f(d):\n    x = 1\n    return not isinstance(d, (int, datamodule.RetrievalDataModule))\n",
        "commands/c.py": "def f(t):\n    return issubclass(t, RetrievalDataModule)\n",
        "commands/d.py": "def f(d):\n    return isinstance(d, DocumentDataModule)\n",  # another class: allowed
    })
    assert type_tests_above_data(root) == ["lit_docemb/commands/b.py:3", "lit_docemb/commands/c.py:2",
                                           "lit_docemb/eval/a.py:2"]


def test_every_folder_has_a_floor():
    for path in PACKAGE.rglob("*.py"):
        floor_of(module_name(path, PACKAGE))  # raises for a folder the floors do not name


def test_test_files_have_unique_names():
    """pytest imports test files by their base name (prepend mode): two ``test_x.py`` in different folders
    would collide."""
    names = [p.name for p in (PACKAGE.parent / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


#: Folders each of whose modules has its own test file in the same folder under tests/.
MIRRORED = ("views", "export")


def unmirrored_modules(package: Path, tests: Path, folders: tuple[str, ...] = MIRRORED) -> list[str]:
    """The modules ``<folder>/<name>.py`` of ``folders`` without a ``tests/<folder>/test_<name>_<folder>.py`` (the
    folder in the name keeps base names unique: ``test_colde_views.py`` beside ``tests/methods/test_colde.py``)."""
    return sorted(f"{folder}/{path.name}" for folder in folders for path in (package / folder).glob("*.py")
                  if path.stem != "__init__" and not (tests / folder / f"test_{path.stem}_{folder}.py").is_file())


def test_every_views_and_export_module_has_its_test_file():
    assert unmirrored_modules(PACKAGE, PACKAGE.parent / "tests") == []


def test_the_mirror_check_finds_a_module_without_its_test_file(tmp_path):
    package = _package(tmp_path, {"views/__init__.py": "", "views/a.py": "", "views/b.py": ""})
    (tmp_path / "tests" / "views").mkdir(parents=True)
    (tmp_path / "tests" / "views" / "test_a_views.py").write_text("")
    (tmp_path / "tests" / "views" / "test_b.py").write_text("")  # not the mirrored name
    assert unmirrored_modules(package, tmp_path / "tests", ("views",)) == ["views/b.py"]


def _package(tmp_path: Path, files: dict[str, str], name: str = "lit_docemb") -> Path:
    root = tmp_path / name
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_the_checker_finds_each_kind_of_violation(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "distributed.py": "import torch.distributed as dist\n",
        "data/__init__.py": "",
        "data/a.py": "def f():\n    from lit_docemb.methods.m import M  # upward, inside a function\n",
        "data/b.py": "from lit_docemb.data import c\n",
        "data/c.py": "from lit_docemb.data.b import x\n",
        "models/__init__.py": "import lightning as L\n",
        "methods/__init__.py": "",
        "methods/m.py": "from torch import distributed\nfrom ..eval import e\nM = 1\n",
        "eval/__init__.py": "",
        "eval/e.py": "from lit_docemb.methods.m import M\n",
        "losses/__init__.py": "from lit_docemb.losses.a import A\nfrom lit_docemb.losses import b\n",
        "losses/a.py": "from lit_docemb.losses import B\nA = 1\n",  # its package's front, being built: a cycle
        "losses/b.py": "from lit_docemb.losses import c\nB = 1\n",  # a sibling module through the front: none
        "losses/c.py": "C = 1\n",
    })
    found = scan(root)
    assert sorted(v.split(": ", 1)[1] for v in found["upward"]) == [
        "lit_docemb.data.a (floor 1) imports lit_docemb.methods.m (floor 3)",
        "lit_docemb.methods.m (floor 3) imports lit_docemb.eval (floor 4)",
        "lit_docemb.methods.m (floor 3) imports lit_docemb.eval.e (floor 4)",
    ]
    assert found["distributed"] == ["lit_docemb/methods/m.py:1 imports torch.distributed"]
    assert found["lightning"] == ["lit_docemb/models/__init__.py:1 imports lightning"]
    assert sorted(found["cycles"]) == [["lit_docemb.data.b", "lit_docemb.data.c"],
                                     ["lit_docemb.eval.e", "lit_docemb.methods.m"],
                                     ["lit_docemb.losses", "lit_docemb.losses.a"]]


def test_the_views_checks_find_a_module_defined_or_imported_and_a_model_module_imported(tmp_path, monkeypatch):
    root = _package(tmp_path, {
        "__init__.py": "",
        "models/__init__.py": "",
        "models/m.py": "from torch import nn\n\n\ndef edges():\n    return 1\n\n\nclass Table(nn.Embedding):\n    pass\n",
        "models/plain.py": "def tokens():\n    return 2\n",
        "views/__init__.py": "",
        "views/builder.py": "from floors_probe.models.m import Table\n",
        "views/defined.py": "from torch import nn\n\n\nclass Local(nn.Module):\n    pass\n",
        "views/collator.py": "import torch\nfrom torch import Tensor, nn\n\n\nclass Collator:\n    pass\n",
        "views/edges.py": "from floors_probe.models.m import edges\n",  # a function, but from a model's module
        "views/tokens.py": "from floors_probe.models import plain\nfrom ..models.plain import tokens\n",
        "views/late.py": "def f():\n    from floors_probe.models import m\n",
    }, name="floors_probe")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert model_classes_in_views(root) == ["floors_probe.views.builder.Table (from floors_probe.models.m)",
                                                "floors_probe.views.defined.Local (from floors_probe.views.defined)"]
        assert model_modules_imported_by_views(root) == [
            "floors_probe.views.builder imports floors_probe.models.m (floors_probe/views/builder.py:1)",
            "floors_probe.views.edges imports floors_probe.models.m (floors_probe/views/edges.py:1)",
            "floors_probe.views.late imports floors_probe.models.m (floors_probe/views/late.py:2)"]
    finally:
        for module in [m for m in sys.modules if m == "floors_probe" or m.startswith("floors_probe.")]:
            del sys.modules[module]


def test_every_folder_is_a_package_that_an_install_ships():
    """``pip install .`` ships only folders with an ``__init__.py`` (setup.cfg: ``packages = find:``)."""
    from setuptools import find_packages

    shipped = set(find_packages(str(PACKAGE.parent), include=["lit_docemb", "lit_docemb.*"]))
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("*.py")}
    assert folders - shipped == set()


def function_imports(path: Path, module: str, modules: set[str]) -> list[tuple[str, int]]:
    """(module of ``modules`` imported, line) for every import of one of ``modules`` inside a function of ``path``:
    ``from a import b`` names ``a.b`` when that is a module, else ``a``."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = from_base(node, path, module)
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            else:
                continue
            found += [(name, node.lineno) for name in (known_module(n, modules) for n in names) if name]
    return sorted(set(found))


def function_imports_in_commands(root: Path = PACKAGE) -> list[str]:
    """The imports of the package's own modules inside a function of ``commands/`` (the dispatcher's ``importlib`` of
    a command's module aside): a command module imports what it runs at its top, and ``<command> --help`` reads the
    command's signature from its source (``lit_docemb.commands.arguments``) instead of importing it."""
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    found = []
    for path in sorted((root / "commands").rglob("*.py")):
        module = module_name(path, root)
        found += [f"{path.relative_to(root.parent)}:{line} imports {target} inside a function"
                  for target, line in function_imports(path, module, modules) if target != module]
    return found


def test_commands_import_the_package_at_the_top_only():
    assert function_imports_in_commands() == []


def test_the_function_import_check_finds_every_form(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "models/__init__.py": "import torch\n",
        "models/m.py": "X = 1\n",
        "commands/__init__.py": "",
        "commands/light.py": "import json\n",
        "commands/a.py": ("def f():\n    from lit_docemb.models.m import X\n"
                          "    from lit_docemb.commands import light\n    from . import light as again\n"
                          "    import json\n"),
        "commands/b.py": "from lit_docemb.models import m\n\n\ndef f():\n    import lit_docemb.models\n",
    })
    assert [v.removesuffix(" inside a function") for v in function_imports_in_commands(root)] == [
        "lit_docemb/commands/a.py:3 imports lit_docemb.commands.light",
        "lit_docemb/commands/a.py:4 imports lit_docemb.commands.light",
        "lit_docemb/commands/a.py:2 imports lit_docemb.models.m",
        "lit_docemb/commands/b.py:5 imports lit_docemb.models"]
