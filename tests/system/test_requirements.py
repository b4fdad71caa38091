"""``pip install -e .`` installs every package that lit_docemb's code imports, except the few optional ones that
only a command (not a config) reaches and whose import error names the install line."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Import name -> distribution name where the two differ.
DISTRIBUTION = {"sklearn": "scikit-learn", "faiss": "faiss-cpu", "pytrec_eval": "pytrec-eval-terrier",
                "torch_geometric": "torch-geometric", "umap": "umap-learn", "sentence_transformers":
                "sentence-transformers", "yaml": "pyyaml"}
#: Installed by a base requirement: numpy and safetensors by torch and transformers, fsspec by lightning and
#: datasets, pyyaml by jsonargparse and transformers, tensorboard's reader by nothing (figures' hint names it).
COME_WITH_BASE = {"numpy", "safetensors", "fsspec", "pyyaml"}
#: Optional: only the figures and export commands import them, each behind an ImportError naming the install line.
OPTIONAL = {"umap-learn": {"lit_docemb/eval/figures.py"},
            "sentence-transformers": {"lit_docemb/export/forms.py", "lit_docemb/export/modules.py"},
            "tensorboard": {"lit_docemb/eval/figures.py"}}


def _imported_distributions() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / "lit_docemb").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top != "lit_docemb" and top not in sys.stdlib_module_names:
                    distribution = DISTRIBUTION.get(top, top).lower().replace("_", "-")
                    found.setdefault(distribution, set()).add(str(path.relative_to(ROOT)))
    return found


def _requirements() -> set[str]:
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return {re.split(r"[\[<>=!~ ]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")
            for line in lines if line.strip() and not line.startswith("#")}


def test_every_imported_package_is_a_base_requirement_or_an_optional_one_of_a_command():
    required, imported = _requirements(), _imported_distributions()
    assert "gensim" in imported  # CTPE's word2vec initialisation (configs/ctpe/*.yaml)
    missing = {name: sorted(files) for name, files in imported.items()
               if name not in required and name not in COME_WITH_BASE and name not in OPTIONAL}
    assert not missing, f"imported by lit_docemb but not in requirements.txt: {missing}"
    for name, files in imported.items():
        if name in OPTIONAL:
            assert files == OPTIONAL[name], f"{name} is optional for {OPTIONAL[name]} only, imported by {files}"
            assert any(re.search(rf"pip install '?{name}\b", (ROOT / file).read_text(encoding="utf-8"))
                       for file in OPTIONAL[name])


def test_word2vec_configs_need_nothing_beyond_the_base_install():
    word2vec_configs = [path for path in (ROOT / "configs").rglob("*.yaml")
                        if re.search(r"init:\s*word2vec\b", path.read_text(encoding="utf-8"))]
    assert word2vec_configs, "the CTPE configs initialise with word2vec"
    assert "gensim" in _requirements()
