"""The benchmark scripts, imported as modules for their tests."""

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@contextmanager
def benchmark_module(name: str):
    """``benchmarks/<name>.py`` imported as module ``name`` for the duration of the block."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]
