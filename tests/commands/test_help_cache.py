"""LightningCLI's help of fit/validate/test/predict is built once (importing Lightning), then printed from the
cache without importing torch; the cache key follows the installed packages and lit_docemb's source."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lit_docemb.commands import help_cache

HELP_WITHOUT_TORCH = """
import io, json, sys
from lit_docemb.commands import main
saved, sys.stdout = sys.stdout, io.StringIO()
try:
    main([sys.argv[1], '--help'])
except SystemExit as stop:
    code = stop.code
text, sys.stdout = sys.stdout.getvalue(), saved
print(json.dumps({'code': code, 'help': text, 'torch': 'torch' in sys.modules}))
"""


def help_of(command: str, cache: str) -> dict:
    env = {**os.environ, "LIT_DOCEMB_CACHE": cache}
    out = subprocess.run([sys.executable, "-c", HELP_WITHOUT_TORCH, command], capture_output=True, text=True,
                         check=True, env=env, timeout=300).stdout
    return json.loads(out.splitlines()[-1])


def test_fit_help_is_built_once_then_printed_without_torch(tmp_path):
    first = help_of("fit", str(tmp_path))
    assert first["code"] == 0 and first["torch"] and "--trainer" in first["help"] and "--model" in first["help"]
    second = help_of("fit", str(tmp_path))
    assert second == {**first, "torch": False}
    assert [p.name.split("-")[:2] for p in tmp_path.iterdir()] == [["help", "fit"]]


def test_the_key_follows_the_command_and_the_installed_versions(monkeypatch):
    fit, validate = help_cache.help_key("fit"), help_cache.help_key("validate")
    assert fit != validate and fit == help_cache.help_key("fit")
    real = help_cache.metadata.version
    monkeypatch.setattr(help_cache.metadata, "version",
                        lambda name: "0.0.1" if name == "lightning" else real(name))
    assert help_cache.help_key("fit") != fit


def test_an_unwritable_cache_only_means_building_each_time(tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("")  # the cache folder's place is a file: mkdir fails
    os.environ["LIT_DOCEMB_CACHE"] = str(blocked / "cache")
    try:
        try:
            help_cache.print_help("fit", lambda: print("usage: fit"))
        except SystemExit as stop:
            assert stop.code == 0
    finally:
        del os.environ["LIT_DOCEMB_CACHE"]
    assert capsys.readouterr().out == "usage: fit\n"
